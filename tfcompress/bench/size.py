"""Size of an artifact: file and gzip bytes, parameters, MACs, op count and numeric precision."""

from __future__ import annotations

import gzip
import logging
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tfcompress.models.loading import SavedModelDir, TFLiteModel
from tfcompress.models.onnx import OnnxModel, parse

logger = logging.getLogger(__name__)

_QUANTIZED_ONNX_OPS = {"QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger"}
_WEIGHT_OPS = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV"}


@dataclass(frozen=True)
class SizeInfo:
    """How big an artifact is, on disk and in compute.

    Attributes:
        file_bytes: Bytes of the file (a directory: all its files).
        gzip_bytes: Bytes after gzip -9, what a compressed download or OTA update sees.
        params: Elements of all constant tensors (weights, biases); None when unknown.
        macs: Multiply-accumulates of one sample through conv, depthwise, dense and matmul
            layers; None when the format gives no shapes to count them.
        ops: Operators in the graph (TFLite ops, ONNX nodes); None for Keras models.
        precision: ``float32``, ``float16``, ``dynamic`` (int8 weights, float math),
            ``int8``, ``int16x8`` or ``mixed``.
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
    """Measure a loaded model (the file at ``path`` when it was loaded from one).

    Args:
        model: A :class:`TFLiteModel`, :class:`OnnxModel`, Keras model or SavedModelDir.
        path: The file or directory it was loaded from, if any.

    Returns:
        The sizes.

    Example:
        >>> measure_size(TFLiteModel(content)).precision  # doctest: +SKIP
        'int8'
    """
    if isinstance(model, TFLiteModel):
        return _tflite_size(model.content)
    if isinstance(model, OnnxModel):
        return _onnx_size(model)
    if isinstance(model, SavedModelDir):
        data = _directory_bytes(model.path)
        return SizeInfo(len(data), _gzip(data), None, None, None, "float32")
    return _keras_size(model, path)


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
    from tfcompress._compat.litert import flatbuffer_utils

    flatbuffer = flatbuffer_utils().read_model_from_bytearray(bytearray(content))
    schema = _schema()
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    graph = flatbuffer.subgraphs[0]
    tensors, buffers = graph.tensors, flatbuffer.buffers

    def constant(index: int) -> bool:
        if index < 0:
            return False
        buffer = buffers[tensors[index].buffer]
        return (buffer.data is not None and len(buffer.data) > 0) or bool(
            getattr(buffer, "offset", 0)
        )

    def shape(index: int) -> list[int]:
        return [abs(int(d)) for d in (tensors[index].shape if index >= 0 else [])]

    params = sum(
        int(np.prod(t.shape)) if t.shape is not None else 1
        for i, t in enumerate(tensors)
        if constant(i)
    )
    ops = sum(len(g.operators) for g in flatbuffer.subgraphs)
    macs, weight_types, activation_types = 0, Counter(), Counter()
    for op in graph.operators:
        code = flatbuffer.operatorCodes[op.opcodeIndex]
        name = names.get(max(code.builtinCode, code.deprecatedBuiltinCode), "CUSTOM")
        macs += _tflite_macs(name, list(op.inputs), list(op.outputs), shape)
        if name in _WEIGHT_OPS and len(op.inputs) > 1:
            data_index = op.inputs[2] if name == "TRANSPOSE_CONV" else op.inputs[0]
            weight_types[_weight_type(op.inputs[1], graph, constant, flatbuffer, names)] += 1
            activation_types[tensors[data_index].type] += 1
    precision = _tflite_precision(weight_types, activation_types, schema.TensorType)
    return SizeInfo(len(content), _gzip(content), params, macs or None, ops, precision)


def _schema() -> Any:
    import importlib

    try:
        return importlib.import_module("ai_edge_litert.schema_py_generated")
    except ImportError:
        return importlib.import_module("tensorflow.lite.python.schema_py_generated")


def _weight_type(index: int, graph: Any, constant: Any, flatbuffer: Any, names: dict) -> int:
    """The stored type of a weight, looking through a DEQUANTIZE (float16/dynamic models)."""
    if constant(index):
        return int(graph.tensors[index].type)
    for op in graph.operators:
        code = flatbuffer.operatorCodes[op.opcodeIndex]
        name = names.get(max(code.builtinCode, code.deprecatedBuiltinCode))
        if name == "DEQUANTIZE" and index in list(op.outputs):
            return int(graph.tensors[op.inputs[0]].type)
    return int(graph.tensors[index].type)


def _tflite_macs(name: str, inputs: list[int], outputs: list[int], shape: Any) -> int:
    out = shape(outputs[0]) if outputs else []
    if not out:
        return 0
    per_sample = int(np.prod(out[1:])) if len(out) > 1 else int(np.prod(out))
    if name == "CONV_2D" and len(inputs) > 1:
        _, kh, kw, cin = shape(inputs[1])
        return per_sample * kh * kw * cin
    if name == "DEPTHWISE_CONV_2D" and len(inputs) > 1:
        _, kh, kw, _ = shape(inputs[1])
        return per_sample * kh * kw
    if name == "FULLY_CONNECTED" and len(inputs) > 1:
        return per_sample * shape(inputs[1])[-1]
    if name == "TRANSPOSE_CONV" and len(inputs) > 2:
        _, kh, kw, cin = shape(inputs[1])
        source = shape(inputs[2])
        return int(np.prod(source[1:])) * kh * kw * cin if source else 0
    if name == "BATCH_MATMUL" and len(inputs) > 1:
        return per_sample * (shape(inputs[0])[-1] if shape(inputs[0]) else 0)
    return 0


def _tflite_precision(weights: Counter, activations: Counter, types: Any) -> str:
    if not weights:
        return "float32"
    if types.FLOAT16 in weights:
        return "float16"
    if types.INT8 in weights or types.INT4 in weights:
        if types.INT16 in activations:
            return "int16x8"
        if types.INT8 in activations or types.UINT8 in activations:
            return "int8" if types.FLOAT32 not in activations else "mixed"
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
