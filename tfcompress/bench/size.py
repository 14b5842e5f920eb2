"""Size of an artifact: file and gzip bytes, parameters, MACs, op count and numeric precision."""

from __future__ import annotations

import gzip
import logging
import math
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tfcompress.models.loading import SavedModelDir, TFLiteModel
from tfcompress.models.onnx import OnnxModel, parse
from tfcompress.models.tflite_file import Subgraph, TFLiteFile, read_tflite

logger = logging.getLogger(__name__)

_QUANTIZED_ONNX_OPS = {"QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger"}
_WEIGHT_OPS = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV"}


@dataclass(frozen=True)
class SizeInfo:
    """How big an artifact is, on disk and in compute.

    ``file_bytes`` counts a directory's files too; ``gzip_bytes`` is after gzip -9 (what a
    download or OTA update sees); ``params`` counts the elements of constant tensors and
    ``macs`` the multiply-accumulates of one sample through conv, depthwise, dense and
    matmul layers, ``ops`` the graph's operators (None where unknown). ``precision`` is
    ``float32``, ``float16``, ``dynamic`` (int8 weights, float math), ``int8``, ``int16x8``,
    an integer file with the ops not in its precision counted (``int8 + 5 float``: read from
    the ops, not from a name), or ``mixed`` for other formats' mixes.
    """

    file_bytes: int
    gzip_bytes: int
    params: int | None
    macs: int | None
    ops: int | None
    precision: str

    def to_dict(self) -> dict[str, Any]:
        """Plain data for reports."""
        return asdict(self)


def measure_size(model: Any, *, path: Path | None = None) -> SizeInfo:
    """The sizes of a loaded model (a .tflite, .onnx, Keras model or SavedModel).

    ``path``, the file or folder it was loaded from, is what the file sizes measure.
    """
    if isinstance(model, TFLiteModel):
        return _tflite_size(model.content)
    if isinstance(model, OnnxModel):
        return _onnx_size(model)
    if isinstance(model, SavedModelDir):
        data = _directory_bytes(model.path)
        precision = _saved_model_precision(model.path)
        return SizeInfo(len(data), _gzip(data), None, None, None, precision)
    return _keras_size(model, path)


def _saved_model_precision(path: Path) -> str:
    """The stored dtype of a SavedModel's weights, read from its variables' checkpoint index.

    Integer variables (step counters, RNG seeds) are bookkeeping, not weights, and are left
    out. Several float dtypes give ``"mixed"``; no readable variables give ``"unknown"``
    (weights frozen into graph constants cannot be told without loading the graph).
    """
    from tfcompress._compat.tf import tensorflow

    tf = tensorflow()
    try:
        dtypes = tf.train.load_checkpoint(str(path / "variables" / "variables"))
        stored = dtypes.get_variable_to_dtype_map().values()
    except (tf.errors.OpError, ValueError) as error:  # no variables/, or a corrupt index
        logger.info("%s: variables not readable (%s); precision unknown", path, error)
        return "unknown"
    weights = {dtype.name for dtype in stored if dtype.is_floating}
    if not weights:
        return "unknown"
    return weights.pop() if len(weights) == 1 else "mixed"


def _gzip(data: bytes) -> int:
    return len(gzip.compress(data, compresslevel=9, mtime=0))


def _directory_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file())


def _keras_size(model: Any, path: Path | None) -> SizeInfo:
    if path is not None and path.is_dir():
        data = _directory_bytes(path)
    elif path is not None:
        data = path.read_bytes()
    else:
        with tempfile.TemporaryDirectory() as folder:
            target = Path(folder) / "model.keras"
            model.save(target)
            data = target.read_bytes()
    dtypes = {str(getattr(w.dtype, "name", w.dtype)) for w in model.weights}
    precision = "float32" if dtypes <= {"float32"} else "mixed"
    return SizeInfo(len(data), _gzip(data), int(model.count_params()), None, None, precision)


