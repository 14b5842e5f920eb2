"""Which layers tfmot rewrites, which it leaves alone, and why: the coverage report."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from tfcompress._compat.tfmot import tf_keras, tfmot, tfmot_logs_to
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
    rejects is taken out of the annotation and listed as skipped with tfmot's reason. A
    layer whose annotation makes tfmot's graph transform itself fail (an error other than
    "not supported") is found by bisection over the layers, left float and listed as
    skipped with tfmot's error. Layer names are reserved first, so the layers tfmot's
    transforms create cannot take the name of a layer of the model (see
    :func:`reserve_layer_names`).

    Args:
        model: A tf-keras Sequential/Functional model.
        scheme: ``default`` (8-bit), ``prune_preserve`` (keeps zeros) or ``cluster_preserve``
            (keeps shared weights and zeros).

    Raises:
        UnsupportedModelError: tfmot cannot quantize even a single layer, or its transform
            fails in a way no single layer explains (the message names what it tried).
    """
    skipped: dict[str, str] = {}
    layers = [layer for layer in model.layers if type(layer).__name__ != "InputLayer"]
    for _ in range(len(layers) + 1):
        chosen = [layer.name for layer in layers if layer.name not in skipped]
        if not chosen:
            break
        try:
            qat_model = _quantize_apply(model, set(chosen), scheme)
        except RuntimeError as error:
            match = _NOT_SUPPORTED.search(str(error))
            if match is None:
                _skip_transform_failure(model, layers, chosen, skipped, scheme, error)
                continue
            if match.group("name") in skipped:
                raise UnsupportedModelError(
                    f"tfmot rejects layer {match.group('name')!r} even when it is not "
                    f"annotated: {_first_line(error)}; use post-training quantization "
                    "(tfcompress.quantize) instead."
                ) from error
            skipped[match.group("name")] = (
                f"tfmot has no 8-bit QAT config for {match.group('cls')}; it trains in float "
                "and the converter calibrates it from the representative data"
            )
            logger.info("QAT skips %s (%s)", match.group("name"), match.group("cls"))
            continue
        except _TRANSFORM_ERRORS as error:
            _skip_transform_failure(model, layers, chosen, skipped, scheme, error)
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


def reserve_layer_names(model: Any) -> None:
    """Make tf-keras's automatic layer names skip every name ``model`` already uses.

    tfmot's QAT transforms build new layers without names (``SeparableConvQuantize`` splits
    a ``SeparableConv2D`` into a ``DepthwiseConv2D`` and a 1x1 ``Conv2D``; the input gets a
    ``QuantizeLayer``), so tf-keras names them from its session counter: ``conv2d``,
    ``conv2d_1``... A model loaded from a file (or bridged from Keras 3) did not advance that
    counter, so the new ``Conv2D`` can take the name of one of the model's own layers, and
    tfmot's graph rewrite, which finds layers by name, then wires the wrong tensors together
    (mini-Xception: "Inputs have incompatible shapes (22, 22, 8) and (22, 22, 16)" at an
    ``Add``). Advancing the counter past every ``<name>_<n>`` the model holds prevents that.
    The counter only ever moves forward: layers created later get higher suffixes, nothing
    else changes.
    """
    try:
        from tf_keras.src.backend import get_default_graph_uid_map
    except ImportError:  # a tf-keras without it: the bisection fallback still applies
        logger.debug("tf-keras has no get_default_graph_uid_map; layer names not reserved")
        return
    counters = get_default_graph_uid_map()
    for layer in model.layers:
        base, index = _name_parts(layer.name)
        key = ("", base)
        counters[key] = max(counters[key], index + 1)


_TRANSFORM_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError)
_TRANSFORM_FAILS = "tfmot's QAT transform fails on"
#: Layers left float for transform failures before QAT gives up with a typed error.
MAX_TRANSFORM_SKIPS = 8
_SUFFIX = re.compile(r"^(?P<base>.+?)_(?P<index>\d+)$")


def _name_parts(name: str) -> tuple[str, int]:
    """``conv2d_7`` -> ``("conv2d", 7)``; ``conv2d`` -> ``("conv2d", 0)``."""
    match = _SUFFIX.match(name)
    return (match.group("base"), int(match.group("index"))) if match else (name, 0)


