"""LiteRT's GPU accelerator's rules, op by op: what ML Drift's model builder takes.

ai-edge-litert 2.3's GPU accelerator is ML Drift. Which ops it takes is decided by
``GetOpsToReplaceWithOptions`` in ``ml_drift_delegate/tflite/model_builder.cc`` of
google-ai-edge/LiteRT, read at commit :data:`LITERT_COMMIT` (docs/gpu.md, "Where the rules
come from"): the op list with its version caps (:data:`MAX_VERSION`), each parser's
``IsSupported`` (for most ops also ``gpu_compatibility.cc``'s
``CheckGpuDelegateCompatibility``; ARG_MAX, CAST, ONE_HOT, SLICE, UNPACK and PRELU only by
their own checks), and the tensor-type table and rank rule of ``IsAllAllowedTensors``.

Each check returns a :class:`Refusal` (why, in the source's terms, and the change that works)
or None. :mod:`tfcompress.runtime.gpu_support` runs them over a file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tfcompress.models.tflite_file import Operator, Subgraph, Tensor, TFLiteFile
from tfcompress.models.tflite_options import OptionValue

#: The google-ai-edge/LiteRT commit the rules were read from (2026-08-21).
LITERT_COMMIT = "f67457790c9c2ab67347d6fe53270e8d3df20868"
LITERT_SOURCE = (
    f"google-ai-edge/LiteRT@{LITERT_COMMIT[:12]}: ml_drift_delegate/tflite/model_builder.cc, "
    "tflite/tools/versioning/gpu_compatibility.cc"
)

#: A change that works for most refusals: let the converter write the file for the GPU.
REMAKE = "make the file with `tfcompress quantize MODEL --target gpu`"
KEEP_ON_CPU = "or accept that it runs on the CPU"
_REPLACE = f"replace this layer with ops the GPU takes, {KEEP_ON_CPU}"

_ONE_ARG = ("ABS", "CEIL", "COS", "ELU", "EXP", "FLOOR", "GELU", "LOG", "LOGICAL_NOT", "LOGISTIC",
            "NEG", "ROUND", "RSQRT", "SIGN", "SIN", "SQRT", "SQUARE", "TANH")  # fmt: skip
_TWO_ARG = ("ADD", "ADD_N", "ATAN2", "DIV", "EQUAL", "FLOOR_DIV", "FLOOR_MOD", "GREATER",
            "GREATER_EQUAL", "LESS", "LESS_EQUAL", "LOGICAL_AND", "LOGICAL_OR", "MAXIMUM",
            "MINIMUM", "MUL", "NOT_EQUAL", "POW", "RIGHT_SHIFT", "SQUARED_DIFFERENCE", "SUB",
            "STABLEHLO_SHIFT_LEFT")  # fmt: skip
_REDUCE = ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD", "REDUCE_ANY", "REDUCE_ALL")

#: Every builtin op ML Drift has a parser for, and the highest version it takes (None: any).
#: ElementwiseOperationParser caps ABS at 5, FLOOR_DIV 3, MAXIMUM/MINIMUM 4, MUL 8, ADD 6,
#: GELU 3 and every other elementwise op at 2.
MAX_VERSION: dict[str, int | None] = {
    **dict.fromkeys(_ONE_ARG + _TWO_ARG, 2),
    "ABS": 5, "FLOOR_DIV": 3, "MAXIMUM": 4, "MINIMUM": 4, "MUL": 8, "ADD": 6, "ADD_N": 6,
    "GELU": 3,
    **dict.fromkeys(_REDUCE, None),
    "ARG_MAX": None, "AVERAGE_POOL_2D": 2, "MAX_POOL_2D": 2, "BATCH_MATMUL": None,
    "CAST": None, "CONCATENATION": 6, "CONV_2D": 6, "CUMSUM": 1, "DEPTHWISE_CONV_2D": 6,
    "DEPTH_TO_SPACE": None, "DEQUANTIZE": 3, "DYNAMIC_UPDATE_SLICE": None,
    "EMBEDDING_LOOKUP": None, "FULLY_CONNECTED": 14, "GATHER": None, "HARD_SWISH": None,
    "LSTM": 4, "ONE_HOT": 1, "PACK": None, "PAD": 5, "PADV2": 5, "MIRROR_PAD": 5, "PRELU": 1,
    "QUANTIZE": 2, "RELU": 2, "RELU6": 2, "RELU_N1_TO_1": 2, "LEAKY_RELU": 2, "RESHAPE": 1,
    "RESIZE_BILINEAR": 3, "RESIZE_NEAREST_NEIGHBOR": 3, "REVERSE_V2": None, "SELECT": 1,
    "SELECT_V2": 1, "SLICE": 8, "SOFTMAX": 4, "SPACE_TO_DEPTH": 2, "SPLIT": None,
    "SPLIT_V": None, "STRIDED_SLICE": 2, "TILE": None, "TOPK_V2": 1, "TRANSPOSE": 9,
    "TRANSPOSE_CONV": 3, "UNPACK": None, "STABLEHLO_CLAMP": None,
}  # fmt: skip
# Parsers exist for these, but gpu_compatibility.cc, which they call, has no rule for them
# ("Not supported op"): RELU_0_TO_1, BITWISE_XOR. Custom ops with a parser:
CUSTOM_OPS = frozenset({"Convolution2DTransposeBias", "MaxPoolingWithArgmax2D", "MaxUnpooling2D",
                        "Resampler", "custom_call.GroupNorm", "custom_call.LayerNorm",
                        "custom_call.RmsNorm", "custom_call.PixelShuffle"})  # fmt: skip

# The tensor-type table (allow_quant_ops and allow_bool_tensors as LiteRT sets them).
_FLOATS = frozenset({"float32", "float16"})
_INTS = frozenset({"int8", "int16", "int32"})
_UINTS = frozenset({"uint8", "uint16", "uint32"})
_IN = _FLOATS | {"bool", "int2", "int4", "int8", "uint8"}
_OUT = _FLOATS | {"int8", "uint8"}
_COMPARE = frozenset({"GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL", "EQUAL", "NOT_EQUAL"})
_LOGICAL = frozenset({"LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT", "BITWISE_XOR"})
_INT_OPS = frozenset({"ABS", "ADD", "ATAN2", "COS", "DIV", "FLOOR_DIV", "FLOOR_MOD", "MAXIMUM",
                      "MINIMUM", "MUL", "NEG", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD",
                      "RIGHT_SHIFT", "SIGN", "SIN", "STABLEHLO_CLAMP", "SUB", "SUM", "TILE",
                      "STABLEHLO_SHIFT_LEFT"})  # fmt: skip
_ANY_PRECISION = frozenset({"BITCAST", "CAST", "CONCATENATION", "DYNAMIC_UPDATE_SLICE", "GATHER",
                            "PACK", "PAD", "PADV2", "RESHAPE", "REVERSE_V2", "SELECT",
                            "SELECT_V2", "SLICE", "STRIDED_SLICE", "TRANSPOSE"})  # fmt: skip
_MAX_RANK = 4
_SIGN_BIT = 5  # TfLiteFusedActivation kTfLiteActSignBit, the one fused activation refused
_SYMMETRIC = 1  # MirrorPadMode


@dataclass(frozen=True)
class Refusal:
    """Why ML Drift leaves an op to the CPU, and a change that works.

    Attributes:
        reason: The rule, in the source's terms.
        fix: What to change so that the GPU takes it.
        kind: ``op`` (no parser), ``version``, ``type``, ``rank`` or ``rule`` (a per-op check).
        tensor: The tensor at fault, for ``type`` and ``rank`` (-1: none).
    """

    reason: str
    fix: str
    kind: str = "rule"
    tensor: int = -1


@dataclass(frozen=True)
class View:
    """One op of a file, as the checks read it."""

    model: TFLiteFile
    graph: Subgraph
    op: Operator
    options: Mapping[str, OptionValue]
    folded: frozenset[int] = frozenset()  # float16 weights' DEQUANTIZE outputs: constants
    persistent: frozenset[int] = frozenset()  # computed when tensors are allocated

    def tensors(self, indices: tuple[int, ...]) -> list[Tensor | None]:
        """The tensors at these indices (None for an optional or absent one)."""
        return [
            self.graph.tensors[i] if 0 <= i < len(self.graph.tensors) else None for i in indices
        ]

    @property
    def inputs(self) -> list[Tensor | None]:
        """The op's inputs."""
        return self.tensors(self.op.inputs)

    @property
    def outputs(self) -> list[Tensor | None]:
        """The op's outputs."""
        return self.tensors(self.op.outputs)

    def constant(self, tensor: Tensor | None) -> bool:
        """Stored in the file (IsConstantTensor), float16 weights' DEQUANTIZE outputs too."""
        if tensor is None:
            return False
        return tensor.index in self.folded or self.model.is_constant(tensor)

    def runtime_inputs(self) -> int:
        """Inputs computed at run time."""
        return sum(1 for t in self.inputs if t is not None and not self.constant(t))

    def constant_inputs(self) -> int:
        """Constant inputs."""
        return sum(1 for t in self.inputs if self.constant(t))

    def shape(self, position: int, *, output: bool = False) -> tuple[int, ...]:
        """The stored shape of an input (or output); () when absent."""
        tensors = self.outputs if output else self.inputs
        tensor = tensors[position] if position < len(tensors) else None
        return tuple(tensor.shape or ()) if tensor is not None else ()


