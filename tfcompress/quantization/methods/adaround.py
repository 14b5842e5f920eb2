"""AdaRound: learn whether each weight rounds up or down, layer by layer (Nagel et al., ICML 2020).

Rounding every weight to its nearest int8 value minimises each weight's own error, not the
layer's output error: errors of neighbouring weights add up over the same input. AdaRound
optimises, per layer, a soft rounding ``h(V)`` in [0, 1] added to ``floor(W / s)`` so that the
layer's output on the calibration samples stays close to the float one, with a regulariser
that drives every ``h`` to 0 or 1; the result is an ordinary rounding of the same weights to
the same grid.

The output error is quadratic in the weights, so the calibration samples enter once, as the
second moment ``E[patch patch^T]`` of each layer's input patches (one pass over the data),
and the optimisation itself is small matrix products in numpy (the pre-activation MSE
objective of the paper). The integers land on the grid the converter will use: the weight
that sets each scale (``max |w| = 127 s``) keeps its value, so the converter derives the same
scales and stores these integers exactly. A layer whose learned rounding does not lower its
output error keeps nearest rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from tfcompress.quantization.methods.graph import LayerGraph
from tfcompress.quantization.methods.linear import (
    WEIGHT_MAX,
    LinearWeights,
    quantization_scales,
)
from tfcompress.quantization.methods.registry import RewriteContext, WeightMethod, register_method
from tfcompress.quantization.methods.stats import PatchMoments, Probe, Update, collect

#: Adam steps per layer (the first WARMUP share without the rounding regulariser).
ITERATIONS = 1000
WARMUP = 0.2
LEARNING_RATE = 0.01
#: Weight of the rounding regulariser (a mean over the weights) against the output error
#: (normalised to 1 at nearest rounding); tuned on the models of tfcompress/samples/ptq_stress.py.
REGULARISATION = 50.0
#: The regulariser's exponent is annealed from BETA_START to BETA_END.
BETA_START, BETA_END = 20.0, 2.0
#: The rectified sigmoid's stretch (zeta, gamma) of the paper.
ZETA, GAMMA = 1.1, -0.1


@dataclass(frozen=True)
class RoundedLayer:
    """What AdaRound did to one layer.

    Attributes:
        layer: The conv, depthwise or dense layer.
        error_nearest: The layer's output MSE with nearest rounding.
        error_learned: Its output MSE with the rounding kept (``<= error_nearest``).
        flipped: Share of weights rounded the other way than nearest.
        kept_nearest: The learned rounding did not help: nearest rounding was kept.
    """

    layer: str
    error_nearest: float
    error_learned: float
    flipped: float
    kept_nearest: bool

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports."""
        errors = {k: float(f"{getattr(self, k):.6g}") for k in ("error_nearest", "error_learned")}
        return {**asdict(self), **errors, "flipped": round(self.flipped, 6)}


@register_method
class AdaRound(WeightMethod):
    """``adaround``: changes the float weights on purpose (the float check is measured before)."""

    name = "adaround"
    summary = (
        "learned rounding of every conv/depthwise/dense kernel (AdaRound), "
        "layer by layer on the calibration samples"
    )
    kind = "rounding"
    order = 20
    report_key = "rounded"

    def rewrite(self, context: RewriteContext) -> tuple[RoundedLayer, ...]:
        """:func:`adaround` on the copy, serving the float check from its statistics pass."""
        return adaround(
            context.graph,
            context.x,
            per_channel=context.per_channel,
            probe=context.probe,
            also=context.also(),
        )


def adaround(
    graph: LayerGraph,
    x: Any,
    *,
    per_channel: bool,
    probe: Probe | None = None,
    also: Sequence[tuple[Any, Update]] = (),
) -> tuple[RoundedLayer, ...]:
    """Round every linear layer's weights of ``graph``'s model to the int8 grid, in place.

    On the calibration samples ``x``, in one pass of ``probe`` (shared by the methods of one
    rewrite; None builds one) that also serves the ``also`` requests (the rewrite's float
    check). One entry per layer.
    """
    layers = list(graph.linear_nodes())
    moments = {id(n): PatchMoments(n.layer, n.kind, gram=True) for n in layers}
    requests = [(n.layer.input, moments[id(n)].update) for n in layers]
    collect(graph.model, x, [*requests, *also], probe=probe)
    report = []
    for node in layers:
        weights = LinearWeights.read(node)
        matrix = weights.matrix()
        second = moments[id(node)].second_moment
        mult = weights.kernel.shape[3] if weights.kind == "depthwise" else 1
        rounded, entry = _round_layer(node.name, matrix, second, mult, per_channel=per_channel)
        weights.set_matrix(rounded)
        weights.write()
        report.append(entry)
    return tuple(report)