def _tflite_size(content: bytes) -> SizeInfo:
    parsed = read_tflite(content)
    parsed.validate()  # indices are in range from here on
    graph = parsed.subgraphs[0]
    tensors = graph.tensors

    def shape(index: int) -> list[int]:
        return [abs(d) for d in (tensors[index].shape or ())] if index >= 0 else []

    params = sum(math.prod(t.shape or ()) for t in tensors if parsed.is_constant(t))
    ops = sum(len(g.operators) for g in parsed.subgraphs)
    macs, weight_types, activation_types = 0, Counter[str](), Counter[str]()
    computes = Counter(_computes_in(op, parsed, graph) for op in graph.operators)
    for op in graph.operators:
        macs += tflite_op_macs(op.opcode, list(op.inputs), list(op.outputs), shape)
        needed = 3 if op.opcode == "TRANSPOSE_CONV" else 2  # (output shape,) weights, data
        if op.opcode in _WEIGHT_OPS and len(op.inputs) >= needed:
            data_index = op.inputs[2] if op.opcode == "TRANSPOSE_CONV" else op.inputs[0]
            weight_types[_weight_type(op.inputs[1], parsed, graph)] += 1
            activation_types[tensors[data_index].dtype if data_index >= 0 else "none"] += 1
    precision = _with_op_counts(_tflite_precision(weight_types, activation_types), computes)
    return SizeInfo(len(content), _gzip(content), params, macs or None, ops, precision)


#: Ops that move or convert values rather than compute: not counted by :func:`_computes_in`.
_NOT_COMPUTE = frozenset({"QUANTIZE", "DEQUANTIZE", "SHAPE", "RANK"})
_FLOATS = frozenset({"float16", "float32", "float64", "bfloat16"})


def _computes_in(op: Any, parsed: TFLiteFile, graph: Subgraph) -> str:
    """What an op computes in: ``float``, ``int16``, ``int8`` (or ``""``: not counted).

    Float when an output or a non-constant input is a float tensor (the same reading as
    :mod:`tfcompress.quantization.float_ops`); int16 when an output is 16-bit.
    """
    if op.opcode in _NOT_COMPUTE:
        return ""
    tensors = graph.tensors
    outputs = [tensors[i].dtype for i in op.outputs if 0 <= i < len(tensors)]
    inputs = [
        tensors[i].dtype
        for i in op.inputs
        if 0 <= i < len(tensors) and not parsed.is_constant(tensors[i])
    ]
    if any(d in _FLOATS for d in (*outputs, *inputs)):
        return "float"
    return "int16" if "int16" in outputs else "int8"


def _with_op_counts(precision: str, computes: Counter[str]) -> str:
    """An integer file's label, saying which ops are not in its precision (read from ops).

    ``int8`` with every op integer stays ``int8``; with some ops in float or 16-bit it says
    how many (``int8 + 5 float``, ``int8 + 1 int16``); ``int16x8`` only when no op computes
    in int8; a file with int8 weights and float math stays ``dynamic``.

    Example:
        >>> _with_op_counts("int8", Counter({"int8": 20, "float": 5}))
        'int8 + 5 float'
        >>> _with_op_counts("int16x8", Counter({"int8": 19, "int16": 1}))
        'int8 + 1 int16'
        >>> _with_op_counts("int16x8", Counter({"int16": 12, "float": 1}))
        'int16x8 + 1 float'
    """
    if precision not in ("int8", "int16x8", "mixed"):
        return precision
    base = "int8" if computes["int8"] or not computes["int16"] else "int16x8"
    extra = [f"{computes[kind]} {kind}" for kind in ("float", "int16") if computes[kind]]
    extra = [e for e in extra if not (base == "int16x8" and e.endswith("int16"))]
    return " + ".join([base, *extra])


def precision_family(precision: str) -> str:
    """``mixed`` for a labelled mix (``int8 + 5 float``), else the label itself.

    Example:
        >>> precision_family("int8 + 5 float"), precision_family("int8")
        ('mixed', 'int8')
    """
    return "mixed" if " + " in precision else precision


def _weight_type(index: int, parsed: TFLiteFile, graph: Subgraph) -> str:
    """The stored type of a weight, looking through a DEQUANTIZE (float16/dynamic models)."""
    if index < 0:
        return "none"
    if parsed.is_constant(graph.tensors[index]):
        return graph.tensors[index].dtype
    for op in graph.operators:
        if op.opcode == "DEQUANTIZE" and index in op.outputs and op.inputs and op.inputs[0] >= 0:
            return graph.tensors[op.inputs[0]].dtype
    return graph.tensors[index].dtype