def refusal(view: View) -> Refusal | None:
    """ML Drift's verdict on one op: None when it takes it, else why not and the fix."""
    name = view.op.opcode
    if name.startswith("CUSTOM:"):
        custom = name.split(":", 1)[1]
        if custom in CUSTOM_OPS:
            return _tensor_rule(view)
        return Refusal(f"no GPU kernel for the custom op {custom}", _REPLACE, "op")
    if name not in MAX_VERSION:
        return Refusal("no GPU kernel (Operation is not supported.)", _REPLACE, "op")
    cap = MAX_VERSION[name]
    if cap is not None and view.op.version > cap:
        return Refusal(
            f"written at version {view.op.version}; the GPU takes versions up to {cap}",
            _version_fix(name),
            "version",
        )
    rule = _RULES.get(name)
    if rule is None:
        rule = _one_arg if name in _ONE_ARG else _two_arg if name in _TWO_ARG else None
    found = rule(view) if rule is not None else None
    return found or _tensor_rule(view)


def _version_fix(name: str) -> str:
    if name == "DEQUANTIZE":
        return (
            "weight-only int8/int4 (LiteRT Quantizer's recipes) writes it: make the file "
            "with `tfcompress quantize MODEL --target gpu` (float16 weights) or keep this "
            "layer float"
        )
    return f"{REMAKE} (the TensorFlow Lite converter writes versions the GPU takes)"


