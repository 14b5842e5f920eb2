"""The weight methods, run in order on a copy of the float Keras model.

The caller's model is never touched: it is cloned (same layers, names and weights), the
BatchNorms that follow linear layers are folded, then ``equalize``, ``adaround`` and
``bias-correction`` run as asked. Folding and equalization must not change what the model
computes: the copy is run against the original on the calibration samples right after
them, and the largest difference is reported (AdaRound and bias correction change the float
model on purpose, so it is measured before them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tfcompress._compat.keras import flavour_of, keras_module
from tfcompress.data import Dataset
from tfcompress.errors import UnsupportedModelError
from tfcompress.quantization.methods.adaround import RoundedLayer, adaround
from tfcompress.quantization.methods.bias_correction import BiasCorrection, correct_biases
from tfcompress.quantization.methods.equalize import EqualizedPair, equalize, find_groups
from tfcompress.quantization.methods.folding import FoldedBatchNorm, fold_batchnorms
from tfcompress.quantization.methods.graph import LayerGraph, ordered_feed
from tfcompress.quantization.methods.stats import BATCH, Probe, batches

logger = logging.getLogger(__name__)

#: Folding and equalization must keep every output within this share of the largest output
#: (float32 rounding through rescaled weights stays orders of magnitude below it).
FLOAT_TOLERANCE = 1e-3
#: Samples per call when the copy is checked against the original.
CHECK_BATCH = BATCH


@dataclass(frozen=True)
class Rewrite:
    """What the weight methods changed in the float model.

    Attributes:
        methods: The weight methods that ran, in order.
        folded: The BatchNorms folded into the layer before them.
        equalized: One entry per equalized source layer (its scales).
        rounded: One entry per layer AdaRound rounded.
        corrected: One entry per layer whose bias was corrected.
        float_max_difference: After folding and equalization, the largest absolute
            difference between the copy's outputs and the original's on the calibration
            samples (float tolerance: the rewrite keeps the function).
        float_output_peak: The largest absolute output of the original on those samples,
            for scale.
        seconds: Wall time of the rewrite (statistics passes included).
    """

    methods: tuple[str, ...]
    folded: tuple[FoldedBatchNorm, ...]
    equalized: tuple[EqualizedPair, ...]
    rounded: tuple[RoundedLayer, ...]
    corrected: tuple[BiasCorrection, ...]
    float_max_difference: float
    float_output_peak: float
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports."""
        return {
            "methods": list(self.methods),
            "folded": [f.to_dict() for f in self.folded],
            "equalized": [e.to_dict() for e in self.equalized],
            "rounded": [r.to_dict() for r in self.rounded],
            "corrected": [c.to_dict() for c in self.corrected],
            "float_max_difference": float(f"{self.float_max_difference:.6g}"),
            "float_output_peak": float(f"{self.float_output_peak:.6g}"),
            "seconds": round(self.seconds, 3),
        }


def rewrite_model(
    model: Any, methods: Sequence[str], calibration: Dataset, *, per_channel: bool
) -> tuple[Any, Rewrite]:
    """A copy of ``model`` with the weight methods in ``methods`` applied.

    Args:
        model: A Sequential or Functional Keras model (either flavour).
        methods: Method names; the weight methods among them run (in catalog order).
        calibration: The calibration samples (one array or a dict by input name).
        per_channel: The converter will quantize weights per output channel.

    Returns:
        The rewritten copy and what was changed.

    Raises:
        UnsupportedModelError: Not a Keras model built on ``keras.Input``, or a model that
            cannot be cloned.

    Example:
        >>> copy, rewrite = rewrite_model(model, ["equalize"], calib, per_channel=True)
        ... # doctest: +SKIP
        >>> rewrite.float_max_difference < 1e-4  # doctest: +SKIP
        True
    """
    start = time.perf_counter()
    flavour = flavour_of(model)
    if flavour is None:
        raise UnsupportedModelError(
            f"the weight methods ({', '.join(methods)}) rewrite a Keras model; "
            f"{getattr(model, 'name', type(model).__name__)!r} is not one: load the .keras "
            "or .h5 file instead of a SavedModel."
        )
    LayerGraph(model)  # refuses subclassed models before any work
    expected, peak = _reference_outputs(model, calibration)
    copy = _clone(model, flavour)
    graph = LayerGraph(copy)
    folded = fold_batchnorms(graph)
    probe = Probe(copy, _tensors(graph, copy))  # traced once, shared by every pass below
    equalized: tuple[EqualizedPair, ...] = ()
    if "equalize" in methods:
        equalized = equalize(graph, calibration.x, per_channel=per_channel, probe=probe)
    # The copy's outputs after folding and equalization, from the next pass over the samples
    # (AdaRound and bias correction change the float model on purpose, after collecting).
    check = _OutputCheck(expected, copy.outputs)
    rounded: tuple[RoundedLayer, ...] = ()
    if "adaround" in methods:
        rounded = adaround(
            graph, calibration.x, per_channel=per_channel, probe=probe, also=check.requests()
        )
    corrected: tuple[BiasCorrection, ...] = ()
    if "bias-correction" in methods:
        corrected = correct_biases(
            graph, calibration.x, per_channel=per_channel, probe=probe, also=check.requests()
        )
    if not check.done:
        probe.run(calibration.x, check.requests())
    difference = check.difference
    if not difference <= FLOAT_TOLERANCE * peak + 1e-6:
        raise UnsupportedModelError(
            f"folding and equalizing {model.name!r} changed its float outputs by up to "
            f"{difference:.3g} (largest output {peak:.3g}); a layer does not behave as the "
            "methods assume: quantize without the weight methods, and report the model."
        )
    rewrite = Rewrite(
        methods=tuple(m for m in ("equalize", "adaround", "bias-correction") if m in methods),
        folded=folded,
        equalized=equalized,
        rounded=rounded,
        corrected=corrected,
        float_max_difference=difference,
        float_output_peak=peak,
        seconds=time.perf_counter() - start,
    )
    logger.info(
        "rewrote %s: %d BatchNorms folded, %d pairs equalized, %d layers rounded, %d biases "
        "corrected (max float difference %.3g)",
        model.name,
        len(folded),
        len(equalized),
        len(rounded),
        len(corrected),
        difference,
    )
    return copy, rewrite


