"""Which TFLite ops the Edge TPU compiler maps, as data: one row per op, with its source.

Each :class:`OpRule` row names the TFLite builtin ops it covers, whether Coral's table lists
them (``yes``), rules them out (``no``) or could not be confirmed (``unknown``), the
limitation as Coral words it, the limitation checks the linter runs
(:mod:`tfcompress.targets.edgetpu.limitations`), the inputs that must be constants, and where
the row came from (docs/edgetpu.md, "The op table": which rows were read verbatim, which from
an earlier copy or Coral's issues, and why an op past :data:`READ_THROUGH` is ``unknown``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Support(enum.StrEnum):
    """Whether the Edge TPU compiler maps an op (``unknown``: no source confirms either way)."""

    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"


CORAL_TABLE = "https://coral.ai/docs/edgetpu/models-intro/#supported-operations"
_CURRENT = (
    f"{CORAL_TABLE} (current table, read as mirrored for the same Edge TPU at "
    "https://developer.axis.com/computer-vision/on-device/system-on-chip/artpec-7/supported-ops/)"
)
_EARLIER = (
    f"{CORAL_TABLE} (an earlier copy of the table: https://github.com/dgist-datalab/"
    "Datalab_Intern/blob/master/Edge_TPU/convert_model_for_Edge_TPU.md)"
)
_UNREAD = (
    "Coral's current table after ResizeBilinear could not be read here; this op is not "
    "confirmed either way"
)
#: Coral's table was read verbatim up to this op name (alphabetical, case-insensitive).
READ_THROUGH = "ResizeBilinear"


@dataclass(frozen=True)
class OpRule:
    """One row of the table.

    Attributes:
        name: The op as Coral's table names it (``Conv2d``).
        tflite_ops: The TFLite builtin names (or ``CUSTOM:<code>``) the row covers.
        limitation: The limitation as the source words it ("" when none).
        constant_inputs: Input positions that must be compile-time constants.
        fix: What to do when ``support`` is not ``yes`` ("" for supported ops).
    """

    name: str
    tflite_ops: tuple[str, ...]
    support: Support
    limitation: str = ""
    checks: tuple[str, ...] = ()
    constant_inputs: tuple[int, ...] = ()
    source: str = _CURRENT
    fix: str = ""


_NO_ACT = "No fused activation function."
_DILATION = "Must use the same dilation in x and y dimensions."
_NO_BATCH = "Cannot operate on the batch dimension."
_RESIZE = (
    "Input/output is a 3-dimensional tensor. Depending on input/output size, this operation "
    "might not be mapped to the Edge TPU to avoid loss in precision."
)
_MOVE = (
    "replace it with supported ops, or move it after the last op the TPU should run (into "
    "the head, or onto the host) so everything before it stays on the TPU"
)
_Y = Support.YES

OP_RULES: tuple[OpRule, ...] = (
    OpRule("Add", ("ADD",), _Y),
    OpRule("AveragePool2d", ("AVERAGE_POOL_2D",), _Y, _NO_ACT, ("no_fused_activation",)),
    OpRule(
        "Concatenation",
        ("CONCATENATION",),
        _Y,
        f"{_NO_ACT} If any input is a compile-time constant tensor, there must be only 2 "
        "inputs, and this constant tensor must be all zeros (effectively, a zero-padding op).",
        ("no_fused_activation", "constant_is_zero_padding"),
    ),
    OpRule("Conv2d", ("CONV_2D",), _Y, _DILATION, ("same_dilation",), (1, 2)),
    OpRule("DepthwiseConv2d", ("DEPTHWISE_CONV_2D",), _Y, _DILATION, ("same_dilation",), (1, 2)),
    OpRule("ExpandDims", ("EXPAND_DIMS",), _Y, constant_inputs=(1,)),
    OpRule(
        "FullyConnected",
        ("FULLY_CONNECTED",),
        _Y,
        "Only the default format is supported for fully-connected weights. Output tensor is "
        "one-dimensional.",
        ("default_weights_format", "one_dimensional_output"),
        (1, 2),
    ),
    OpRule("L2Normalization", ("L2_NORMALIZATION",), _Y),
    OpRule("Logistic", ("LOGISTIC",), _Y),
    OpRule("LSTM", ("UNIDIRECTIONAL_SEQUENCE_LSTM", "LSTM"), _Y, "Unidirectional LSTM only."),
    OpRule(
        "LSTM",
        ("BIDIRECTIONAL_SEQUENCE_LSTM",),
        Support.NO,
        "Unidirectional LSTM only.",
        fix="use a unidirectional LSTM (two of them, one on the reversed sequence, if needed)",
    ),
    OpRule("Maximum", ("MAXIMUM",), _Y),
    OpRule("MaxPool2d", ("MAX_POOL_2D",), _Y, _NO_ACT, ("no_fused_activation",)),
    OpRule(
        "Mean",
        ("MEAN",),
        _Y,
        "No reduction in batch dimension. If a z-reduction, the z-dimension must be multiple of 4.",
        ("no_batch_axis", "z_reduction_multiple_of_4"),
        (1,),
    ),
    OpRule("Minimum", ("MINIMUM",), _Y),
    OpRule("Mul", ("MUL",), _Y),
    OpRule("Pack", ("PACK",), _Y, "No packing in batch dimension.", ("pack_not_on_batch",)),
    OpRule("Pad", ("PAD",), _Y, "No padding in batch dimension.", ("pad_not_on_batch",), (1,)),
    OpRule(
        "PReLU",
        ("PRELU",),
        _Y,
        "Alpha must be 1-dimensional (only the innermost dimension can be >1 size). If using "
        "Keras PReLU with 4D input (batch, height, width, channels), then shared_axes must be "
        "[1,2] so each filter has only one set of parameters.",
        ("one_dimensional_alpha",),
        (1,),
    ),
    OpRule("Quantize", ("QUANTIZE",), _Y),
    OpRule("ReduceMax", ("REDUCE_MAX",), _Y, _NO_BATCH, ("no_batch_axis",), (1,)),
    OpRule("ReduceMin", ("REDUCE_MIN",), _Y, _NO_BATCH, ("no_batch_axis",), (1,)),
    OpRule("ReLU", ("RELU",), _Y),
    OpRule("ReLU6", ("RELU6",), _Y),
    OpRule("ReLUN1To1", ("RELU_N1_TO_1",), _Y),
    OpRule(
        "Reshape",
        ("RESHAPE",),
        _Y,
        "Certain reshapes might not be mapped for large tensor sizes.",
        constant_inputs=(1,),
    ),
    OpRule("ResizeBilinear", ("RESIZE_BILINEAR",), _Y, _RESIZE, constant_inputs=(1,)),
    # After ResizeBilinear: an earlier copy of Coral's table, Coral maintainers in issues.
    OpRule(
        "ResizeNearestNeighbor",
        ("RESIZE_NEAREST_NEIGHBOR",),
        _Y,
        _RESIZE,
        constant_inputs=(1,),
        source=_EARLIER,
    ),
    OpRule("Slice", ("SLICE",), _Y, constant_inputs=(1, 2), source=_EARLIER),
    OpRule(
        "Softmax",
        ("SOFTMAX",),
        _Y,
        "Supports only 1D input tensor with a max of 16,000 elements.",
        ("softmax_input_1d",),
        source=_EARLIER,
    ),
    OpRule("SpaceToDepth", ("SPACE_TO_DEPTH",), _Y, source=_EARLIER),
    OpRule("Split", ("SPLIT",), _Y, constant_inputs=(0,), source=_EARLIER),
    OpRule(
        "Squeeze",
        ("SQUEEZE",),
        _Y,
        "Supported only when input tensor dimensions that have leading 1s (that is, no "
        "relayout needed). For example input tensor with [y][x][z] = 1,1,10 or 1,5,10 is ok. "
        "But [y][x][z] = 5,1,10 is not supported.",
        ("squeeze_leading_ones",),
        source=_EARLIER,
    ),
    OpRule(
        "StridedSlice",
        ("STRIDED_SLICE",),
        _Y,
        "Supported only when all strides are equal to 1 (that is, effectively a Stride op), "
        "and with ellipsis-axis-mask == 0, and new-axis-max == 0.",
        ("unit_strides_no_masks",),
        (1, 2, 3),
        source=_EARLIER,
    ),
    OpRule("Sub", ("SUB",), _Y, source=_EARLIER),
    OpRule("Tanh", ("TANH",), _Y, source=_EARLIER),
    OpRule(
        "Transpose",
        ("TRANSPOSE",),
        _Y,
        constant_inputs=(1,),
        source='https://github.com/google-coral/edgetpu/issues/193 (Coral: "Compiler version '
        "16 supports 'Transpose' operations\", pointing to the table)",
    ),
    OpRule(
        "TransposeConv",
        ("TRANSPOSE_CONV",),
        _Y,
        constant_inputs=(0, 1, 3),
        source="https://github.com/google-coral/edgetpu/issues/64 (Coral's table lists "
        "transpose convolutions from runtime version 13)",
    ),
    OpRule("Rsqrt", ("RSQRT",), Support.UNKNOWN, source=_UNREAD, fix=_MOVE),
    OpRule("Sum", ("SUM",), Support.UNKNOWN, source=_UNREAD, fix=_MOVE),
    OpRule(
        "SquaredDifference", ("SQUARED_DIFFERENCE",), Support.UNKNOWN, source=_UNREAD, fix=_MOVE
    ),
    # Ops Coral rules out, with what its maintainers advise instead.
    OpRule(
        "HardSwish",
        ("HARD_SWISH",),
        Support.NO,
        source="https://github.com/google-coral/edgetpu/issues/353 and /issues/272 (not in "
        "Coral's table; Coral's advice: MobileNetV3 with minimalistic=True)",
        fix="replace hard-swish with ReLU6 (keras.applications.MobileNetV3*(minimalistic=True) "
        "has no hard-swish) and fine-tune",
    ),
    OpRule(
        "LeakyRelu",
        ("LEAKY_RELU",),
        Support.NO,
        source="https://github.com/google-coral/edgetpu/issues/272 (not in Coral's table; "
        "Coral's advice: use ReLU)",
        fix="use ReLU, or PReLU(shared_axes=[1, 2]) whose alpha is 1-D, and fine-tune",
    ),
    OpRule(
        "Gelu",
        ("GELU",),
        Support.NO,
        source=f"{_CURRENT}: not listed",
        fix="replace GELU with ReLU or ReLU6 and fine-tune, or move it after the last TPU op",
    ),
    OpRule(
        "Dequantize",
        ("DEQUANTIZE",),
        Support.NO,
        source=f"{_CURRENT}: not listed; compiler logs report it as 'Operation is working on "
        "an unsupported data type' (https://github.com/f0cal/google-coral/issues/20)",
        fix="end the model in 8 bits: `tfcompress quantize MODEL --target edgetpu --data "
        "CALIB.npz --out M.tflite` (or `--recipe int8 --output-type uint8`), and dequantize on "
        "the host",
    ),
    OpRule(
        "edgetpu-custom-op",
        ("CUSTOM:edgetpu-custom-op",),
        _Y,
        "The op edgetpu_compiler writes: the model was already compiled.",
        source="edgetpu_compiler output (*_edgetpu.tflite)",
    ),
)

_BY_OP = {op: rule for rule in OP_RULES for op in rule.tflite_ops}


def _sort_key(name: str) -> str:
    return name.lower().replace("_", "")


def rule_for(opcode: str) -> OpRule:
    """The row for a TFLite op name (``CONV_2D``, ``CUSTOM:<code>``).

    An op without a row is ``no`` when Coral's table would list it within the range read
    verbatim (it sorts at or before :data:`READ_THROUGH`), else ``unknown``.
    """
    if opcode in _BY_OP:
        return _BY_OP[opcode]
    if opcode.startswith("CUSTOM:"):
        return OpRule(
            opcode,
            (opcode,),
            Support.NO,
            source="custom ops are not in Coral's table",
            fix=f"the compiler cannot map custom ops: {_MOVE}",
        )
    if _sort_key(opcode) <= _sort_key(READ_THROUGH):
        return OpRule(opcode, (opcode,), Support.NO, source=f"{_CURRENT}: not listed", fix=_MOVE)
    return OpRule(opcode, (opcode,), Support.UNKNOWN, source=_UNREAD, fix=_MOVE)
