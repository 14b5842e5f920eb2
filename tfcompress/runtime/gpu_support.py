"""What LiteRT's GPU delegate takes, read from a ``.tflite``: the static delegability check.

Where no GPU answers, this is how tfcompress judges whether a file would run whole on one
(the ``gpu`` target's check says it checked statically); where a GPU refuses a model, the
``gpu`` backend names the ops at fault from it. It reads the file only (no native code, no
numpy): the ops of the main subgraph, their tensors' types, shapes and constness.

The rules restate LiteRT's own, read from the public TensorFlow Lite sources that LiteRT's
GPU accelerator (ML Drift over WebGPU in ai-edge-litert 2.3) builds on:

- ``tensorflow/lite/tools/versioning/gpu_compatibility.cc``, ``CheckGpuDelegateCompatibility``:
  the per-op checks (they were ``TFLiteOperationParser::IsSupported`` in
  ``tensorflow/lite/delegates/gpu/common/model_builder.cc``). An op outside its list is "Not
  supported op" (``SHAPE`` is one).
- ``tensorflow/lite/delegates/gpu/common/model_builder.cc``, ``GetOpsToReplace`` and
  ``IsAllAllowedTensors``: every tensor an op reads or writes at run time (not a stored
  constant) must be float32 or float16, or int8/uint8 in a quantized model; bool outputs for
  comparisons, int32 or bool for ``CAST``, int32 indices for ``ONE_HOT``. Otherwise "OP is
  supported, but tensor type/shape isn't compatible." Tensors of rank 5 or more are refused
  ("Tensor dimensions must be less than 5").

A dynamic batch is not refused by itself (LiteRT compiles the file at its stored shapes),
but Keras turns a ``Flatten`` after a dynamic batch into ``SHAPE``, ``STRIDED_SLICE`` and
``PACK`` on int32 tensors feeding a ``RESHAPE``: none of them runs on the GPU, and a static
batch folds them away. The check says which refused ops come from that, and the fix.

Example:
    >>> support = gpu_support(Path("cnn.tflite").read_bytes())  # doctest: +SKIP
    >>> support.compatible, [str(op) for op in support.cpu_ops][:1]  # doctest: +SKIP
    (False, ['SHAPE (op 4): no GPU delegate kernel'])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tfcompress.models.tflite_file import Operator, Subgraph, Tensor, TFLiteFile, read_tflite
from tfcompress.models.tflite_options import OptionValue, read_options

__all__ = ["CpuOp", "GpuSupport", "gpu_support", "STATIC_BATCH_FIX"]

#: What makes a dynamic-batch model whole for the GPU (the target's rule and its flag).
STATIC_BATCH_FIX = "make it with --target gpu (a static batch: --static-batch 1, or N)"

_RUNTIME_TYPES = frozenset({"float32", "float16"})
_QUANTIZED_TYPES = frozenset({"int8", "uint8"})
_COMPARISONS = frozenset({"GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL", "EQUAL", "NOT_EQUAL"})
_UNARY = frozenset(
    {"ABS", "CEIL", "COS", "ELU", "EXP", "FLOOR", "GELU", "LOG", "LOGISTIC", "NEG", "RSQRT",
     "SIGN", "SIN", "SQRT", "SQUARE", "TANH"}
)  # fmt: skip
_BINARY = frozenset(
    {"ATAN2", "DIV", "FLOOR_DIV", "FLOOR_MOD", "LOGICAL_AND", "MAXIMUM", "MINIMUM", "POW",
     "SQUARED_DIFFERENCE", "SUB", *_COMPARISONS}
)  # fmt: skip
_ONE_RUNTIME_INPUT = frozenset(
    {"RESHAPE", "TILE", "TRANSPOSE", "QUANTIZE", "HARD_SWISH", "DEPTH_TO_SPACE",
     "SPACE_TO_DEPTH", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "CAST"}
)  # fmt: skip
# gpu_compatibility.cc accepts these on their counts and types alone
_ACCEPTED = frozenset(
    {"ADD", "BATCH_MATMUL", "CONCATENATION", "CUMSUM", "DENSIFY", "DYNAMIC_UPDATE_SLICE",
     "EMBEDDING_LOOKUP", "LEAKY_RELU", "LSTM", "ONE_HOT", "PACK", "PRELU", "RELU", "RELU6",
     "RELU_N1_TO_1", "SELECT", "SELECT_V2", "SPLIT", "SPLIT_V", "STABLEHLO_CLAMP"}
)  # fmt: skip
_CUSTOM = frozenset(
    {"Convolution2DTransposeBias", "MaxPoolingWithArgmax2D", "MaxUnpooling2D", "Resampler"}
)
_MAX_RANK = 4
_SIGN_BIT = 5  # TfLiteFusedActivation kTfLiteActSignBit, the one fused activation refused


@dataclass(frozen=True)
class CpuOp:
    """An op LiteRT's GPU delegate would leave to the CPU, and why.

    Attributes:
        index: The op's index in the main subgraph.
        op: Its type (``SHAPE``; ``CUSTOM:name`` for a custom op).
        reason: Which rule refuses it.
        from_dynamic_shape: It computes (or consumes) a shape at run time: a static batch
            folds it away.
    """

    index: int
    op: str
    reason: str
    from_dynamic_shape: bool = False

    def __str__(self) -> str:
        return f"{self.op} (op {self.index}): {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return {
            "index": self.index,
            "op": self.op,
            "reason": self.reason,
            "from_dynamic_shape": self.from_dynamic_shape,
        }


@dataclass(frozen=True)
class GpuSupport:
    """The static check's answer: which ops LiteRT's GPU delegate would refuse.

    Attributes:
        ops_total: Ops in the main subgraph.
        cpu_ops: The ops it refuses (they run on the CPU, or the compilation fails).
        dynamic_inputs: ``(name, shape signature)`` of each input with a dynamic dimension.

    Example:
        >>> GpuSupport(3, (), ()).compatible
        True
    """

    ops_total: int
    cpu_ops: tuple[CpuOp, ...]
    dynamic_inputs: tuple[tuple[str, tuple[int, ...]], ...]

    @property
    def compatible(self) -> bool:
        """Every op is one the GPU delegate takes."""
        return not self.cpu_ops

    @property
    def dynamic_shape_ops(self) -> tuple[CpuOp, ...]:
        """The refused ops a static batch folds away."""
        return tuple(op for op in self.cpu_ops if op.from_dynamic_shape)

    def fix(self) -> str | None:
        """What to do so that the file runs whole on a GPU, or None when it does.

        Example:
            >>> GpuSupport(2, (CpuOp(0, "SHAPE", "no GPU delegate kernel", True),),
            ...            (("x", (-1, 4)),)).fix()
            'make it with --target gpu (a static batch: --static-batch 1, or N)'
        """
        if self.compatible:
            return None
        others = sorted({op.op for op in self.cpu_ops if not op.from_dynamic_shape})
        parts = [STATIC_BATCH_FIX] if self.dynamic_shape_ops else []
        if others:
            parts.append(
                f"replace the layers that make {', '.join(others)} (no GPU delegate kernel takes "
                "them as they are), or accept that they run on the CPU"
            )
        return "; ".join(parts)

    def cause(self, limit: int = 4) -> str:
        """The refused ops in one phrase (the first ``limit``), with the dynamic inputs.

        Example:
            >>> GpuSupport(2, (CpuOp(4, "SHAPE", "no GPU delegate kernel", True),),
            ...            (("x", (-1, 4)),)).cause()
            'SHAPE (op 4): no GPU delegate kernel; dynamic batch on x [-1, 4]'
        """
        shown = [str(op) for op in self.cpu_ops[:limit]]
        if len(self.cpu_ops) > limit:
            shown.append(f"{len(self.cpu_ops) - limit} more")
        text = "; ".join(shown)
        if self.dynamic_shape_ops and self.dynamic_inputs:
            inputs = ", ".join(f"{name} {list(shape)}" for name, shape in self.dynamic_inputs)
            text += f"; dynamic batch on {inputs}"
        return text

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return {
            "ops_total": self.ops_total,
            "cpu_ops": [op.to_dict() for op in self.cpu_ops],
            "dynamic_inputs": [
                {"name": name, "shape_signature": list(shape)}
                for name, shape in self.dynamic_inputs
            ],
        }


def gpu_support(content: bytes | TFLiteFile) -> GpuSupport:
    """Check statically which ops of a ``.tflite`` LiteRT's GPU delegate would refuse.

    Args:
        content: The file's bytes (read and validated here) or a validated parsed file.

    Returns:
        The refused ops with their reasons, and the inputs with a dynamic dimension.

    Raises:
        ModelLoadError: Not a readable ``.tflite``.

    Example:
        >>> gpu_support(static_batch_content).compatible  # doctest: +SKIP
        True
    """
    model = content if isinstance(content, TFLiteFile) else _read(content)
    if not model.subgraphs:
        return GpuSupport(0, (), ())
    graph = model.subgraphs[0]
    options = read_options(model)
    from_shape = _shape_tensors(model, graph)
    folded = _fp16_weights(model, graph)
    refused = []
    for op in graph.operators:
        view = _View(model, graph, op, options.get(op.index, {}), folded)
        reason = _op_rule(view) or _tensor_rule(view)
        if reason is not None:
            touches_shape = op.opcode == "SHAPE" or any(i in from_shape for i in op.inputs)
            refused.append(CpuOp(op.index, op.opcode, reason, touches_shape))
    dynamic = tuple(
        (graph.tensors[i].name, tuple(graph.tensors[i].shape_signature or ()))
        for i in graph.inputs
        if 0 <= i < len(graph.tensors) and -1 in (graph.tensors[i].shape_signature or ())
    )
    return GpuSupport(len(graph.operators), tuple(refused), dynamic)


def _read(content: bytes) -> TFLiteFile:
    model = read_tflite(content)
    model.validate()
    return model


def _fp16_weights(model: TFLiteFile, graph: Subgraph) -> frozenset[int]:
    """Outputs of DEQUANTIZE ops over stored float16 weights (a float16 recipe's weights).

    The delegate's FP16GraphPartitionHelper reads them as the constants they are
    (model_builder.cc skips those DEQUANTIZE nodes), so they count as constants here too.
    """
    found = set()
    for op in graph.operators:
        if op.opcode != "DEQUANTIZE" or not op.inputs or not 0 <= op.inputs[0] < len(graph.tensors):
            continue
        source = graph.tensors[op.inputs[0]]
        if source.dtype == "float16" and model.is_constant(source):
            found.update(i for i in op.outputs if i >= 0)
    return frozenset(found)


def _shape_tensors(model: TFLiteFile, graph: Subgraph) -> set[int]:
    """Tensors computed at run time from a ``SHAPE``: what a static batch makes constant."""
    found: set[int] = set()
    for op in graph.operators:  # graph order: producers before consumers
        if op.opcode == "SHAPE" or any(i in found for i in op.inputs if i >= 0):
            for index in op.outputs:
                tensor = graph.tensors[index] if 0 <= index < len(graph.tensors) else None
                if tensor is not None and tensor.dtype in ("int32", "int64"):
                    found.add(index)
    return found


@dataclass(frozen=True)
class _View:
    model: TFLiteFile
    graph: Subgraph
    op: Operator
    options: Mapping[str, OptionValue]
    folded: frozenset[int] = frozenset()

    def tensors(self, indices: tuple[int, ...]) -> list[Tensor | None]:
        return [
            self.graph.tensors[i] if 0 <= i < len(self.graph.tensors) else None for i in indices
        ]

    @property
    def inputs(self) -> list[Tensor | None]:
        return self.tensors(self.op.inputs)

    @property
    def outputs(self) -> list[Tensor | None]:
        return self.tensors(self.op.outputs)

    def constant(self, tensor: Tensor | None) -> bool:
        if tensor is None:
            return False
        return tensor.index in self.folded or self.model.is_constant(tensor)

    def runtime_inputs(self) -> int:
        return sum(1 for t in self.inputs if t is not None and not self.constant(t))

    def constant_inputs(self) -> int:
        return sum(1 for t in self.inputs if self.constant(t))

    def rank(self, position: int) -> int:
        inputs = self.inputs
        tensor = inputs[position] if position < len(inputs) else None
        return len(tensor.shape or ()) if tensor is not None else 0


def _op_rule(view: _View) -> str | None:
    """gpu_compatibility.cc's verdict on the op itself (None: it takes it)."""
    name = view.op.opcode
    if name.startswith("CUSTOM:"):
        custom = name.split(":", 1)[1]
        return None if custom in _CUSTOM else f"no GPU delegate kernel for the custom op {custom}"
    rule = _RULES.get(name)
    if rule is not None:
        return rule(view)
    if name in _ACCEPTED:
        return None
    if name in _UNARY:
        ok = view.runtime_inputs() == 1 and view.constant_inputs() == 0
        return None if ok else f"{name} takes one run-time input and no constant"
    if name in _BINARY:
        runtime, constant = view.runtime_inputs(), view.constant_inputs()
        return None if (runtime, constant) in ((2, 0), (1, 1)) else f"{name}: 1 or 2 operands"
    if name in _ONE_RUNTIME_INPUT:
        runtime = view.runtime_inputs()
        return None if runtime == 1 else f"{name} takes 1 run-time input, not {runtime}"
    return "no GPU delegate kernel"


def _tensor_rule(view: _View) -> str | None:
    """model_builder.cc's IsAllAllowedTensors: run-time tensor types and ranks."""
    name = view.op.opcode
    allowed_in = set(_RUNTIME_TYPES | _QUANTIZED_TYPES)
    allowed_out = set(_RUNTIME_TYPES | _QUANTIZED_TYPES)
    if name in _COMPARISONS:
        allowed_out.add("bool")
    if name == "CAST":
        allowed_in |= {"bool", "int32"}
        allowed_out.add("int32")
    if name == "ONE_HOT":
        allowed_in.add("int32")
    for tensors, allowed in ((view.inputs, allowed_in), (view.outputs, allowed_out)):
        for tensor in tensors:
            if tensor is None:
                continue
            if len(tensor.shape or ()) > _MAX_RANK:
                return f"tensor {tensor.name!r} has rank {len(tensor.shape or ())} (4 at most)"
            runtime = not view.constant(tensor) and not tensor.is_variable
            if runtime and tensor.dtype not in allowed:
                return f"{tensor.dtype} tensor {tensor.name!r} at run time (float or 8-bit only)"
    return None


def _conv(view: _View) -> str | None:
    runtime = view.runtime_inputs()
    return None if runtime <= 2 else f"{view.op.opcode} takes 1 or 2 run-time inputs"


def _depthwise(view: _View) -> str | None:
    if (found := _conv(view)) is not None:
        return found
    inputs, outputs = view.inputs, view.outputs
    if inputs[0] is None or not outputs or outputs[0] is None:
        return None
    shape_in, shape_out = inputs[0].shape or (), outputs[0].shape or ()
    if len(shape_in) != 4 or len(shape_out) != 4:
        return "DEPTHWISE_CONV_2D takes 4-D input and output"
    channels_in, channels_out = shape_in[3], shape_out[3]
    if channels_in > 1 and channels_out != channels_in:
        return "depth_multiplier != 1 with more than one input channel"
    return None


def _pool(view: _View) -> str | None:
    if view.runtime_inputs() != 1:
        return f"{view.op.opcode} takes 1 run-time input"
    if view.options.get("FusedActivationFunction") == _SIGN_BIT:
        return "fused SIGN_BIT activation"
    return None


def _fully_connected(view: _View) -> str | None:
    if view.options.get("WeightsFormat", 0) != 0:
        return "shuffled FULLY_CONNECTED weights format"
    if view.runtime_inputs() > 2:
        return "FULLY_CONNECTED takes at most 2 run-time inputs"
    if view.constant(view.inputs[0] if view.inputs else None):
        return "FULLY_CONNECTED with a constant input"
    output = view.outputs[0] if view.outputs else None
    ranks_differ = output is not None and view.rank(0) != len(output.shape or ())
    if view.options.get("KeepNumDims") and ranks_differ:
        return "FULLY_CONNECTED keep_num_dims with input and output of different ranks"
    return None


def _reduce(view: _View) -> str | None:
    if view.runtime_inputs() != 1:
        return f"{view.op.opcode} takes 1 run-time input"
    axes = view.inputs[1] if len(view.inputs) > 1 else None
    if axes is None or not view.constant(axes):
        return f"{view.op.opcode} needs constant axes"
    if axes.dtype != "int32":
        return f"{view.op.opcode} needs int32 axes, not {axes.dtype}"
    return None


def _slice(view: _View) -> str | None:
    if len(view.op.inputs) < 3:
        return "SLICE takes 3 inputs"
    return None if view.rank(0) in (3, 4) else "SLICE takes 3-D or 4-D tensors only"


def _strided_slice(view: _View) -> str | None:
    for mask in ("EllipsisMask", "NewAxisMask", "ShrinkAxisMask"):
        if view.options.get(mask):
            return f"STRIDED_SLICE with {mask}"
    if len(view.op.inputs) < 4:
        return "STRIDED_SLICE takes 4 inputs"
    rank = view.rank(0)
    return None if rank in (3, 4) else f"STRIDED_SLICE of a {rank}-D tensor (3-D or 4-D only)"


def _pad(view: _View) -> str | None:
    if view.runtime_inputs() != 1:
        return f"{view.op.opcode} takes 1 run-time input"
    paddings = view.inputs[1] if len(view.inputs) > 1 else None
    shape = tuple(paddings.shape or ()) if paddings is not None else ()
    if len(shape) != 2 or shape[0] not in (3, 4) or shape[1] != 2:
        return f"paddings of shape {list(shape)} (4x2 or 3x2 only)"
    return None


def _two_inputs(view: _View) -> str | None:
    count = len(view.op.inputs)
    return None if count == 2 else f"{view.op.opcode} with {count} inputs (2 only)"


def _mul(view: _View) -> str | None:
    if (found := _two_inputs(view)) is not None:
        return found
    first, second = view.inputs
    if first is None or second is None:
        return None
    a, b = tuple(first.shape or ()), tuple(second.shape or ())
    if len(a) == len(b):
        smaller_a = any(x < y for x, y in zip(a, b, strict=True))
        smaller_b = any(y < x for x, y in zip(a, b, strict=True))
        if smaller_a and smaller_b:
            return "MUL needs one input at least as large as the other in every dimension"
    return None


def _dequantize(view: _View) -> str | None:
    source = view.inputs[0] if view.inputs else None
    return "DEQUANTIZE of int16" if source is not None and source.dtype == "int16" else None


def _gather(view: _View) -> str | None:
    inputs = view.inputs
    if len(inputs) != 2 or inputs[0] is None or inputs[1] is None:
        return "GATHER takes 2 inputs"
    if inputs[0].dtype == "int32":
        return "GATHER of int32 values"
    if len(inputs[1].shape or ()) != 1 or inputs[1].dtype != "int32":
        return "GATHER needs 1-D int32 indices"
    return None


_RULES: dict[str, Callable[[_View], str | None]] = {
    "CONV_2D": _conv,
    "TRANSPOSE_CONV": _conv,
    "DEPTHWISE_CONV_2D": _depthwise,
    "AVERAGE_POOL_2D": _pool,
    "MAX_POOL_2D": _pool,
    "FULLY_CONNECTED": _fully_connected,
    "MEAN": _reduce,
    "SUM": _reduce,
    "REDUCE_MAX": _reduce,
    "REDUCE_MIN": _reduce,
    "REDUCE_PROD": _reduce,
    "SLICE": _slice,
    "STRIDED_SLICE": _strided_slice,
    "PAD": _pad,
    "PADV2": _pad,
    "MIRROR_PAD": _pad,
    "ADD_N": _two_inputs,
    "MUL": _mul,
    "DEQUANTIZE": _dequantize,
    "GATHER": _gather,
    "SOFTMAX": lambda view: None,  # beta != 1 is refused; the converter writes beta 1
}
