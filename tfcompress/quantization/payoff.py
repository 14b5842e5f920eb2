"""Did quantization pay off? A file larger than its input, or one where nothing was quantized.

ONNX Runtime's dynamic quantizer returns a file 0.3% *larger* than float32 for a voice
model whose LSTM sits inside ``If`` subgraphs (it quantizes nothing there and adds its
scales), and a file whose weights are ``Constant`` nodes came out 3-5% larger as int8. Both
are valid files that run; what they must not do is pass silently. :func:`payoff_warnings`
reads the two files and says so in one sentence each; :func:`tfcompress.quantize` adds them
to ``result.warnings`` (the CLI prints them); compress, which never chooses a file larger
than its float32 one, records an attempt that quantized nothing as failed with that reason
(:func:`payoff_failure`).
"""

from __future__ import annotations

from typing import Any

from tfcompress.models.onnx import onnx_graphs
from tfcompress.models.quantized import ONNX_QUANTIZED_OPS

#: Ops whose weights ONNX Runtime's quantizers make 8-bit: the ones that should have been.
_ONNX_WEIGHT_OPS = frozenset({"Conv", "MatMul", "Gemm", "LSTM", "GRU", "RNN", "ConvTranspose"})
#: Tensor types that only a quantized ``.tflite`` (or a float16 one) holds.
_TFLITE_LOW_TYPES = frozenset({"int8", "uint8", "int16", "int4", "float16"})


def payoff_warnings(result: Any) -> tuple[str, ...]:
    """Sentences for a quantized file that is larger than its input or quantized nothing.

    Of a ``QuantizationResult`` or ``OnnxQuantizationResult``: zero, one or two sentences
    (``float32``, which quantizes nothing, gets none).
    """
    name = getattr(result.recipe, "name", str(result.recipe))
    if name == "float32":
        return ()
    said = []
    size, reference = len(result.model_content), len(result.reference_content)
    if size > reference:
        said.append(
            f"the {name} file is {size:,} bytes, {size / reference - 1:.1%} larger than its "
            f"float32 input ({reference:,} bytes): quantizing did not make it smaller"
        )
    if getattr(result, "format", "tflite") == "onnx":
        nothing = _onnx_nothing(result.model_content, result.reference_content)
    else:
        nothing = _tflite_nothing(result.model_content)
    if nothing is not None:
        said.append(f"nothing in the {name} file was quantized: {nothing}")
    return tuple(said)


def payoff_failure(technique: str, recipe: Any, content: bytes) -> str | None:
    """Why compress must not return a post-training ``.tflite`` that quantized nothing.

    A file larger than its input is refused by compress's own size rule; this is the other
    half of "did not pay off". Fine-tuned exports (which may stay float on purpose: a pruned
    float32 file) and ``float32`` itself are not judged. ``recipe`` is what the attempt
    records (``{"recipe": {"name": ...}}`` or a bare recipe).
    """
    if technique not in ("ptq", "selective"):
        return None
    inner = recipe.get("recipe", recipe) if isinstance(recipe, dict) else {}
    name = inner.get("name") if isinstance(inner, dict) else None
    if name in (None, "float32"):
        return None
    nothing = _tflite_nothing(content)
    return None if nothing is None else f"nothing in the {name} file was quantized: {nothing}"


def _onnx_nothing(content: bytes, reference: bytes) -> str | None:
    """Why an ``.onnx`` holds no quantized op or weight (None when it holds some)."""
    try:
        import onnx
    except ImportError:  # the quantizer needs onnx: not reached in practice
        return None
    proto = onnx.load_from_string(content)
    low = {onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.FLOAT16}
    for graph in onnx_graphs(proto.graph):
        if any(node.op_type in ONNX_QUANTIZED_OPS for node in graph.node):
            return None
        if any(tensor.data_type in low for tensor in graph.initializer):
            return None
    source = onnx.load_from_string(reference)
    top = [n.op_type for n in source.graph.node if n.op_type in _ONNX_WEIGHT_OPS]
    nested = [
        n.op_type
        for graph in list(onnx_graphs(source.graph))[1:]
        for n in graph.node
        if n.op_type in _ONNX_WEIGHT_OPS
    ]
    if nested and not top:
        return (
            f"its {len(nested)} weighted op(s) ({', '.join(sorted(set(nested)))}) sit inside "
            "If/Loop subgraphs, which ONNX Runtime's quantizer leaves float; keep the float32 "
            "file, or export the model without control flow"
        )
    if not top:
        return "the model has no Conv, MatMul, Gemm or recurrent op to quantize"
    return "ONNX Runtime's quantizer left every op float; keep the float32 file"


def _tflite_nothing(content: bytes) -> str | None:
    """Why a ``.tflite`` holds no tensor of a quantized type (None when it holds some)."""
    from tfcompress.models.tflite_file import read_tflite

    parsed = read_tflite(content)
    for subgraph in parsed.subgraphs:
        if any(tensor.dtype in _TFLITE_LOW_TYPES for tensor in subgraph.tensors):
            return None
    return "every tensor is still float32 (no op had weights or ranges to quantize)"
