"""Is a model file already quantized? Said first, with what can still be done with it.

Users arrive with the files they ship: an int8 ``.tflite`` (a wake-word model), a QDQ or
QLinear ``.onnx`` (an OCR detector). Quantizing such a file again loses accuracy for nothing,
and an error about a later symptom (a scale LiteRT Quantizer cannot take, an opset ONNX
Runtime refuses) hides the cause. :func:`already_quantized` is the one sentence every verb
that quantizes says first, before anything runs:

- a ``.tflite`` with int8/uint8/int16/int4 tensors that carry scales;
- an ``.onnx`` with quantized ops (``QuantizeLinear``/``DequantizeLinear``, ``QLinear*``,
  ``MatMulInteger``/``ConvInteger``, ``DynamicQuantizeLinear``...), in any subgraph.

A float16 ``.tflite`` (float16 weights behind DEQUANTIZE) is not quantized here: it is
widened back to float32 and quantized (:mod:`tfcompress.quantization.engines.prepare`).
"""

from __future__ import annotations

from typing import Any

#: ONNX ops that only a quantized graph holds.
ONNX_QUANTIZED_OPS = frozenset(
    {
        "QuantizeLinear",
        "DequantizeLinear",
        "DynamicQuantizeLinear",
        "MatMulInteger",
        "ConvInteger",
        "QLinearConv",
        "QLinearMatMul",
        "QLinearAdd",
        "QLinearMul",
        "QLinearSigmoid",
        "QLinearGlobalAveragePool",
        "QLinearAveragePool",
        "QLinearConcat",
        "QLinearLeakyRelu",
        "QLinearSoftmax",
        "DynamicQuantizeLSTM",
        "DynamicQuantizeMatMul",
        "MatMulIntegerToFloat",
        "QAttention",
        "QGemm",
    }
)
_TFLITE_QUANTIZED = frozenset({"int8", "uint8", "int16", "int4"})
_ZERO_POINT_INPUT = {"QuantizeLinear": 2, "DequantizeLinear": 2, "QLinearConv": 2}


def quantized_precision(model: Any) -> str | None:
    """What makes ``model`` quantized, in a few words; None for a float model.

    Args:
        model: A :class:`~tfcompress.models.TFLiteModel` or
            :class:`~tfcompress.models.OnnxModel` (any other model: None).
    """
    from tfcompress.models.loading import OnnxModel, TFLiteModel

    if isinstance(model, TFLiteModel):
        return tflite_precision(model.content)
    return _onnx_precision(model) if isinstance(model, OnnxModel) else None


def already_quantized(model: Any) -> str | None:
    """The sentence that refuses to quantize ``model`` again, or None when it is float.

    See :func:`quantized_refusal` for its words.

    Example:
        >>> already_quantized(OnnxModel(qdq_bytes, name="det.onnx"))  # doctest: +SKIP
        'det.onnx is already quantized (int8: DequantizeLinear, QuantizeLinear nodes): ...'
    """
    from tfcompress.models.loading import TFLiteModel, model_name

    precision = quantized_precision(model)
    if precision is None:
        return None
    shown = str(getattr(model, "path", None) or model_name(model))
    return quantized_refusal(shown, precision, tflite=isinstance(model, TFLiteModel))


def refuse_quantized(model: Any) -> None:
    """Refuse to quantize ``model`` again when it is quantized already (:func:`already_quantized`).

    Raises:
        UnsupportedModelError: It is.
    """
    from tfcompress.errors import UnsupportedModelError

    said = already_quantized(model)
    if said is not None:
        raise UnsupportedModelError(said)


def quantized_refusal(shown: str, precision: str, *, tflite: bool) -> str:
    """``shown`` is already quantized (``precision``), and what can still be done with it.

    It starts by saying so, then names what can still be done: measure it, gate it against
    its float source, check it for a target (a ``.tflite``), or pass the float source.
    """
    targets = (
        f", check it for a target (tfcompress mcu {shown}, tfcompress edgetpu {shown})"
        if tflite
        else ""
    )
    return (
        f"{shown} is already quantized ({precision}): quantizing it again loses accuracy for "
        f"nothing. What can still be done: measure it (tfcompress benchmark {shown} --data "
        f"TEST.npz), gate it against its float source (tfcompress gate FLOAT_MODEL {shown} "
        f"--eval TEST.npz){targets}, or pass the float model it was made from."
    )


def tflite_precision(content: bytes) -> str | None:
    """``"int8 tensors with scales"`` for a quantized ``.tflite``'s bytes; None for a float one."""
    from tfcompress.errors import ModelLoadError
    from tfcompress.models.tflite_file import read_tflite

    try:
        graphs = read_tflite(content).subgraphs
    except ModelLoadError:
        return None
    dtypes = sorted(
        {
            t.dtype
            for graph in graphs
            for t in graph.tensors
            if t.dtype in _TFLITE_QUANTIZED and t.quantization is not None and t.quantization.scales
        }
    )
    return f"{', '.join(dtypes)} tensors with scales" if dtypes else None


def _onnx_precision(model: Any) -> str | None:
    from tfcompress.models.onnx import onnx_graphs, parse

    proto = parse(model)
    if proto is None:
        return None
    ops: set[str] = set()
    zero_points: set[str] = set()
    for graph in onnx_graphs(proto.graph):
        types = {init.name: init.data_type for init in graph.initializer}
        for node in graph.node:
            if node.op_type not in ONNX_QUANTIZED_OPS:
                continue
            ops.add(node.op_type)
            index = _ZERO_POINT_INPUT.get(node.op_type)
            if index is not None and len(node.input) > index and node.input[index] in types:
                zero_points.add(_type_name(types[node.input[index]]))
    if not ops:
        return None
    kinds = f"{', '.join(sorted(ops))} nodes"
    return f"{', '.join(sorted(zero_points))}: {kinds}" if zero_points else kinds


def _type_name(data_type: int) -> str:
    from tfcompress._compat.onnx import onnx_module

    tensor = onnx_module().TensorProto
    return str(tensor.DataType.Name(data_type)).lower()
