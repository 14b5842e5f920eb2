"""The quantization noise that cross-layer equalization trades, as a function of the scales.

Dividing channel ``i`` of the tensor between a source layer ``A`` and its target layers by
``s_i`` (and multiplying the targets' weights that read it by ``s_i``) moves three noises:

* the targets' weight rounding: a target output ``j`` has step ``m_j(s) / 127`` with
  ``m_j = max_k |w_kj| s_i(k)`` (per output channel; per tensor, the max over the kernel),
  and its error variance is ``step^2 / 12 * sum_k E[p_k^2] / s_i(k)^2`` over its inputs ``p``;
* the activation rounding of the tensor itself: one step ``(max_i top_i / s_i - min_i
  bottom_i / s_i) / 255`` for all channels, reaching output ``j`` through
  ``sum_k w_kj^2 s_i(k)^2``;
* with per-tensor weights, ``A``'s own rounding: one step ``max_i r_i / s_i / 127`` for the
  whole kernel (``r_i = max |w|`` of ``A``'s channel ``i``), reaching the targets the same way.

:func:`optimise` minimises the sum over targets of their noise over their output power (so
a small-magnitude head counts as much as a large one: it is its signal-to-noise ratio that
matters), by Adam on ``log s``, and keeps the best scales seen, so the estimate is never
worse than not equalizing. Nagel et al.'s ``s_i = sqrt(r1_i / r2_i)`` is this trade for the
weights alone, per tensor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tfcompress.quantization.methods.linear import WEIGHT_MAX

#: Adam steps (at most) and step size on log s; the search stops once the best value has not
#: improved by PATIENCE_GAIN in PATIENCE steps.
STEPS = 300
RATE = 0.05
PATIENCE = 40
PATIENCE_GAIN = 1e-4
#: int8 activation levels.
LEVELS = 255


@dataclass
class TargetTerms:
    """One target layer, as the noise model reads it.

    Attributes:
        weights: ``(K, J)``: weight ``k`` of output ``j`` (the kernel as a matrix).
        channel: ``(K, J)``: the equalized channel each weight reads.
        inputs: ``(K, J)``: ``E[p^2]`` of the input each weight reads, at ``s = 1``.
        power: ``sum_j E[y_j^2]`` of the target's outputs (before any activation).
        per_channel: Weights quantized per output channel (else per tensor).
    """

    weights: np.ndarray
    channel: np.ndarray
    inputs: np.ndarray
    power: float
    per_channel: bool


@dataclass
class SourceTerms:
    """The source layer's own weight rounding (matters with per-tensor weights only).

    Attributes:
        ranges: ``max |w|`` of each of its output channels.
        inputs: ``E[|patch|^2]`` each output channel reads.
    """

    ranges: np.ndarray
    inputs: np.ndarray


def noise(
    log_scale: np.ndarray,
    targets: list[TargetTerms],
    top: np.ndarray,
    bottom: np.ndarray,
    source: SourceTerms | None,
) -> tuple[float, np.ndarray]:
    """The noise-to-power sum at ``s = exp(log_scale)`` and its gradient in ``log_scale``."""
    s = np.exp(log_scale)
    channels = len(s)
    grad = np.zeros(channels)
    # The tensor's activation step, and A's weight step (per tensor), as variances per unit
    # weight energy: both reach a target output through sum w^2 s^2.
    upper, lower = top / s, bottom / s
    hi, lo = int(np.argmax(upper)), int(np.argmin(lower))
    step = (upper[hi] - lower[lo]) / LEVELS
    act_var = step**2 / 12.0
    d_act_var = np.zeros(channels)
    d_act_var[hi] += -2 * act_var * upper[hi] / max(upper[hi] - lower[lo], 1e-30)
    d_act_var[lo] += 2 * act_var * lower[lo] / max(upper[hi] - lower[lo], 1e-30)
    src_var = np.zeros(channels)
    peak = -1
    if source is not None:
        ranges = source.ranges / s
        peak = int(np.argmax(ranges))
        src_var = ranges[peak] ** 2 / (12.0 * WEIGHT_MAX**2) * source.inputs  # per channel
    total = 0.0
    for target in targets:
        scale = s[target.channel]  # (K, J)
        energy = target.weights**2 * scale**2
        per_input = (act_var + src_var)[target.channel]
        act_noise = float(np.sum(energy * per_input))
        d = np.bincount(
            target.channel.ravel(), (2 * energy * per_input).ravel(), minlength=channels
        )
        d += d_act_var * float(np.sum(energy))
        if peak >= 0:  # every src_var_i scales with A's widest channel: d/du_peak = -2 src_var
            weight_energy = np.bincount(target.channel.ravel(), energy.ravel(), minlength=channels)
            d[peak] += -2 * float(src_var @ weight_energy)
        spread = np.abs(target.weights) * scale
        inputs = target.inputs / scale**2
        if target.per_channel:
            k = np.argmax(spread, axis=0)
            cols = np.arange(spread.shape[1])
            m2 = spread[k, cols] ** 2 / (12.0 * WEIGHT_MAX**2)
            sums = inputs.sum(axis=0)
            wq = m2 * sums
            d += np.bincount(target.channel[k, cols], 2 * wq, minlength=channels)
            d += np.bincount(
                target.channel.ravel(), (-2 * inputs * m2[None, :]).ravel(), minlength=channels
            )
        else:
            flat = int(np.argmax(spread))
            m2 = spread.ravel()[flat] ** 2 / (12.0 * WEIGHT_MAX**2)
            wq = m2 * inputs.sum()
            d[target.channel.ravel()[flat]] += 2 * float(wq)
            d += np.bincount(target.channel.ravel(), (-2 * inputs * m2).ravel(), minlength=channels)
        weight = 1.0 / max(target.power, 1e-30)
        total += weight * (act_noise + float(np.sum(wq)))
        grad += weight * d
    return total, grad


def optimise(
    targets: list[TargetTerms],
    top: np.ndarray,
    bottom: np.ndarray,
    source: SourceTerms | None,
    *,
    low: np.ndarray,
    high: np.ndarray,
) -> np.ndarray:
    """The scales (within ``[low, high]`` per channel) with the least noise seen.

    ``top`` and ``bottom`` are each channel's largest (>= 0) and smallest (<= 0) value in the
    tensor at ``s = 1``; ``source`` the source's weight terms with per-tensor weights, else
    None. All ones when nothing lowers the noise.
    """
    u = np.zeros(len(top))
    lo, hi = np.log(low), np.log(high)
    best_value, _ = noise(u, targets, top, bottom, source)
    best = u.copy()
    m, v = np.zeros_like(u), np.zeros_like(u)
    since = 0
    for step in range(1, STEPS + 1):
        value, grad = noise(u, targets, top, bottom, source)
        since += 1
        if value < best_value:
            if value < best_value * (1 - PATIENCE_GAIN):
                since = 0
            best_value, best = value, u.copy()
        if since > PATIENCE:
            break
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        u = u - RATE * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-12)
        u = np.clip(u, lo, hi)
    value, _ = noise(u, targets, top, bottom, source)
    if value < best_value:
        best = u
    return np.exp(best)