def _quantize_apply(model: Any, annotate: set[str], scheme: str) -> Any:
    quant = tfmot().quantization.keras

    def wrap(layer: Any) -> Any:
        if type(layer).__name__ == "InputLayer" or layer.name not in annotate:
            return layer
        return quant.quantize_annotate_layer(layer)

    annotated = tf_keras().models.clone_model(model, clone_function=wrap)
    annotated.set_weights(model.get_weights())
    reserve_layer_names(model)
    with quant.quantize_scope(), tfmot_logs_to(logger):
        return quant.quantize_apply(annotated, _scheme(scheme))


def _skip_transform_failure(
    model: Any,
    layers: list[Any],
    chosen: list[str],
    skipped: dict[str, str],
    scheme: str,
    error: BaseException,
) -> None:
    """Find the layer whose annotation breaks tfmot's transform and skip it, or raise."""
    failed = [name for name, reason in skipped.items() if reason.startswith(_TRANSFORM_FAILS)]
    culprit = _first_failing_layer(model, chosen, scheme) if chosen else None
    kind = next((type(layer).__name__ for layer in layers if layer.name == culprit), "")
    if culprit is None or len(failed) >= MAX_TRANSFORM_SKIPS:
        where = f" at layer {culprit!r} ({kind})" if culprit else ""
        tried = f"; leaving {', '.join(map(repr, failed))} float did not help" if failed else ""
        raise UnsupportedModelError(
            f"tfmot's QAT transform fails on {model.name!r}{where}: {_first_line(error)}{tried}; "
            "use post-training quantization (tfcompress.quantize) instead."
        ) from error
    skipped[culprit] = (
        f"{_TRANSFORM_FAILS} this {kind} ({_first_line(error)}); it trains in float and the "
        "converter calibrates it from the representative data"
    )
    logger.warning("QAT leaves %s (%s) float: tfmot's transform fails on it", culprit, kind)


def _first_failing_layer(model: Any, chosen: list[str], scheme: str) -> str:
    """The first layer (in model order) whose annotation makes ``quantize_apply`` fail.

    Bisection over prefixes of ``chosen``: annotating ``chosen[:k]`` works for k below the
    answer and fails from it on (annotating all of ``chosen`` is known to fail; annotating
    none is no test, tfmot refuses a model with nothing to quantize).
    """

    def fails(count: int) -> bool:
        try:
            _quantize_apply(model, set(chosen[:count]), scheme)
        except RuntimeError as error:  # "not supported" comes after the transform worked
            return _NOT_SUPPORTED.search(str(error)) is None
        except _TRANSFORM_ERRORS:
            return True
        return False

    low, high = 0, len(chosen)
    while high - low > 1:
        middle = (low + high) // 2
        if fails(middle):
            high = middle
        else:
            low = middle
    return chosen[high - 1]


def _first_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return (text[:157] + "...") if len(text) > 160 else text or type(error).__name__


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
    """
    from tensorflow_model_optimization.python.core.sparsity.keras.prune_registry import (
        PruneRegistry as registry,
    )

    def obstacle(layer: Any, kind: str) -> str:
        if not registry.supports(layer):
            return f"tfmot's PruneRegistry does not know {kind}; its weights stay dense"
        if not registry._weight_names(layer):  # the registry's only lookup
            return f"tfmot prunes no weights of {kind} (too few to matter); they stay dense"
        return "" if m_by_n is None else _m_by_n_obstacle(layer, m_by_n)

    return _coverage(model, skip, "pruned", obstacle)


def clusterable_layers(
    model: Any, *, clusters: int, skip: frozenset[str] = frozenset()
) -> list[LayerCoverage]:
    """Decide, for each layer with weights, whether weight clustering applies."""
    from tensorflow_model_optimization.python.core.clustering.keras.clustering_registry import (
        ClusteringRegistry as registry,
    )

    def obstacle(layer: Any, kind: str) -> str:
        if not registry.supports(layer) or not registry._weight_names(layer):
            return f"tfmot clusters no weights of {kind}; they stay as they are"
        return (
            ""
            if _has_enough_weights(layer, clusters)
            else f"fewer weights than {clusters} clusters"
        )

    return _coverage(model, skip, "clustered", obstacle)


def _coverage(
    model: Any, skip: frozenset[str], done: str, obstacle: Callable[[Any, str], str]
) -> list[LayerCoverage]:
    """One row per layer with weights: ``done``, or skipped with the user's or tfmot's reason."""
    rows: list[LayerCoverage] = []
    for layer in (layer for layer in model.layers if layer.weights):
        kind = type(layer).__name__
        reason = "excluded by skip_layers" if layer.name in skip else obstacle(layer, kind)
        rows.append(LayerCoverage(layer.name, kind, "skipped" if reason else done, reason))
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