def _round_layer(
    name: str, matrix: np.ndarray, second: np.ndarray, mult: int, *, per_channel: bool
) -> tuple[np.ndarray, RoundedLayer]:
    scales = quantization_scales(matrix, per_channel=per_channel)
    ratio = matrix / scales[None, :]
    base = np.floor(ratio)
    fraction = ratio - base
    nearest = (fraction >= 0.5).astype(np.float64)
    # The weights that set each scale keep their value, so the converter's scales are these.
    peak = np.abs(ratio) >= WEIGHT_MAX - 1e-9
    free = ~peak
    error = _Error(second, scales, ratio, mult)
    soft = np.clip((fraction - GAMMA) / (ZETA - GAMMA), 1e-4, 1 - 1e-4)
    v = np.log(soft / (1 - soft))
    adam_m, adam_v = np.zeros_like(v), np.zeros_like(v)
    norm = max(error.value(base + nearest), 1e-30)
    count = max(int(free.sum()), 1)
    warmup = int(ITERATIONS * WARMUP)
    for step in range(1, ITERATIONS + 1):
        sig = 1.0 / (1.0 + np.exp(-v))
        stretched = sig * (ZETA - GAMMA) + GAMMA
        h = np.clip(stretched, 0.0, 1.0)
        h = np.where(free, h, nearest)
        grad_h = error.gradient(base + h) / norm
        if step > warmup:
            progress = (step - warmup) / max(ITERATIONS - warmup, 1)
            beta = BETA_END + 0.5 * (BETA_START - BETA_END) * (1 + np.cos(np.pi * progress))
            centred = 2 * h - 1
            grad_h = grad_h - REGULARISATION * (
                beta * np.abs(centred) ** (beta - 1) * np.sign(centred) * 2 / count
            )
        inside = (stretched > 0) & (stretched < 1) & free
        grad_v = np.where(inside, grad_h * (ZETA - GAMMA) * sig * (1 - sig), 0.0)
        adam_m = 0.9 * adam_m + 0.1 * grad_v
        adam_v = 0.999 * adam_v + 0.001 * grad_v**2
        m_hat, v_hat = adam_m / (1 - 0.9**step), adam_v / (1 - 0.999**step)
        v = v - LEARNING_RATE * m_hat / (np.sqrt(v_hat) + 1e-8)
    stretched = 1.0 / (1.0 + np.exp(-v)) * (ZETA - GAMMA) + GAMMA
    learned = np.where(free, (stretched >= 0.5).astype(np.float64), nearest)
    q_nearest = np.clip(base + nearest, -WEIGHT_MAX, WEIGHT_MAX)
    q_learned = np.clip(base + learned, -WEIGHT_MAX, WEIGHT_MAX)
    e_nearest, e_learned = error.value(q_nearest), error.value(q_learned)
    keep = e_learned >= e_nearest
    chosen = q_nearest if keep else q_learned
    entry = RoundedLayer(
        layer=name,
        error_nearest=e_nearest,
        error_learned=min(e_learned, e_nearest),
        flipped=0.0 if keep else float((q_learned != q_nearest).mean()),
        kept_nearest=bool(keep),
    )
    return chosen * scales[None, :], entry


class _Error:
    """The layer's output MSE as a function of its integer-grid weights ``q`` (float)."""

    def __init__(self, second: np.ndarray, scales: np.ndarray, ratio: np.ndarray, mult: int):
        self.second, self.scales, self.ratio, self.mult = second, scales, ratio, mult

    def _delta(self, q: np.ndarray) -> np.ndarray:
        return (q - self.ratio) * self.scales[None, :]  # weight error, in weight units

    def _apply(self, delta: np.ndarray) -> np.ndarray:
        """``E[patch patch^T] @ delta``, column by column (per input channel for depthwise)."""
        if self.second.ndim == 2:
            return self.second @ delta
        taps, columns = delta.shape
        cin = columns // self.mult
        shaped = delta.reshape(taps, cin, self.mult)
        return np.einsum("ckl,lcm->kcm", self.second, shaped).reshape(taps, columns)

    def value(self, q: np.ndarray) -> float:
        delta = self._delta(q)
        return float(np.sum(delta * self._apply(delta)) / delta.shape[1])

    def gradient(self, q: np.ndarray) -> np.ndarray:
        delta = self._delta(q)
        return 2.0 * self._apply(delta) * self.scales[None, :] / delta.shape[1]