def _allowed(name: str) -> tuple[set[str], set[str]]:
    """``allowed_in_types`` and ``allowed_out_types`` for ``name``."""
    allowed_in, allowed_out = set(_IN), set(_OUT)
    if name == "ARG_MAX":
        allowed_out = {"int32"}
    if name in ("REDUCE_ALL", "REDUCE_ANY"):
        allowed_in, allowed_out = {"bool"}, {"bool"}
    if name in ("EMBEDDING_LOOKUP", "ONE_HOT", "DYNAMIC_UPDATE_SLICE"):
        allowed_in.add("int32")
    if name in _COMPARE:
        allowed_in |= _INTS | _UINTS
        allowed_out.add("bool")
    if name in _LOGICAL:
        allowed_in = allowed_out = {"bool", *_INTS}
    if name == "TOPK_V2":
        allowed_out.add("int32")
    if name in _INT_OPS:
        allowed_in |= _INTS
        allowed_out |= _INTS
    if name in _ANY_PRECISION:
        allowed_in |= _INTS | _UINTS | {"bool", "bfloat16"}
        allowed_out |= _INTS | _UINTS | {"bool", "bfloat16"}
    return allowed_in, allowed_out


def _tensor_rule(view: View) -> Refusal | None:
    """IsAllAllowedTensors: rank for every tensor, type for those computed at run time."""
    allowed_in, allowed_out = _allowed(view.op.opcode)
    for tensors, allowed in ((view.inputs, allowed_in), (view.outputs, allowed_out)):
        for tensor in tensors:
            if tensor is None:
                continue
            rank = len(tensor.shape or ())
            if rank > _MAX_RANK:
                return Refusal(
                    f"tensor {tensor.name!r} has rank {rank} (the GPU takes 4 at most)",
                    f"keep tensors at rank 4 or less, {KEEP_ON_CPU}",
                    "rank",
                    tensor.index,
                )
            arena = not (view.constant(tensor) or tensor.is_variable)
            if arena and tensor.index not in view.persistent and tensor.dtype not in allowed:
                return Refusal(
                    f"{tensor.dtype} tensor {tensor.name!r} (the GPU takes "
                    f"{', '.join(sorted(allowed))} here)",
                    _type_fix(view.op.opcode, tensor.dtype),
                    "type",
                    tensor.index,
                )
    return None


