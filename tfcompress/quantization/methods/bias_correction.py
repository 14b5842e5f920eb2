"""Empirical bias correction: cancel the mean output shift that weight rounding causes.

Rounding a layer's weights to int8 changes its output by ``(W_q - W) x``. Over the
calibration samples that error has a mean per output channel, ``(W_q - W)^T E[patch]``,
which is not zero when the inputs are not (after a ReLU they never are): every output moves
by a constant, and a small-magnitude regression head feels it most. Subtracting that mean
from the bias removes it (Nagel et al., ICCV 2019, the empirical variant).

It edits the converter's calibrate-only output (float weights and biases, activation
statistics recorded), just before the converter's quantizer, so it works on whatever the
converter takes: a Keras model (either flavour, after the weight methods' rewrite) or a
SavedModel. For every CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED with float weights,
``W_q`` is the converter's own rounding (symmetric, narrow, per channel or per tensor as the
recipe says: :func:`~.linear.quantize_matrix`) of the weights in the file, and ``E[patch]``
is the mean input patch (SAME padding's zeros included) from the one float run of the
calibrated model that every method editing it shares (:mod:`.calibrated`). An op without a
bias (the converter drops an all-zero one) gets one.

The activation ranges stay as calibrated: they describe the original float model, which
the corrected int8 model now matches in mean.
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from tfcompress._compat.litert import flatbuffer_utils
from tfcompress.quantization.methods.calibrated import (
    FloatStatistics,
    LinearOp,
    float_statistics,
    linear_ops,
    tensor_array,
)
from tfcompress.quantization.methods.linear import quantize_matrix
from tfcompress.quantization.methods.registry import GraphMethod, RangeContext, register_method


@dataclass(frozen=True)
class BiasCorrection:
    """The correction of one op's bias.

    Attributes:
        layer: The op, by its output tensor's name in the ``.tflite``.
        max_shift: The largest per-channel correction, in the op's output units.
        max_bias: The largest absolute bias before the correction, for scale.
    """

    layer: str
    max_shift: float
    max_bias: float

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports."""
        return {"layer": self.layer} | {
            k: float(f"{getattr(self, k):.6g}") for k in ("max_shift", "max_bias")
        }


@register_method
class BiasCorrectionMethod(GraphMethod):
    """``bias-correction``: after the weight methods, before the range methods."""

    name = "bias-correction"
    summary = "remove the mean output shift that weight rounding causes, per channel"
    kind = "bias"
    order = 30
    report_key = "corrected"

    def edit_ranges(
        self, calibrated: bytes, context: RangeContext
    ) -> tuple[bytes, tuple[BiasCorrection, ...]]:
        """:func:`correct_biases` of the calibrated model, from the shared float run."""
        statistics = float_statistics(calibrated, context.calibration, context.shared)
        return correct_biases(calibrated, statistics, per_channel=context.recipe.per_channel)


def correct_biases(
    calibrated: bytes, statistics: FloatStatistics, *, per_channel: bool
) -> tuple[bytes, tuple[BiasCorrection, ...]]:
    """Correct the bias of every linear op of a calibrate-only ``.tflite``.

    ``statistics`` are :func:`~.calibrated.float_statistics` of it (or of the model it was
    edited from: the op indices are the same). Returns the model with the corrected biases
    (everything else as it was), and one entry per corrected op.
    """
    utils = flatbuffer_utils()
    model = utils.read_model_from_bytearray(bytearray(calibrated))
    graph = model.subgraphs[0]
    tensor_uses = Counter(int(i) for op in graph.operators for i in op.inputs if i >= 0)
    tensor_uses.update(int(i) for i in (*graph.inputs, *graph.outputs))
    buffer_uses = Counter(int(t.buffer) for t in graph.tensors)
    corrections = []
    for op in linear_ops(model):
        patch = statistics.patches.get(op.index)
        if patch is None or patch.count == 0 or patch.op.input != op.input:
            continue
        shift = _shift(tensor_array(model, op.weights), patch.mean, op, per_channel=per_channel)
        before = (
            tensor_array(model, op.bias).astype(np.float64)
            if op.bias >= 0
            else np.zeros(shift.shape, np.float64)
        )
        after = (before - shift).astype(np.float32)
        shared = op.bias < 0 or tensor_uses[op.bias] > 1
        shared = shared or buffer_uses[graph.tensors[op.bias].buffer] > 1
        if shared:  # a bias of its own, so no other op (or a missing bias) changes with it
            graph.operators[op.index].inputs = _with_bias(model, op, after)
            if op.bias >= 0:  # the last op left reading it may edit it in place
                tensor_uses[op.bias] -= 1
        else:
            model.buffers[graph.tensors[op.bias].buffer].data = np.frombuffer(
                after.tobytes(), np.uint8
            )
        corrections.append(
            BiasCorrection(op.name, float(np.abs(shift).max()), float(np.abs(before).max()))
        )
    return bytes(utils.convert_object_to_bytearray(model)), tuple(corrections)


def _shift(kernel: np.ndarray, mean: np.ndarray, op: LinearOp, *, per_channel: bool) -> np.ndarray:
    """``(W_q - W)^T E[patch]``: each output channel's mean error, ``(C_out,)``.

    ``kernel`` is in the ``.tflite`` layout: conv ``(cout, kh, kw, cin)``, depthwise
    ``(1, kh, kw, cin * mult)``, dense ``(cout, cin)``; ``mean`` is ``(taps, cin)``.
    """
    kernel = kernel.astype(np.float64)
    if op.kind == "depthwise":  # column c * mult + j reads input channel c only
        matrix = kernel.reshape(-1, kernel.shape[-1])  # (taps, cin * mult)
        error = quantize_matrix(matrix, per_channel=per_channel) - matrix
        mult = matrix.shape[1] // mean.shape[1]
        return (error * np.repeat(mean, mult, axis=1)).sum(axis=0)
    matrix = kernel.reshape(kernel.shape[0], -1).T  # (K, cout), K in (kh, kw, cin) order
    error = quantize_matrix(matrix, per_channel=per_channel) - matrix
    return mean.reshape(-1) @ error


def _with_bias(model: Any, op: LinearOp, values: np.ndarray) -> list[int]:
    """A new bias tensor (and buffer) holding ``values``; the op's new input list."""
    schema = flatbuffer_utils().schema_fb
    graph = model.subgraphs[0]
    buffer = schema.BufferT()
    buffer.data = np.frombuffer(values.astype(np.float32).tobytes(), np.uint8)
    model.buffers.append(buffer)
    if op.bias >= 0:
        tensor = copy.deepcopy(graph.tensors[op.bias])
    else:
        tensor = schema.TensorT()
        tensor.type = 0  # FLOAT32
        tensor.shape = np.array([len(values)], np.int32)
        tensor.name = f"{op.name}/bias_correction".encode()
    tensor.buffer = len(model.buffers) - 1
    graph.tensors.append(tensor)
    inputs = [int(i) for i in graph.operators[op.index].inputs]
    inputs += [-1] * (3 - len(inputs))
    inputs[2] = len(graph.tensors) - 1
    return inputs
