"""Statistics of a Keras model's intermediate tensors over the calibration samples.

One sub-model returns every tensor a method asks for; it runs over the samples in small
batches and each request folds a batch into its running statistic, so no tensor of the whole
calibration set is ever held in memory.

The linear layers' statistics are over their *patches*: the input values each output
position reads (zero padding included, as TensorFlow pads), so ``E[patch] @ W`` is exactly
the mean of the layer's output before its bias.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfcompress._compat.keras import flavour_of, keras_module
from tfcompress.quantization.methods.graph import ordered_feed

Update = Callable[[np.ndarray], None]
#: Samples per forward pass of the statistics sub-model.
BATCH = 32


@dataclass
class ChannelPeak:
    """Running per-channel ``max x`` and ``min x`` of one tensor (channels last)."""

    max: np.ndarray | None = None
    min: np.ndarray | None = None

    def update(self, values: np.ndarray) -> None:
        """Fold one batch of the tensor in."""
        flat = values.reshape(-1, values.shape[-1]).astype(np.float64)
        top, bottom = flat.max(axis=0), flat.min(axis=0)
        self.max = top if self.max is None else np.maximum(self.max, top)
        self.min = bottom if self.min is None else np.minimum(self.min, bottom)


@dataclass
class PatchMoments:
    """Running sums over a linear layer's input patches, one tap at a time.

    With ``gram``, also ``sum(patch patch^T)`` (AdaRound's loss needs it); with ``weights``,
    the layer's ``(matrix, bias)`` as measured, also each output channel's power
    ``sum(y^2)`` before the activation (equalization weighs the targets' noise by it).
    """

    layer: Any
    kind: str
    gram: bool = False
    weights: tuple[np.ndarray, np.ndarray | None] | None = field(default=None, repr=False)
    count: int = 0
    total: np.ndarray | None = None
    square_total: np.ndarray | None = None
    power_total: np.ndarray | None = None
    gram_total: np.ndarray | None = field(default=None, repr=False)

    def update(self, values: np.ndarray) -> None:
        """Fold one batch of the layer's input in."""
        taps = layer_taps(self.layer, self.kind, values.astype(np.float32))  # each (P, C)
        self.count += taps[0].shape[0]
        total = np.stack([t.sum(axis=0, dtype=np.float64) for t in taps])  # (taps, C)
        squares = np.stack([np.square(t).sum(axis=0, dtype=np.float64) for t in taps])
        self.total = total if self.total is None else self.total + total
        self.square_total = squares if self.square_total is None else self.square_total + squares
        if self.weights is not None:
            power = (self._outputs(taps).astype(np.float64) ** 2).sum(axis=0)
            self.power_total = power if self.power_total is None else self.power_total + power
        if self.gram:
            g = _gram(taps, depthwise=self.kind == "depthwise")
            self.gram_total = g if self.gram_total is None else self.gram_total + g

    def _outputs(self, taps: list[np.ndarray]) -> np.ndarray:
        """The layer's outputs before its activation, ``(P, C_out)``, from the taps."""
        matrix, bias = self.weights  # type: ignore[misc]
        cin = taps[0].shape[1]
        if self.kind == "depthwise":  # column c * mult + j: tap weights of channel c
            mult = matrix.shape[1] // cin
            shaped = matrix.reshape(len(taps), cin, mult).astype(np.float32)
            y = sum(t[:, :, None] * shaped[k][None] for k, t in enumerate(taps))
            y = np.asarray(y).reshape(taps[0].shape[0], cin * mult)
        else:
            blocks = matrix.reshape(len(taps), cin, -1).astype(np.float32)
            y = sum(t @ blocks[k] for k, t in enumerate(taps))
        return np.asarray(y) + (0.0 if bias is None else bias.astype(np.float32))

    @property
    def mean(self) -> np.ndarray:
        """``E[patch]``: ``(K,)`` for conv/dense (Keras kernel order), ``(taps, C)`` depthwise."""
        mean = np.asarray(self.total) / max(self.count, 1)
        return mean if self.kind == "depthwise" else mean.reshape(-1)

    @property
    def squares(self) -> np.ndarray:
        """``E[patch^2]``, elementwise: the shape of :attr:`mean`."""
        squares = np.asarray(self.square_total) / max(self.count, 1)
        return squares if self.kind == "depthwise" else squares.reshape(-1)

    @property
    def power(self) -> np.ndarray:
        """``E[y^2]`` of each output channel before the activation (needs ``weights``)."""
        return np.asarray(self.power_total) / max(self.count, 1)

    @property
    def second_moment(self) -> np.ndarray:
        """``E[patch patch^T]``: ``(K, K)``, or ``(C, taps, taps)`` for a depthwise layer."""
        return np.asarray(self.gram_total) / max(self.count, 1)


def _gram(taps: list[np.ndarray], *, depthwise: bool) -> np.ndarray:
    if depthwise:
        stacked = np.stack(taps, axis=1).astype(np.float64)  # (P, taps, C)
        return np.einsum("pkc,plc->ckl", stacked, stacked, optimize=True)
    flat = np.concatenate(taps, axis=1).astype(np.float64)  # (P, taps * C), kernel order
    return flat.T @ flat


def layer_taps(layer: Any, kind: str, x: np.ndarray) -> list[np.ndarray]:
    """The input values each kernel tap reads at every output position.

    Returns:
        One ``(P, C)`` array per tap, in the kernel's ``(kh, kw)`` order (one for dense, whose
        leading dimensions are all positions): tap ``t`` of position ``p`` is what weight
        ``kernel[t // kw, t % kw]`` multiplies, zero padding included.
    """
    channels = x.shape[-1]
    if kind == "dense":
        return [x.reshape(-1, channels)]
    if (*layer.kernel_size, *layer.strides) == (1, 1, 1, 1):
        return [x.reshape(-1, channels)]
    geometry = (layer.kernel_size, layer.strides, layer.dilation_rate, layer.padding)
    return [window.reshape(-1, channels) for window in tap_windows(x, *geometry)[0]]


def tap_windows(
    x: np.ndarray,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    dilation: tuple[int, int],
    padding: str,
) -> tuple[list[np.ndarray], tuple[int, int]]:
    """What each kernel tap reads of ``x`` (``(N, H, W, C)``), in ``(kh, kw)`` order.

    ``x`` is zero-padded as TensorFlow's ``same``/``valid`` does; each window is
    ``(N, ho, wo, C)``, and ``(ho, wo)`` comes back with them.
    """
    pads, sizes = [], []
    for size, k, s, d in zip(x.shape[1:3], kernel, strides, dilation, strict=True):
        span = (k - 1) * d + 1
        if padding == "same":
            out = -(-size // s)
            total = max((out - 1) * s + span - size, 0)
            pads.append((total // 2, total - total // 2))
        else:
            out = -(-(size - span + 1) // s)
            pads.append((0, 0))
        sizes.append(out)
    padded = np.pad(x, [(0, 0), *pads, (0, 0)])
    (kh, kw), (sh, sw), (dh, dw), (ho, wo) = kernel, strides, dilation, sizes
    windows = [
        padded[
            :, i * dh : i * dh + (ho - 1) * sh + 1 : sh, j * dw : j * dw + (wo - 1) * sw + 1 : sw
        ]
        for i in range(kh)
        for j in range(kw)
    ]
    return windows, (ho, wo)


class Probe:
    """A compiled sub-model of ``model`` returning ``tensors``, run as often as needed.

    It is traced once, on its first run; later runs read the layers' current weights (a
    rewrite changes variables, not the graph), so every method of one rewrite shares it.
    """

    def __init__(self, model: Any, tensors: Sequence[Any]) -> None:
        keras = keras_module(flavour_of(model))
        self.model = model
        unique = list({id(tensor): tensor for tensor in tensors}.values())
        self.index = {id(tensor): k for k, tensor in enumerate(unique)}
        inputs = model.inputs[0] if len(model.inputs) == 1 else model.inputs
        self.sub = keras.Model(inputs, unique)

    def covers(self, tensors: Sequence[Any]) -> bool:
        """Whether every tensor of ``tensors`` is one this probe returns."""
        return all(id(t) in self.index for t in tensors)

    def run(self, x: Any, requests: Sequence[tuple[Any, Update]]) -> None:
        """Hand each requested tensor's values, batch by batch, to its update."""
        for part, count in batches(x, BATCH):
            values = self.sub.predict_on_batch(ordered_feed(self.model, part))
            values = values if isinstance(values, list | tuple) else [values]
            for tensor, update in requests:
                update(np.asarray(values[self.index[id(tensor)]])[:count])


def collect(
    model: Any,
    x: np.ndarray | Mapping[str, np.ndarray],
    requests: Sequence[tuple[Any, Update]],
    *,
    probe: Probe | None = None,
) -> None:
    """Run ``model`` over ``x`` and hand each requested tensor's values to its update.

    ``requests`` are ``(tensor, update)`` pairs: a Keras tensor of ``model`` and what to do
    with its values, batch by batch (a tensor may be asked for several times). ``probe``, a
    probe of ``model`` returning every requested tensor, is reused (no new trace); None
    builds one for these tensors.
    """
    if not requests:
        return
    tensors = [tensor for tensor, _ in requests]
    if probe is None or not probe.covers(tensors):
        probe = Probe(model, tensors)
    probe.run(x, requests)


def batches(x: np.ndarray | Mapping[str, np.ndarray], size: int) -> Iterator[tuple[Any, int]]:
    """``x`` in batches of exactly ``size`` rows, and how many rows of each are real.

    ``predict_on_batch`` runs one compiled function (eager layer calls are many times
    slower), traced once per input shape: the last batch is padded with its own rows so the
    model is traced once, and the caller keeps the first ``count`` rows of the outputs.
    """
    total = len(next(iter(x.values()))) if isinstance(x, Mapping) else len(x)
    size = max(1, min(size, total))
    for start in range(0, total, size):
        stop = min(start + size, total)
        rows = np.arange(start, start + size)
        rows[rows >= stop] = start  # padding: repeats of a real row, dropped by the caller
        if isinstance(x, Mapping):
            yield {k: v[rows] for k, v in x.items()}, stop - start
        else:
            yield x[rows], stop - start