def _type_fix(name: str, dtype: str) -> str:
    if name == "ARG_MAX" and dtype == "int64":
        return "ask for int32 indices: tf.argmax(x, axis, output_type=tf.int32)"
    if dtype == "int64":
        return f"compute in int32 (cast to tf.int32 before this op), {KEEP_ON_CPU}"
    return f"feed this layer float (or int8) tensors, {KEEP_ON_CPU}"


def _operands(view: View, runtime: int, constant: int | None = 0) -> Refusal | None:
    """CheckInputsConstsOutputs: exactly ``runtime`` run-time (and ``constant``) inputs."""
    have = (view.runtime_inputs(), view.constant_inputs())
    if have[0] == runtime and (constant is None or have[1] == constant):
        return None
    wanted = f"{runtime} run-time input(s)" + ("" if constant is None else f", {constant} const")
    return Refusal(
        f"{view.op.opcode} takes {wanted}; this one has {have[0]} run-time and {have[1]} const",
        f"compute the extra input once, as a constant, {KEEP_ON_CPU}",
    )


def _one_arg(view: View) -> Refusal | None:
    return _operands(view, 1, 0)


def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """CheckIsBroadcastable / IsBroadcastable: numpy's rule from the last dimension."""
    return all(x == y or 1 in (x, y) for x, y in zip(reversed(a), reversed(b), strict=False))


def _two_arg(view: View) -> Refusal | None:
    name, inputs = view.op.opcode, view.inputs
    count = len(view.op.inputs)
    if name in ("ADD", "MUL", "ADD_N") and count != 2:
        return Refusal(f"{name} with {count} inputs (2 only)", "add the inputs pairwise")
    runtime, constant = view.runtime_inputs(), view.constant_inputs()
    if (runtime, constant) not in ((2, 0), (1, 1)):
        return Refusal(f"{name}: 1 or 2 run-time operands", "fold the constants into one")
    first, second = view.shape(0), view.shape(1)
    if runtime == 2 and view.op.inputs[0] == view.op.inputs[1] and name not in ("ADD", "MUL"):
        return Refusal(f"{name} of a tensor with itself", "compute it another way (x * x)")
    if runtime == 2 and not _broadcasts(first, second):
        return Refusal(
            f"{name} of {list(first)} and {list(second)}: not broadcastable",
            "give both inputs shapes that broadcast",
        )
    if constant == 1:
        const = next(t for t in inputs if view.constant(t))
        if const is not None and const.sparse:
            return Refusal(f"{name} with a sparse constant", "store the constant dense")
    return None


def _conv(view: View) -> Refusal | None:
    runtime = view.runtime_inputs()
    if not 1 <= runtime <= 2:
        return Refusal(f"{view.op.opcode} takes 1 or 2 run-time inputs", REMAKE)
    data = 2 if view.op.opcode == "TRANSPOSE_CONV" else 0  # (output shape, weights, input)
    if len(view.inputs) > data and view.constant(view.inputs[data]):
        return Refusal(f"{view.op.opcode} of a constant input", "fold it before conversion")
    return None


def _depthwise(view: View) -> Refusal | None:
    """CheckDepthwiseConvGpuDelegateCompatibility: any depth multiplier that adds up."""
    if (found := _conv(view)) is not None:
        return found
    shape_in, shape_out, weights = view.shape(0), view.shape(0, output=True), view.shape(1)
    if len(shape_in) != 4 or len(shape_out) != 4 or len(weights) != 4:
        return Refusal("DEPTHWISE_CONV_2D takes 4-D input, filter and output", REMAKE)
    multiplier = int(view.options.get("DepthMultiplier", 1) or 0)  # type: ignore[call-overload]
    if weights[3] != shape_out[3] or shape_out[3] != shape_in[3] * multiplier:
        return Refusal(
            f"output channels {shape_out[3]} != input channels {shape_in[3]} x depth "
            f"multiplier {multiplier}",
            REMAKE,
        )
    return None


