"""Empirical bias correction: cancel the mean output shift that weight rounding causes.

Rounding a layer's weights to int8 changes its output by ``(W_q - W) x``. Over the
calibration samples that error has a mean per output channel, ``(W_q - W)^T E[patch]``,
which is not zero when the inputs are not (after a ReLU they never are): every output moves
by a constant, and a small-magnitude regression head feels it most. Subtracting that mean
from the bias removes it (Nagel et al., ICCV 2019, the empirical variant). ``W_q`` is the
converter's own rounding (symmetric, narrow, per channel or per tensor), computed here on
the weights the converter will see, so the correction matches what it makes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tfcompress.quantization.methods.graph import LayerGraph
from tfcompress.quantization.methods.linear import LinearWeights, quantize_matrix
from tfcompress.quantization.methods.registry import RewriteContext, WeightMethod, register_method
from tfcompress.quantization.methods.stats import PatchMoments, Probe, Update, collect


@dataclass(frozen=True)
class BiasCorrection:
    """The correction of one layer's bias.

    Attributes:
        layer: The conv, depthwise or dense layer.
        max_shift: The largest per-channel correction, in the layer's output units.
        max_bias: The largest absolute bias before the correction, for scale.
    """

    layer: str
    max_shift: float
    max_bias: float

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports."""
        return {
            "layer": self.layer,
            "max_shift": float(f"{self.max_shift:.6g}"),
            "max_bias": float(f"{self.max_bias:.6g}"),
        }


@register_method
class BiasCorrectionMethod(WeightMethod):
    """``bias-correction``: the last weight method, on the weights the converter will see."""

    name = "bias-correction"
    summary = "remove the mean output shift that weight rounding causes, per channel"
    kind = "bias"
    order = 30
    report_key = "corrected"

    def rewrite(self, context: RewriteContext) -> tuple[BiasCorrection, ...]:
        """:func:`correct_biases` on the copy (the float check from its pass, if still due)."""
        return correct_biases(
            context.graph,
            context.x,
            per_channel=context.per_channel,
            probe=context.probe,
            also=context.also(),
        )


def correct_biases(
    graph: LayerGraph,
    x: Any,
    *,
    per_channel: bool,
    probe: Probe | None = None,
    also: Sequence[tuple[Any, Update]] = (),
) -> tuple[BiasCorrection, ...]:
    """Correct the bias of every linear layer that has one, in place.

    Args:
        graph: The graph of the model copy (after folding, equalization and AdaRound: the
            weights the converter will quantize).
        x: Calibration samples (one array or a dict by input name).
        per_channel: The converter quantizes weights per output channel (else per tensor).
        probe: A probe of the model returning every tensor asked for (shared by the methods
            of one rewrite, traced once); None builds one.
        also: More ``(tensor, update)`` requests served by the same pass (the rewrite's
            float check).

    Returns:
        One entry per corrected layer; layers with no bias anywhere (no ``use_bias`` and no
        folded BatchNorm) are left as they are.

    Example:
        >>> corrections = correct_biases(LayerGraph(copy), x_calib, per_channel=True)
        ... # doctest: +SKIP
    """
    layers = [n for n in graph.linear_nodes() if LinearWeights.read(n).bias is not None]
    moments = {id(n): PatchMoments(n.layer, n.kind) for n in layers}
    requests = [(n.layer.input, moments[id(n)].update) for n in layers]
    collect(graph.model, x, [*requests, *also], probe=probe)
    corrections = []
    for node in layers:
        weights = LinearWeights.read(node)
        matrix = weights.matrix()
        error = quantize_matrix(matrix, per_channel=per_channel) - matrix
        mean = moments[id(node)].mean
        if weights.kind == "depthwise":  # (taps, cin) -> one value per (cin, mult) column
            mult = weights.kernel.shape[3]
            shift = (error * np.repeat(mean, mult, axis=1)).sum(axis=0)
        else:
            shift = mean @ error
        before = np.asarray(weights.bias)
        weights.bias = before - shift
        weights.write()
        corrections.append(
            BiasCorrection(node.name, float(np.abs(shift).max()), float(np.abs(before).max()))
        )
    return tuple(corrections)
