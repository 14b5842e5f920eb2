"""The machine checks of Coral's per-op limitations, by the names the op table gives them.

Each check takes an :class:`OpView` and returns an :class:`Issue` when the op breaks the
limitation (rule ``op-limitation``), else None. A check that cannot tell (an axis computed at
run time, options it cannot read) returns None: the constant-input rule reports the former.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from tfcompress.models.tflite_options import ACTIVATION_NAMES
from tfcompress.targets.edgetpu.findings import OP_LIMITATION, Issue
from tfcompress.targets.edgetpu.view import EIGHT_BIT, OpView

Check = Callable[[OpView], Issue | None]
_SOFTMAX_MAX = 16_000


def _issue(message: str, fix: str) -> Issue:
    return Issue(OP_LIMITATION, message, fix)


def _non_unit(shape: tuple[int, ...]) -> int:
    return sum(1 for d in shape if d != 1)


def _no_fused_activation(view: OpView) -> Issue | None:
    activation = view.int_option("FusedActivationFunction")
    if activation == 0:
        return None
    name = ACTIVATION_NAMES.get(activation, str(activation))
    return _issue(
        f"{view.op.opcode} has a fused {name} activation; the Edge TPU maps it only without one",
        "make the activation its own layer after this op (the converter then writes a "
        "separate RELU/RELU6 op, which the TPU maps)",
    )


def _constant_is_zero_padding(view: OpView) -> Issue | None:
    for index in (i for i in view.op.inputs if i >= 0 and view.is_constant(i)):
        tensor = view.tensor(index)
        params = tensor.quantization
        zero = params.zero_points[0] if params and params.zero_points else 0
        data = view.model.buffer_data(tensor.buffer)
        eight_bit = tensor.dtype in EIGHT_BIT
        values = np.frombuffer(data, dtype=np.int8 if tensor.dtype == "int8" else np.uint8)
        if len(view.op.inputs) != 2 or not eight_bit or np.any(values != zero):
            return _issue(
                f"CONCATENATION joins the constant tensor '{tensor.name}' with "
                f"{len(view.op.inputs) - 1} other input(s); the TPU maps a constant input only "
                "when there are 2 inputs and the constant is all zeros (a zero padding)",
                "compute the constant part outside the model, or pad with ZeroPadding2D/Pad",
            )
    return None


def _same_dilation(view: OpView) -> Issue | None:
    x, y = view.int_option("DilationWFactor"), view.int_option("DilationHFactor")
    if x == y:
        return None
    return _issue(
        f"{view.op.opcode} dilates by {x} in x but {y} in y; the TPU needs the same dilation",
        "use the same dilation_rate in both directions",
    )


def _default_weights_format(view: OpView) -> Issue | None:
    if view.int_option("WeightsFormat") == 0:
        return None
    return _issue(
        "FULLY_CONNECTED stores its weights in a shuffled format; only the default is mapped",
        "convert without the shuffled fully-connected weight format (the converter's default)",
    )


def _one_dimensional_output(view: OpView) -> Issue | None:
    shape = view.shape(view.op.outputs[0])
    if _non_unit(shape) <= 1:
        return None
    return _issue(
        f"FULLY_CONNECTED writes a {list(shape)} output; the TPU maps it only when the output "
        "is one-dimensional ([1, N])",
        "flatten before the Dense layer (Flatten or GlobalAveragePooling2D) so it outputs "
        "[1, N]; a Dense on a 3-D/4-D tensor can often be a 1x1 Conv2D instead",
    )


def _axes(view: OpView) -> tuple[int, tuple[int, ...]] | None:
    """(input rank, the reduced axes made non-negative), or None when not constant."""
    index = view.input(0)
    axes = view.constant_ints(1)
    if index is None or axes is None:
        return None
    rank = len(view.shape(index))
    return (rank, tuple(a % rank for a in axes)) if rank else None


def _no_batch_axis(view: OpView) -> Issue | None:
    found = _axes(view)
    if found is None or found[0] < 2 or 0 not in found[1]:
        return None
    return _issue(
        f"{view.op.opcode} reduces over axis 0, the batch dimension, which the TPU cannot do",
        "reduce over the spatial or channel axes only (e.g. GlobalAveragePooling2D), or do "
        "this reduction on the host",
    )


def _z_reduction_multiple_of_4(view: OpView) -> Issue | None:
    found, index = _axes(view), view.input(0)
    if found is None or index is None or (found[0] - 1) not in found[1]:
        return None
    depth = view.shape(index)[-1]
    if depth % 4 == 0:
        return None
    return _issue(
        f"MEAN reduces over the innermost (z) dimension of size {depth}; the TPU needs a "
        "multiple of 4 there",
        "give that dimension a multiple of 4 channels, or average over height/width only",
    )


def _pack_not_on_batch(view: OpView) -> Issue | None:
    if view.int_option("Axis") != 0:
        return None
    return _issue(
        "PACK stacks its inputs along axis 0, the batch dimension, which the TPU cannot do",
        "stack along another axis (e.g. keras.ops.stack(..., axis=-1)) or concatenate instead",
    )


def _pad_not_on_batch(view: OpView) -> Issue | None:
    paddings = view.constant_ints(1)
    if not paddings or paddings[:2] == (0, 0):
        return None
    return _issue(
        f"PAD pads the batch dimension by {list(paddings[:2])}, which the TPU cannot do",
        "pad only the spatial or channel dimensions",
    )


def _one_dimensional_alpha(view: OpView) -> Issue | None:
    index = view.input(1)
    if index is None:
        return None
    shape = view.shape(index)
    if all(d == 1 for d in shape[:-1]):
        return None
    return _issue(
        f"PRELU has a {list(shape)} alpha; the TPU needs it 1-dimensional (only the innermost "
        "dimension larger than 1)",
        "use keras.layers.PReLU(shared_axes=[1, 2]) on 4-D inputs: one alpha per channel",
    )


def _softmax_input_1d(view: OpView) -> Issue | None:
    index = view.input(0)
    if index is None:
        return None
    shape = view.shape(index)
    size = math.prod(shape)
    if _non_unit(shape) <= 1 and size <= _SOFTMAX_MAX:
        return None
    return _issue(
        f"SOFTMAX reads a {list(shape)} tensor ({size} elements); the TPU maps only a 1-D "
        f"input of at most {_SOFTMAX_MAX:,} elements",
        "apply softmax to a flat [1, N] tensor (Flatten first), or on the host after the "
        "TPU part (it is cheap there)",
    )


def _squeeze_leading_ones(view: OpView) -> Issue | None:
    index = view.input(0)
    if index is None:
        return None
    shape = view.shape(index)
    dims = view.dims_option("SqueezeDims") or tuple(i for i, d in enumerate(shape) if d == 1)
    removed = {d % len(shape) for d in dims} if shape else set()
    first_large = next((i for i, d in enumerate(shape) if d > 1), len(shape))
    if all(d < first_large for d in removed):
        return None
    return _issue(
        f"SQUEEZE removes a size-1 dimension from the middle of {list(shape)}; the TPU maps it "
        "only when the removed 1s lead the shape (no relayout)",
        "squeeze only leading dimensions of size 1, or use Reshape",
    )


def _unit_strides_no_masks(view: OpView) -> Issue | None:
    strides = view.constant_ints(3)
    problems = []
    if strides and any(s != 1 for s in strides):
        problems.append(f"strides {list(strides)}")
    if view.int_option("EllipsisMask"):
        problems.append("an ellipsis mask")
    if view.int_option("NewAxisMask"):
        problems.append("a new-axis mask")
    if not problems:
        return None
    return _issue(
        f"STRIDED_SLICE has {' and '.join(problems)}; the TPU maps it only with all strides 1 "
        "and no ellipsis or new-axis mask",
        "slice with stride 1 (subsample with a strided convolution or pooling instead), and "
        "index explicitly rather than with ... or None",
    )


LIMITATION_CHECKS: dict[str, Check] = {
    "no_fused_activation": _no_fused_activation,
    "constant_is_zero_padding": _constant_is_zero_padding,
    "same_dilation": _same_dilation,
    "default_weights_format": _default_weights_format,
    "one_dimensional_output": _one_dimensional_output,
    "no_batch_axis": _no_batch_axis,
    "z_reduction_multiple_of_4": _z_reduction_multiple_of_4,
    "pack_not_on_batch": _pack_not_on_batch,
    "pad_not_on_batch": _pad_not_on_batch,
    "one_dimensional_alpha": _one_dimensional_alpha,
    "softmax_input_1d": _softmax_input_1d,
    "squeeze_leading_ones": _squeeze_leading_ones,
    "unit_strides_no_masks": _unit_strides_no_masks,
}