def tflite_op_macs(name: str, inputs: list[int], outputs: list[int], shape: Any) -> int:
    """Multiply-accumulates of one ``.tflite`` op for one sample; 0 when shapes cannot tell.

    The one MAC counter: :func:`measure_size` sums it over a model, the Edge TPU linter per
    op to say which share of the work the TPU would do. ``shape`` maps a tensor index to its
    shape (a list; empty when unknown); the batch dimension is excluded.

    Example:
        >>> shapes = {0: [1, 8], 1: [4, 8], 2: [1, 4]}
        >>> tflite_op_macs("FULLY_CONNECTED", [0, 1], [2], shapes.get)
        32
    """
    out = shape(outputs[0]) if outputs else []
    if not out:
        return 0
    per_sample = math.prod(out[1:]) if len(out) > 1 else math.prod(out)
    kernel = shape(inputs[1]) if len(inputs) > 1 else []
    if name == "CONV_2D" and len(kernel) == 4:
        return per_sample * math.prod(kernel[1:])
    if name == "DEPTHWISE_CONV_2D" and len(kernel) == 4:
        return per_sample * kernel[1] * kernel[2]
    if name == "FULLY_CONNECTED" and kernel:
        return per_sample * kernel[-1]
    if name == "TRANSPOSE_CONV" and len(kernel) == 4 and len(inputs) > 2:
        source = shape(inputs[2])
        return math.prod(source[1:]) * math.prod(kernel[1:]) if source else 0
    if name == "BATCH_MATMUL" and len(inputs) > 1:
        left = shape(inputs[0])
        return per_sample * left[-1] if left else 0
    return 0


def _tflite_precision(weights: Counter[str], activations: Counter[str]) -> str:
    if not weights:
        return "float32"
    if "float16" in weights:
        return "float16"
    if "int8" in weights or "int4" in weights:
        if "int16" in activations:
            return "int16x8"
        if "int8" in activations or "uint8" in activations:
            return "int8" if "float32" not in activations else "mixed"
        return "dynamic"
    return "float32"


def _onnx_size(model: OnnxModel) -> SizeInfo:
    proto = parse(model)
    gz = _gzip(model.content)
    if proto is None:
        return SizeInfo(model.size_bytes, gz, None, None, None, "unknown")
    from tfcompress._compat.onnx import onnx_module

    onnx = onnx_module()
    params = sum(int(np.prod(init.dims)) for init in proto.graph.initializer)
    kinds = {node.op_type for node in proto.graph.node}
    if "DynamicQuantizeLinear" in kinds:
        precision = "dynamic"
    elif kinds & _QUANTIZED_ONNX_OPS or "QuantizeLinear" in kinds:
        precision = "int8"
    elif any(init.data_type == onnx.TensorProto.FLOAT16 for init in proto.graph.initializer):
        precision = "float16"
    else:
        precision = "float32"
    macs = _onnx_macs(onnx, proto)
    return SizeInfo(model.size_bytes, gz, params, macs, len(proto.graph.node), precision)


def _onnx_macs(onnx: Any, proto: Any) -> int | None:
    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
    except (onnx.onnx_cpp2py_export.shape_inference.InferenceError, ValueError) as error:
        logger.debug("ONNX shape inference failed, MACs unknown: %s", error)
        return None
    shapes: dict[str, list[int]] = {
        init.name: [int(d) for d in init.dims] for init in inferred.graph.initializer
    }
    graph = inferred.graph
    for info in [*graph.value_info, *graph.input, *graph.output]:
        dims = info.type.tensor_type.shape.dim
        shapes[info.name] = [int(d.dim_value) if d.dim_value > 0 else 1 for d in dims]
    total = 0
    for node in graph.node:
        if node.op_type in {"Conv", "QLinearConv", "ConvInteger"}:
            weight = node.input[3] if node.op_type == "QLinearConv" else node.input[1]
            out_name = node.output[0]
            if weight not in shapes or out_name not in shapes or len(shapes[weight]) < 3:
                return None
            _, cin_per_group, *kernel = shapes[weight]
            total += int(np.prod(shapes[out_name][1:])) * cin_per_group * int(np.prod(kernel))
        elif node.op_type in {"Gemm", "MatMul", "MatMulInteger", "QLinearMatMul"}:
            right = node.input[3] if node.op_type == "QLinearMatMul" else node.input[1]
            if right not in shapes or node.output[0] not in shapes or len(shapes[right]) < 2:
                return None
            transposed = any(a.name == "transB" and a.i for a in node.attribute)
            k = shapes[right][-1] if transposed else shapes[right][-2]
            out = shapes[node.output[0]]
            total += int(np.prod(out[1:] if len(out) > 1 else out)) * k
    return total or None