def _pool(view: View) -> Refusal | None:
    if (found := _operands(view, 1, None)) is not None:
        return found
    if view.options.get("FusedActivationFunction") == _SIGN_BIT:
        return Refusal("fused SIGN_BIT activation", _REPLACE)
    return None


def _fully_connected(view: View) -> Refusal | None:
    if view.options.get("WeightsFormat", 0) != 0:
        return Refusal("shuffled FULLY_CONNECTED weights format", REMAKE)
    if view.runtime_inputs() > 2:
        return Refusal("FULLY_CONNECTED takes at most 2 run-time inputs", REMAKE)
    if view.constant(view.inputs[0] if view.inputs else None):
        return Refusal("FULLY_CONNECTED of a constant input", "fold it before conversion")
    ranks_differ = len(view.shape(0)) != len(view.shape(0, output=True))
    if view.options.get("KeepNumDims") and ranks_differ:
        return Refusal("FULLY_CONNECTED keep_num_dims with input and output ranks apart", REMAKE)
    return None


def _constant_axes(view: View) -> Refusal | None:
    """Reductions and REVERSE_V2: one run-time input, constant int32 axes."""
    if (found := _operands(view, 1, 1)) is not None:
        return found
    axes = view.inputs[1] if len(view.inputs) > 1 else None
    if axes is None or axes.dtype != "int32":
        return Refusal(f"{view.op.opcode} needs constant int32 axes", REMAKE)
    return None


def _slice(view: View) -> Refusal | None:
    """SliceOperationParser (no gpu_compatibility call): 1-D to 4-D, constant begin/size."""
    if len(view.op.inputs) < 3:
        return Refusal("SLICE takes 3 inputs", REMAKE)
    if view.inputs[0] is None or view.constant(view.inputs[0]):
        return Refusal("SLICE of a constant input", "fold it before conversion")
    if not all(view.constant(t) for t in view.inputs[1:3]):
        return Refusal("SLICE with begin or size computed at run time", "slice at fixed bounds")
    rank = len(view.shape(0))
    return None if 1 <= rank <= 4 else Refusal(f"SLICE of a {rank}-D tensor", REMAKE, "rank")


def _strided_slice(view: View) -> Refusal | None:
    """StridedSliceOperationParser's own check: no masks that add or drop axes."""
    for mask in ("EllipsisMask", "NewAxisMask", "ShrinkAxisMask"):
        if view.options.get(mask):
            return Refusal(f"STRIDED_SLICE with {mask}", "slice without dropping axes (x[:, 0:1])")
    if len(view.op.inputs) < 4 or not all(view.constant(t) for t in view.inputs[1:4]):
        return Refusal("STRIDED_SLICE needs constant begin, end and strides", REMAKE)
    rank, starts = len(view.shape(0)), view.shape(1)
    if not starts or rank not in (starts[0], starts[0] + 1):
        return Refusal("STRIDED_SLICE input/params dimensions mismatch", REMAKE)
    return None


def _pad(view: View) -> Refusal | None:
    if view.op.opcode == "MIRROR_PAD" and view.options.get("Mode") == _SYMMETRIC:
        return Refusal(
            "MIRROR_PAD mode SYMMETRIC (the GPU pads by REFLECT only)",
            f"pad with mode='REFLECT' where the model allows it, {KEEP_ON_CPU}",
        )
    if (found := _operands(view, 1, None)) is not None:
        return found
    shape = view.shape(1)
    if len(shape) != 2 or shape[0] not in (3, 4) or shape[1] != 2:
        return Refusal(f"paddings of shape {list(shape)} (4x2 or 3x2 only)", REMAKE)
    return None


def _dequantize(view: View) -> Refusal | None:
    source = view.inputs[0] if view.inputs else None
    if source is None:
        return None
    if source.dtype == "int16":
        return Refusal("DEQUANTIZE of int16", "use int8 activations (--recipe int8)")
    if not view.constant(source):
        scales = source.quantization.scales if source.quantization else ()
        if len(scales) > 1:
            return Refusal("DEQUANTIZE of a per-channel run-time tensor", REMAKE)
    elif not 2 <= len(source.shape or ()) <= 4:
        return Refusal(f"DEQUANTIZE of a {len(source.shape or ())}-D constant (2-D to 4-D)", REMAKE)
    return None


