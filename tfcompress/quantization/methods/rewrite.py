"""The weight methods, run in order on a copy of the float Keras model.

The caller's model is never touched: it is cloned (same layers, names and weights), the
BatchNorms that follow linear layers are folded, then the weight methods asked for run in
their order, each through its :class:`~.registry.WeightMethod` (``equalize``, ``adaround``).
Folding and the methods that keep the function (``equalize``) must not change what the
model computes: the copy is run against the original on the calibration samples right after
them, and the largest difference is reported (AdaRound changes the float model on purpose,
so it is measured before it). Bias correction is not one of these: it edits the calibrated
flatbuffer made from the copy (:mod:`.bias_correction`).
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
from tfcompress.quantization.methods.adaround import RoundedLayer
from tfcompress.quantization.methods.equalize import EqualizedPair
from tfcompress.quantization.methods.folding import FoldedBatchNorm, fold_batchnorms
from tfcompress.quantization.methods.graph import LayerGraph, ordered_feed
from tfcompress.quantization.methods.registry import (
    RewriteContext,
    WeightMethod,
    method_names,
    weight_methods,
)
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
        changes: Each weight method's report entries under its ``report_key``, for every
            registered weight method in order (empty for those that did not run):
            ``equalized`` (one entry per equalized source layer, its scales), ``rounded``
            (per layer AdaRound rounded); :meth:`changed` and the properties read them.
        float_max_difference: After folding and equalization, the largest absolute
            difference between the copy's outputs and the original's on the calibration
            samples (float tolerance: the rewrite keeps the function).
        float_output_peak: The largest absolute output of the original on those samples,
            for scale.
        seconds: Wall time of the rewrite (statistics passes included).
    """

    methods: tuple[str, ...]
    folded: tuple[FoldedBatchNorm, ...]
    changes: tuple[tuple[str, tuple[Any, ...]], ...]
    float_max_difference: float
    float_output_peak: float
    seconds: float

    def changed(self, report_key: str) -> tuple[Any, ...]:
        """The entries of the weight method whose ``report_key`` this is (empty if none)."""
        return dict(self.changes).get(report_key, ())

    @property
    def equalized(self) -> tuple[EqualizedPair, ...]:
        """One entry per equalized source layer (its scales)."""
        return self.changed("equalized")

    @property
    def rounded(self) -> tuple[RoundedLayer, ...]:
        """One entry per layer AdaRound rounded."""
        return self.changed("rounded")

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports."""
        return {
            "methods": list(self.methods),
            "folded": [f.to_dict() for f in self.folded],
            **{key: [e.to_dict() for e in entries] for key, entries in self.changes},
            "float_max_difference": float(f"{self.float_max_difference:.6g}"),
            "float_output_peak": float(f"{self.float_output_peak:.6g}"),
            "seconds": round(self.seconds, 3),
        }


def rewrite_model(
    model: Any, methods: Sequence[str], calibration: Dataset, *, per_channel: bool
) -> tuple[Any, Rewrite]:
    """A copy of ``model`` with the weight methods of ``methods`` applied, and what changed.

    ``model`` is Sequential or Functional; the methods run in registry order; with
    ``per_channel`` the converter will quantize weights per output channel.

    Raises:
        UnsupportedModelError: Not a Keras model built on ``keras.Input``, or a model that
            cannot be cloned.
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
    everyone = weight_methods(method_names())
    probe = Probe(copy, _tensors(graph, copy, everyone))  # traced once, shared by every pass
    chosen = weight_methods(methods)
    check: _OutputCheck | None = None

    def also() -> list[tuple[Any, Any]]:  # the float check rides on the next pass, once
        return [] if check is None else check.requests()

    context = RewriteContext(graph, calibration.x, per_channel, probe, also=also)
    entries: dict[str, tuple[Any, ...]] = {}
    for method in chosen:
        if check is None and not method.keeps_function:
            # The copy's outputs after folding and the methods that keep the function, from
            # the next pass over the samples (this method changes the float model on
            # purpose, after collecting).
            check = _OutputCheck(expected, copy.outputs)
        entries[method.name] = method.rewrite(context)
    if check is None:
        check = _OutputCheck(expected, copy.outputs)
    if not check.claimed:
        probe.run(calibration.x, check.requests())
    difference = check.difference
    if not difference <= FLOAT_TOLERANCE * peak + 1e-6:
        raise UnsupportedModelError(
            f"folding and equalizing {model.name!r} changed its float outputs by up to "
            f"{difference:.3g} (largest output {peak:.3g}); a layer does not behave as the "
            "methods assume: quantize without the weight methods, and report the model."
        )
    rewrite = Rewrite(
        methods=tuple(m.name for m in chosen),
        folded=folded,
        changes=tuple((m.report_key, entries.get(m.name, ())) for m in everyone),
        float_max_difference=difference,
        float_output_peak=peak,
        seconds=time.perf_counter() - start,
    )
    logger.info(
        "rewrote %s: %d BatchNorms folded, %s (max float difference %.3g)",
        model.name,
        len(folded),
        ", ".join(f"{len(entries[m.name])} {m.report_key}" for m in chosen) or "nothing else",
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


def _tensors(graph: LayerGraph, copy: Any, everyone: Sequence[WeightMethod]) -> list[Any]:
    """Every tensor a method may ask for: linear inputs, each method's own tensors, outputs."""
    tensors = [n.layer.input for n in graph.linear_nodes()]
    for method in everyone:
        tensors += method.probe_tensors(graph)
    return [*tensors, *copy.outputs]


def _reference_outputs(model: Any, calibration: Dataset) -> tuple[list[np.ndarray], float]:
    """The original's outputs on the samples, and its largest absolute output.

    One list per batch (as :func:`batches` cuts them) of the outputs in output order.
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
