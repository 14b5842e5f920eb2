"""The weights of one conv, depthwise or dense layer, seen the way the converter quantizes them.

Every method reads and writes a linear layer through :class:`LinearWeights`: the kernel as a
``(K, C_out)`` matrix (one column per output channel, as the converter's per-channel scales
see it), the per-input-channel axis that equalization rescales, and the effective bias (the
layer's own, or the one a folded BatchNormalization now adds). Arithmetic is float64; the
layer gets float32 back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tfcompress.quantization.methods.graph import Node

#: The converter's int8 weights are symmetric and narrow: integers in [-127, 127].
WEIGHT_MAX = 127


@dataclass(eq=False)
class LinearWeights:
    """A linear layer's kernel and effective bias, as float64 arrays.

    Attributes:
        node: The layer's node.
        kernel: Keras layout: conv ``(kh, kw, cin, cout)``, depthwise ``(kh, kw, cin, mult)``,
            dense ``(cin, cout)``.
        bias: One value per output channel, or None when nothing adds a bias.
    """

    node: Node
    kernel: np.ndarray
    bias: np.ndarray | None

    @classmethod
    def read(cls, node: Node) -> LinearWeights:
        """The current weights of ``node``'s layer (and of the BatchNorm holding its bias)."""
        values = node.layer.get_weights()
        kernel = np.asarray(values[0], np.float64)
        bias = np.asarray(values[1], np.float64) if len(values) > 1 else None
        if bias is None and node.bias_in is not None:  # y = x - moving_mean
            bias = -np.asarray(node.bias_in.layer.moving_mean.numpy(), np.float64)
        return cls(node, kernel, bias)

    def write(self) -> None:
        """Store the weights back into the layer (float32)."""
        values = [self.kernel.astype(np.float32)]
        if self.node.layer.use_bias:
            values.append(np.asarray(self.bias, np.float32))
        self.node.layer.set_weights(values)
        if not self.node.layer.use_bias and self.node.bias_in is not None:
            self.node.bias_in.layer.moving_mean.assign(-np.asarray(self.bias, np.float32))

    @property
    def kind(self) -> str:
        """``conv``, ``depthwise`` or ``dense``."""
        return self.node.kind

    @property
    def out_channels(self) -> int:
        """Output channels (``cin * mult`` for a depthwise layer)."""
        return self.matrix().shape[1]

    @property
    def in_channels(self) -> int:
        """Input channels."""
        return self.kernel.shape[0 if self.kind == "dense" else 2]

    def matrix(self) -> np.ndarray:
        """The kernel as ``(K, C_out)``: the column of output channel ``c`` holds its weights.

        For a depthwise layer, output channel ``c * mult + j`` reads input channel ``c`` only:
        its column holds the ``kh * kw`` taps.
        """
        if self.kind == "depthwise":
            kh, kw, cin, mult = self.kernel.shape
            return self.kernel.reshape(kh * kw, cin * mult)
        return self.kernel.reshape(-1, self.kernel.shape[-1])

    def set_matrix(self, matrix: np.ndarray) -> None:
        """Replace the kernel from its :meth:`matrix` form."""
        self.kernel = np.asarray(matrix, np.float64).reshape(self.kernel.shape)

    def scale_outputs(self, scale: np.ndarray) -> None:
        """Divide output channel ``c`` (weights and bias) by ``scale[c]``."""
        self.set_matrix(self.matrix() / scale[None, :])
        if self.bias is not None:
            self.bias = self.bias / scale

    def scale_inputs(self, scale: np.ndarray) -> None:
        """Multiply every weight that reads input channel ``i`` by ``scale[i]``."""
        if self.kind == "dense":
            self.kernel = self.kernel * scale[:, None]
        else:
            self.kernel = self.kernel * scale[None, None, :, None]

    def output_ranges(self) -> np.ndarray:
        """``max |w|`` of each output channel."""
        return np.abs(self.matrix()).max(axis=0)


def quantization_scales(matrix: np.ndarray, *, per_channel: bool) -> np.ndarray:
    """The converter's weight scales: ``max |w| / 127`` per output channel (or per tensor).

    Returns:
        One scale per column (the same value repeated per tensor); 1.0 for all-zero columns.
    """
    peak = (
        np.abs(matrix).max(axis=0)
        if per_channel
        else np.full(matrix.shape[1], np.abs(matrix).max())
    )
    return np.where(peak > 0, peak / WEIGHT_MAX, 1.0)


def quantize_matrix(matrix: np.ndarray, *, per_channel: bool) -> np.ndarray:
    """``matrix`` after the converter's int8 weight quantization, back in float."""
    scales = quantization_scales(matrix, per_channel=per_channel)
    return np.clip(np.round(matrix / scales), -WEIGHT_MAX, WEIGHT_MAX) * scales