def _clone(model: Any, flavour: Any) -> Any:
    try:
        copy = keras_module(flavour).models.clone_model(model)
        copy.set_weights(model.get_weights())
    # Keras raises these for layers it cannot rebuild from their config (custom layers
    # without get_config, unregistered classes): the model cannot be rewritten, say why.
    except (TypeError, ValueError, NotImplementedError) as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise UnsupportedModelError(
            f"{model.name!r} cannot be cloned for the weight methods ({first}); register its "
            "custom layers (get_config) or quantize without the weight methods."
        ) from error
    for layer in copy.layers:  # preprocessing layers cache their state when it is set
        if callable(getattr(layer, "adapt", None)) and callable(
            getattr(layer, "finalize_state", None)
        ):
            layer.finalize_state()
    return copy


def _tensors(graph: LayerGraph, copy: Any) -> list[Any]:
    """Every tensor a method may ask for: linear inputs, equalization's tensors, outputs."""
    tensors = [n.layer.input for n in graph.linear_nodes()]
    for group in find_groups(graph):
        tensors += [n.layer.output for n in {*group.quantized(), *group.clipping()}]
    return [*tensors, *copy.outputs]


def _reference_outputs(model: Any, calibration: Dataset) -> tuple[list[np.ndarray], float]:
    """The original's outputs on the samples, and its largest absolute output.

    Returns:
        One list per batch (as :func:`batches` cuts them) of the outputs in output order,
        and the peak.
    """
    outputs, peak = [], 0.0
    for part, count in batches(calibration.x, CHECK_BATCH):
        values = [
            v[:count]
            for v in _flat_outputs(
                model.predict_on_batch(ordered_feed(model, part)),
                getattr(model, "output_names", None) or [],
            )
        ]
        outputs.append(values)
        peak = max([peak, *(float(np.max(np.abs(v))) for v in values)])
    return outputs, peak


class _OutputCheck:
    """The copy's outputs, batch by batch as a probe pass hands them, against the original's."""

    def __init__(self, expected: list[list[np.ndarray]], outputs: list[Any]) -> None:
        self.expected, self.outputs = expected, list(outputs)
        self.seen: dict[int, int] = {}
        self.difference = 0.0
        self.claimed = False

    @property
    def done(self) -> bool:
        return self.claimed

    def requests(self) -> list[tuple[Any, Any]]:
        """Requests for the copy's outputs, served once (by the first pass that takes them)."""
        if self.claimed:
            return []
        self.claimed = True
        return [(t, self._update(i)) for i, t in enumerate(self.outputs)]

    def _update(self, position: int) -> Any:
        def update(values: np.ndarray) -> None:
            batch = self.seen.get(position, 0)
            self.seen[position] = batch + 1
            expected = self.expected[batch][position]
            gap = float(np.max(np.abs(np.asarray(values, np.float64) - expected)))
            self.difference = max(self.difference, gap)

        return update


def _flat_outputs(value: Any, names: list[str]) -> list[np.ndarray]:
    """The outputs in ``model.outputs`` order (a dict from ``predict`` may be in another)."""
    if isinstance(value, dict):
        value = (
            [value[name] for name in names] if set(names) == set(value) else list(value.values())
        )
    if not isinstance(value, list | tuple):
        value = [value]
    return [np.asarray(v, np.float64) for v in value]
