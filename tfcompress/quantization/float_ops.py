"""Which ops of an integer-quantized ``.tflite`` still compute in float, read from the file.

The converter keeps an op that has no integer kernel in float by wrapping it in
DEQUANTIZE ... QUANTIZE. This module reads the produced flatbuffer (through the one reader,
:func:`tfcompress.models.tflite_file.read_tflite`) and names those ops, so a result can say
exactly what stayed float, and an ``integer_only`` recipe can refuse the model.

An operator *stayed float* when all of these hold:

- it is not ``QUANTIZE`` or ``DEQUANTIZE`` (those are the boundary, not the work);
- one of its outputs is a floating-point tensor (float16, float32, float64, bfloat16), or one
  of its inputs that is not a constant is, and the op reads values rather than only the shape
  (``SHAPE`` and ``RANK`` of a float input are not float computation);

in any subgraph (control-flow bodies included), in graph order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

from tfcompress.errors import ConversionError
from tfcompress.models.tflite_file import Operator, Subgraph, TFLiteFile, read_tflite

FLOAT_DTYPES = frozenset({"float16", "float32", "float64", "bfloat16"})
_BOUNDARY = frozenset({"QUANTIZE", "DEQUANTIZE"})
_SHAPE_ONLY = frozenset({"SHAPE", "RANK"})  # read the shape of a float tensor, not its values


def find_float_ops(model: TFLiteFile | bytes) -> tuple[str, ...]:
    """Opcode names of the operators of ``model`` (parsed, or bytes) that compute in float.

    One entry per operator, in graph order (subgraph by subgraph): ``("NEG", "NEG")`` means
    two NEG ops.

    Raises:
        ModelLoadError: ``model`` is bytes that are not a readable ``.tflite``.
    """
    parsed = model if isinstance(model, TFLiteFile) else read_tflite(model)
    return tuple(op for op, _ in _float_nodes(parsed))


def _float_nodes(parsed: TFLiteFile) -> Iterator[tuple[str, str]]:
    """``(opcode, name of its first output tensor)`` of every op that computes in float."""
    for graph in parsed.subgraphs:
        for op in _float_ops_of(parsed, graph):
            first = op.outputs[0] if op.outputs else -1
            yield op.opcode, graph.tensors[first].name if 0 <= first < len(graph.tensors) else ""


def _float_ops_of(model: TFLiteFile, graph: Subgraph) -> Iterator[Operator]:
    tensors = graph.tensors

    def is_float(index: int) -> bool:  # -1 marks an omitted optional input
        return 0 <= index < len(tensors) and tensors[index].dtype in FLOAT_DTYPES

    for op in graph.operators:
        if op.opcode in _BOUNDARY:
            continue
        float_out = any(is_float(i) for i in op.outputs)
        float_in = op.opcode not in _SHAPE_ONLY and any(
            is_float(i) and not model.is_constant(tensors[i]) for i in op.inputs
        )
        if float_out or float_in:
            yield op


def describe_float_ops(ops: Sequence[str]) -> str:
    """``"NEG x2, PRELU"``: each name once, with its count when above one."""
    counts = Counter(ops)
    return ", ".join(name if n == 1 else f"{name} x{n}" for name, n in counts.items())


def check_integer_model(
    content: bytes,
    *,
    recipe: str,
    input_type: str,
    output_type: str,
    integer_only: bool,
    source: str,
    layers: tuple[set[str], str] | None = None,
    fix: str | None = None,
) -> tuple[str, ...]:
    """Check a converted integer model keeps its promises; return the ops that stayed float.

    The converter of TF 2.21 leaves some ops float even without ``TFLITE_BUILTINS`` in the
    supported ops (``int8`` with NEG, SIN, ... has no error), so ``integer_only`` is checked
    on the file; and it silently keeps a float input or output when the first or last op
    stayed float: that is checked here too. ``layers`` (the Keras model's layer names and
    its own, :func:`~tfcompress.models.loading.keras_layer_names`) lets the
    refusal name the layer each float op came from; ``fix`` is what it advises (default:
    replace the layers, or drop ``--integer-only``). The ops are :func:`find_float_ops`'s.

    Raises:
        ConversionError: Float ops with ``integer_only``, or an input/output whose dtype is
            not the one asked for.
    """
    parsed = read_tflite(content, source=source)
    nodes = tuple(_float_nodes(parsed))
    ops = tuple(op for op, _ in nodes)
    if ops and integer_only:
        remedy = fix or (
            "replace the layers that make them, or drop --integer-only (integer_only=True) "
            "to keep them float"
        )
        raise ConversionError(
            f"{recipe} left {len(ops)} op(s) of {source!r} without an {recipe} kernel in float "
            f"({describe_float_ops(ops)}){_made_by(nodes, layers)}, and the recipe is "
            f"integer-only; {remedy}."
        )
    wrong = io_mismatch(parsed.subgraphs[0], input_type, output_type) if parsed.subgraphs else None
    if wrong is not None:
        kind, wanted, got = wrong
        raise ConversionError(
            f"{recipe} kept the {kind} of {source!r} as {', '.join(got)}, not {wanted}: the op "
            f"next to it has no {recipe} kernel and stayed float ({describe_float_ops(ops)}); "
            f"use {kind}_type float32 (--{kind}-type float32)."
        )
    return ops


def io_mismatch(
    graph: Subgraph, input_type: str, output_type: str
) -> tuple[str, str, list[str]] | None:
    """``(kind, wanted, got)`` of the first of the I/O whose dtypes are not the ones asked for."""
    for kind, wanted, indices in (
        ("input", input_type, graph.inputs),
        ("output", output_type, graph.outputs),
    ):
        got = sorted({graph.tensors[i].dtype for i in indices if 0 <= i < len(graph.tensors)})
        if got and got != [wanted]:
            return kind, wanted, got
    return None


def _made_by(nodes: Sequence[tuple[str, str]], layers: tuple[set[str], str] | None) -> str:
    """``, made by layer 'layer_normalization'``: the Keras layers the float ops came from."""
    from tfcompress.quantization.selective_names import layer_of

    if not layers:
        return ""
    found = {layer_of(name, *layers) for _, name in nodes} - {None}
    if not found:
        return ""
    shown = ", ".join(repr(name) for name in sorted(found, key=str)[:6])
    more = f" and {len(found) - 6} more" if len(found) > 6 else ""
    return f", made by layer{'s' if len(found) > 1 else ''} {shown}{more}"
