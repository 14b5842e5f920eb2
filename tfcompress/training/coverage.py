"""Which layers tfmot rewrites, which it leaves alone, and why: the coverage report."""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass
from typing import Any

from tfcompress._compat.tfmot import tf_keras, tfmot
from tfcompress.errors import UnsupportedModelError

logger = logging.getLogger(__name__)

_NOT_SUPPORTED = re.compile(
    r"Layer (?P<name>[^:\s]+):<class '[\w.]*?(?P<cls>\w+)'> is not supported"
)


@dataclass(frozen=True)
class LayerCoverage:
    """What one technique did to one layer.

    Attributes:
        layer: The layer's name in the original model.
        kind: Its class name (``Conv2D``, ``PReLU``...).
        status: ``quantized``, ``pruned``, ``clustered`` or ``skipped``.
        reason: Why, for a skipped layer (empty otherwise).
    """

    layer: str
    kind: str
    status: str
    reason: str = ""

    def to_dict(self) -> dict[str, str]:
        """Plain data for JSON reports."""
        return asdict(self)


def quantize_with_fallback(
    model: Any, *, scheme: str = "default"
) -> tuple[Any, list[LayerCoverage]]:
    """Wrap every layer tfmot can quantize for QAT; leave the others in float.

    tfmot itself decides: every layer is annotated, and each layer that ``quantize_apply``
    rejects is taken out of the annotation and listed as skipped with tfmot's reason.

    Args:
        model: A tf-keras Sequential/Functional model.
        scheme: ``default`` (8-bit), ``prune_preserve`` (keeps zeros) or ``cluster_preserve``
            (keeps shared weights and zeros).

    Returns:
        The QAT model and one coverage row per layer (input layers left out).

    Raises:
        UnsupportedModelError: tfmot cannot quantize even a single layer.
    """
    quant = tfmot().quantization.keras
    keras2 = tf_keras()
    skipped: dict[str, str] = {}
    layers = [layer for layer in model.layers if type(layer).__name__ != "InputLayer"]
    for _ in range(len(layers) + 1):

        def annotate(layer: Any) -> Any:
            if type(layer).__name__ == "InputLayer" or layer.name in skipped:
                return layer
            return quant.quantize_annotate_layer(layer)

        annotated = keras2.models.clone_model(model, clone_function=annotate)
        annotated.set_weights(model.get_weights())
        try:
            with quant.quantize_scope():
                qat_model = quant.quantize_apply(annotated, _scheme(scheme))
        except RuntimeError as error:
            match = _NOT_SUPPORTED.search(str(error))
            if match is None or match.group("name") in skipped:
                raise
            skipped[match.group("name")] = (
                f"tfmot has no 8-bit QAT config for {match.group('cls')}; it trains in float "
                "and the converter calibrates it from the representative data"
            )
            logger.info("QAT skips %s (%s)", match.group("name"), match.group("cls"))
            continue
        return qat_model, [
            LayerCoverage(
                layer.name,
                type(layer).__name__,
                "skipped" if layer.name in skipped else "quantized",
                skipped.get(layer.name, ""),
            )
            for layer in layers
        ]
    raise UnsupportedModelError(
        f"tfmot cannot quantize any layer of {model.name!r}; use post-training quantization "
        "(tfcompress.quantize) instead."
    )


def _scheme(name: str) -> Any:
    module = tfmot()
    if name == "default":
        return module.quantization.keras.default_8bit.Default8BitQuantizeScheme()
    if name == "prune_preserve":
        return module.quantization.keras.collab_opts.Default8BitPrunePreserveQuantizeScheme()
    if name == "cluster_preserve":
        combine = module.experimental.combine
        return combine.Default8BitClusterPreserveQuantizeScheme(preserve_sparsity=True)
    raise ValueError(f"unknown QAT scheme {name!r}")


def prunable_layers(
    model: Any, *, m_by_n: tuple[int, int] | None = None, skip: frozenset[str] = frozenset()
) -> list[LayerCoverage]:
    """Decide, for each layer with weights, whether magnitude pruning applies.

    Args:
        model: A tf-keras model.
        m_by_n: Structured sparsity (e.g. ``(2, 4)``): only Conv2D/Dense kernels whose input
            channels split into whole groups of ``n`` qualify.
        skip: Layer names the user excluded.

    Returns:
        One row per layer holding weights: ``pruned`` or ``skipped`` with the reason.
    """
    registry = _prune_registry()
    rows: list[LayerCoverage] = []
    for layer in model.layers:
        if not layer.weights:
            continue
        kind = type(layer).__name__
        reason = ""
        if layer.name in skip:
            reason = "excluded by skip_layers"
        elif not registry.supports(layer):
            reason = f"tfmot's PruneRegistry does not know {kind}; its weights stay dense"
        elif not registry._weight_names(layer):  # the registry's only lookup
            reason = f"tfmot prunes no weights of {kind} (too few to matter); they stay dense"
        elif m_by_n is not None:
            reason = _m_by_n_obstacle(layer, m_by_n)
        rows.append(LayerCoverage(layer.name, kind, "skipped" if reason else "pruned", reason))
    return rows


def clusterable_layers(
    model: Any, *, clusters: int, skip: frozenset[str] = frozenset()
) -> list[LayerCoverage]:
    """Decide, for each layer with weights, whether weight clustering applies.

    Returns:
        One row per layer holding weights: ``clustered`` or ``skipped`` with the reason.
    """
    registry = _cluster_registry()
    rows: list[LayerCoverage] = []
    for layer in model.layers:
        if not layer.weights:
            continue
        kind = type(layer).__name__
        reason = ""
        if layer.name in skip:
            reason = "excluded by skip_layers"
        elif not registry.supports(layer) or not registry._weight_names(layer):
            reason = f"tfmot clusters no weights of {kind}; they stay as they are"
        elif not _has_enough_weights(layer, clusters):
            reason = f"fewer weights than {clusters} clusters"
        rows.append(LayerCoverage(layer.name, kind, "skipped" if reason else "clustered", reason))
    return rows


def _m_by_n_obstacle(layer: Any, m_by_n: tuple[int, int]) -> str:
    kind = type(layer).__name__
    if kind not in {"Conv2D", "Dense"}:
        return f"tfmot's {m_by_n[0]}:{m_by_n[1]} pruning handles Conv2D and Dense kernels only"
    channels = int(layer.kernel.shape[-2])
    if channels % m_by_n[1]:
        return (
            f"{channels} input channel(s) do not split into groups of {m_by_n[1]}; "
            "the kernel stays dense"
        )
    return ""


def _has_enough_weights(layer: Any, clusters: int) -> bool:
    kernel = getattr(layer, "kernel", None)
    return kernel is None or int(kernel.shape.num_elements()) > clusters


def _prune_registry() -> Any:
    from tensorflow_model_optimization.python.core.sparsity.keras.prune_registry import (
        PruneRegistry,
    )

    return PruneRegistry


def _cluster_registry() -> Any:
    from tensorflow_model_optimization.python.core.clustering.keras.clustering_registry import (
        ClusteringRegistry,
    )

    return ClusteringRegistry