def _gather(view: View) -> Refusal | None:
    inputs = view.inputs
    if len(inputs) != 2 or inputs[1] is None:
        return Refusal("GATHER takes 2 inputs", REMAKE)
    if (view.runtime_inputs(), view.constant_inputs()) not in ((2, 0), (1, 1)):
        return Refusal("GATHER: 1 or 2 run-time operands", REMAKE)
    indices = inputs[1]
    if len(indices.shape or ()) != 1:
        return Refusal(
            f"GATHER with {len(indices.shape or ())}-D indices (1-D only)",
            "look up 1-D ids: flatten the ids before this layer (ops.reshape(ids, [-1])) and "
            f"reshape its output back, {KEEP_ON_CPU}",
        )
    if indices.dtype != "int32":
        return Refusal(f"GATHER with {indices.dtype} indices (int32 only)", "cast the ids to int32")
    return None


def _select(view: View) -> Refusal | None:
    """SelectV2's own check: a bool or float condition; branches shaped like the output."""
    inputs = view.inputs
    if len(inputs) != 3 or any(t is None for t in inputs):
        return Refusal("SELECT takes 3 inputs", REMAKE)
    if inputs[0].dtype not in ("bool", "float16", "float32"):  # type: ignore[union-attr]
        return Refusal("SELECT's condition must be bool or float", REMAKE)
    out = view.shape(0, output=True)
    for position in (1, 2):
        shape = view.shape(position)
        if shape and shape != out and (len(shape) > 1 or shape[0] > 1):
            return Refusal(
                "SELECT's branches must be shaped like the output, or scalars",
                "broadcast the branches to the output's shape first",
            )
    return None


def _unpack(view: View) -> Refusal | None:
    rank = len(view.shape(0))
    return None if rank <= 4 else Refusal(f"UNPACK of a {rank}-D tensor", REMAKE, "rank")


def _batch_matmul(view: View) -> Refusal | None:
    """Two inputs; with one run-time input, the second is the constant."""
    count = len(view.op.inputs)
    if count != 2:
        return Refusal(f"BATCH_MATMUL with {count} inputs", REMAKE)
    if view.runtime_inputs() == 1 and not view.constant(view.inputs[1]):
        return Refusal("BATCH_MATMUL of a constant by a run-time tensor", "swap the operands")
    return None


_RULES: dict[str, Callable[[View], Refusal | None]] = {
    "CONV_2D": _conv,
    "TRANSPOSE_CONV": _conv,
    "DEPTHWISE_CONV_2D": _depthwise,
    "AVERAGE_POOL_2D": _pool,
    "MAX_POOL_2D": _pool,
    "FULLY_CONNECTED": _fully_connected,
    **dict.fromkeys(_REDUCE, _constant_axes),
    "REVERSE_V2": _constant_axes,
    "SLICE": _slice,
    "STRIDED_SLICE": _strided_slice,
    "PAD": _pad,
    "PADV2": _pad,
    "MIRROR_PAD": _pad,
    "DEQUANTIZE": _dequantize,
    "GATHER": _gather,
    "SELECT": _select,
    "SELECT_V2": _select,
    "UNPACK": _unpack,
    "BATCH_MATMUL": _batch_matmul,
    "SPLIT_V": lambda view: _operands(view, 1, 2),
    "ARG_MAX": lambda view: _operands(view, 1, 1),
    "CAST": _one_arg,
    "SOFTMAX": _one_arg,  # beta != 1 is refused too; the converter writes beta 1
    **dict.fromkeys(
        ("RESHAPE", "TILE", "TRANSPOSE", "QUANTIZE", "HARD_SWISH", "DEPTH_TO_SPACE",
         "SPACE_TO_DEPTH", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "TOPK_V2"),
        lambda view: _operands(view, 1, None),
    ),
    **dict.fromkeys(("RELU", "RELU6", "RELU_N1_TO_1", "LEAKY_RELU"), _one_arg),
}  # fmt: skip
