"""Activation range search: choose each tensor's int8 range instead of taking min/max.

The converter's calibration records each activation tensor's min and max over the samples
and quantizes with that range: one outlier in one sample stretches the step for every
value. Here the calibrate-only conversion (the same path selective quantization uses) is run
once more, in float, with every intermediate tensor kept (:mod:`.calibrated`: one run
shared with bias correction); each tensor's values fill a histogram over its calibrated
range, and a new range is written into the flatbuffer before the converter's quantizer
reads it:

* ``percentile``: the ``p``-th and ``(100 - p)``-th percentiles (a side whose calibrated
  bound is 0, as after a ReLU, keeps it);
* ``mse``: the range that minimises the expected squared error of the tensor's int8 values:
  the rounding error ``step^2 / 12`` of every value inside the range (exact zeros are exact
  and cost nothing) plus the clipping error of every value outside, over a grid of shrink
  factors of each calibrated bound.

The quantizer still makes every tensor exactly as it would (scales, zero points, the fixed
ranges of softmax and logistic outputs), from these statistics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tfcompress._compat.litert import flatbuffer_utils
from tfcompress.quantization.methods.calibrated import BINS, float_statistics, tensor_name
from tfcompress.quantization.methods.calibrated import Histogram as _Histogram
from tfcompress.quantization.methods.equalize_noise import LEVELS
from tfcompress.quantization.methods.registry import RangeContext, RangeMethod, register_method

#: Shrink factors of each bound tried by ``mse`` (1 keeps the calibrated bound).
SHRINK = np.geomspace(1.0, 0.02, 96)


@dataclass(frozen=True)
class TensorRange:
    """One activation tensor's range: as calibrated, and as chosen.

    Attributes:
        tensor: The tensor's name in the ``.tflite``.
        calibrated: ``(min, max)`` the converter's calibration recorded.
        chosen: ``(min, max)`` written for the quantizer.
    """

    tensor: str
    calibrated: tuple[float, float]
    chosen: tuple[float, float]

    @property
    def shrink(self) -> float:
        """The chosen range's width over the calibrated one (1.0: unchanged)."""
        width = self.calibrated[1] - self.calibrated[0]
        return (self.chosen[1] - self.chosen[0]) / width if width > 0 else 1.0

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports."""
        return {
            "tensor": self.tensor,
            "calibrated": [float(f"{v:.6g}") for v in self.calibrated],
            "chosen": [float(f"{v:.6g}") for v in self.chosen],
        }


def search_ranges(
    calibrated: bytes, histograms: dict[int, _Histogram], *, method: str, percentile: float
) -> tuple[bytes, tuple[TensorRange, ...]]:
    """Choose every activation tensor's range of a calibrate-only ``.tflite``.

    From its tensors' ``histograms`` (by tensor index, from one float run:
    :func:`~.calibrated.float_statistics`), by ``method``: ``"percentile"`` (keeping
    ``percentile``) or ``"mse"``.

    Returns:
        The calibrated model with the new statistics, and each tensor's ranges.
    """
    utils = flatbuffer_utils()
    model = utils.read_model_from_bytearray(bytearray(calibrated))
    graph = model.subgraphs[0]
    chosen = []
    for index, histogram in histograms.items():
        tensor = graph.tensors[index]
        low, high = (
            _percentile_range(histogram, percentile)
            if method == "percentile"
            else _mse_range(histogram)
        )
        q = tensor.quantization
        before = (float(q.min[0]), float(q.max[0]))
        q.min = np.array([low], np.float32)
        q.max = np.array([high], np.float32)
        after = (float(q.min[0]), float(q.max[0]))
        chosen.append(TensorRange(tensor_name(tensor), before, after))
    return bytes(utils.convert_object_to_bytearray(model)), tuple(chosen)


class _SearchedRanges(RangeMethod):
    """A range method of this module: one :func:`search_ranges` rule over shared histograms."""

    rule: str

    def edit_ranges(
        self, calibrated: bytes, context: RangeContext
    ) -> tuple[bytes, tuple[TensorRange, ...]]:
        # One float run for every method that edits this calibrated model (bias correction
        # too), of the model as calibrated, before any edit.
        measured = float_statistics(calibrated, context.calibration, context.shared)
        return search_ranges(
            calibrated,
            measured.histograms,
            method=self.rule,
            percentile=context.recipe.range_percentile,
        )


@register_method
class PercentileRanges(_SearchedRanges):
    """``percentile-ranges``: reads ``Recipe.range_percentile``."""

    name = "percentile-ranges"
    summary = "activation ranges from percentiles instead of min/max"
    order = 40
    options = ("range_percentile",)
    rule = "percentile"


@register_method
class MSERanges(_SearchedRanges):
    """``mse-ranges``."""

    name = "mse-ranges"
    summary = "activation ranges that minimise the int8 error of each tensor"
    order = 50
    rule = "mse"


def _percentile_range(histogram: _Histogram, percentile: float) -> tuple[float, float]:
    counts = histogram.counts.astype(np.float64)
    centers = histogram.centers()
    zero_bin = int(
        np.clip(
            (0.0 - histogram.low) * BINS / max(histogram.high - histogram.low, 1e-30), 0, BINS - 1
        )
    )
    counts[zero_bin] += histogram.zeros
    total = counts.sum()
    if total == 0:
        return histogram.low, histogram.high
    cumulative = np.cumsum(counts) / total
    tail = 1.0 - percentile / 100.0
    low = histogram.low
    if histogram.low < 0:
        low = min(float(centers[np.searchsorted(cumulative, tail)]), 0.0)
    high = histogram.high
    if histogram.high > 0:
        high = max(float(centers[min(np.searchsorted(cumulative, 1.0 - tail), BINS - 1)]), 0.0)
    return low, high


def _mse_range(histogram: _Histogram) -> tuple[float, float]:
    """The (low, high) on the grid that minimises the expected int8 error of the tensor."""
    counts = histogram.counts.astype(np.float64)
    centers = histogram.centers()
    if counts.sum() == 0:
        return histogram.low, histogram.high
    # Cumulative sums give, for any cut, the count and the first two moments of what lies
    # below it (and above it), so each candidate's clipping error is O(1).
    n = np.concatenate([[0.0], np.cumsum(counts)])
    s1 = np.concatenate([[0.0], np.cumsum(counts * centers)])
    s2 = np.concatenate([[0.0], np.cumsum(counts * centers**2)])
    lows = histogram.low * SHRINK if histogram.low < 0 else np.array([0.0])
    highs = histogram.high * SHRINK if histogram.high > 0 else np.array([0.0])
    width = histogram.high - histogram.low
    cut_low = np.searchsorted(centers, lows)  # bins strictly below each low
    cut_high = np.searchsorted(centers, highs, side="right")  # bins up to each high
    below_n, below_s1, below_s2 = n[cut_low], s1[cut_low], s2[cut_low]
    clip_low = below_s2 - 2 * lows * below_s1 + lows**2 * below_n
    above_n = n[-1] - n[cut_high]
    above_s1, above_s2 = s1[-1] - s1[cut_high], s2[-1] - s2[cut_high]
    clip_high = above_s2 - 2 * highs * above_s1 + highs**2 * above_n
    inside = n[-1] - below_n[:, None] - above_n[None, :]
    step = (highs[None, :] - lows[:, None]) / LEVELS
    error = clip_low[:, None] + clip_high[None, :] + inside * step**2 / 12.0
    if width <= 0:
        return histogram.low, histogram.high
    i, j = np.unravel_index(int(np.argmin(error)), error.shape)
    return float(lows[i]), float(highs[j])
