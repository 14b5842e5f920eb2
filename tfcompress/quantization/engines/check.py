"""Check a quantized ``.tflite`` op by op against the plan: was every rule honoured?

LiteRT Quantizer skips, without a word, a rule whose setting an op type does not support
(and keeps ops it has no integer kernel for in float). So the written file is read back:
each planned op is found by its output tensor names and what it became is read from its
tensors:

- integer output activations: ``int8`` or ``int16``;
- float output, a weight fed by DEQUANTIZE of an integer constant: ``weights``;
- float output, an integer constant weight read directly: ``dynamic``;
- float output, a weight fed by DEQUANTIZE of a float16 constant: ``float16``;
- otherwise ``float``; an op without float outputs (shape arithmetic in int32) is
  ``n/a``: there is nothing in it to quantize.

An op planned integer that stayed float is a *float op*: kept and listed (as the converter
keeps ops without an integer kernel in float), refused when the recipe is ``integer_only``.
Every other difference (a rule not applied to some of its ops) becomes a note.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from tfcompress.errors import ConversionError
from tfcompress.models.tflite_file import Subgraph, TFLiteFile, read_tflite
from tfcompress.quantization.engines.plan import OpPlan
from tfcompress.quantization.float_ops import (
    FLOAT_DTYPES,
    describe_float_ops,
    find_float_ops,
    io_mismatch,
)
from tfcompress.quantization.recipes import Recipe

_INTEGER = frozenset({"int8", "uint8", "int16", "int4"})
_STATIC = frozenset({"int8", "int16"})
_WEIGHT_ONLY = frozenset({"weights", "dynamic", "float16"})


@dataclass(frozen=True)
class Outcome:
    """What the file shows: float ops (integer-activation recipes) and notes."""

    float_ops: tuple[str, ...] | None
    notes: tuple[str, ...]


def op_modes(parsed: TFLiteFile) -> dict[str, str]:
    """What each op of a quantized model became, keyed by each of its output tensor names."""
    graph = parsed.subgraphs[0]
    producer = {i: op for op in graph.operators for i in op.outputs}
    modes = {}
    for op in graph.operators:
        if op.opcode in ("QUANTIZE", "DEQUANTIZE"):
            continue
        mode = _mode(parsed, graph, op.inputs, op.outputs, producer)
        for index in op.outputs:
            if 0 <= index < len(graph.tensors):
                modes[graph.tensors[index].name] = mode
    return modes


def _mode(
    parsed: TFLiteFile,
    graph: Subgraph,
    inputs: tuple[int, ...],
    outputs: tuple[int, ...],
    producer: dict,
) -> str:
    tensors = graph.tensors
    dtypes = {tensors[i].dtype for i in outputs if 0 <= i < len(tensors)}
    if "int16" in dtypes:
        return "int16"
    if dtypes & {"int8", "uint8"}:
        return "int8"
    if not dtypes & FLOAT_DTYPES:  # shape arithmetic (int32, bool): nothing to quantize
        return "n/a"
    for index in inputs:
        if not 0 <= index < len(tensors):
            continue
        tensor = tensors[index]
        if parsed.is_constant(tensor) and tensor.dtype in _INTEGER:
            return "dynamic"
        fed = producer.get(index)
        if fed is not None and fed.opcode == "DEQUANTIZE":
            weight = tensors[fed.inputs[0]]
            if parsed.is_constant(weight) and weight.dtype in _INTEGER:
                return "weights"
            if parsed.is_constant(weight) and weight.dtype == "float16":
                return "float16"
    return "float"


def check_against_plan(
    plan: tuple[OpPlan, ...], content: bytes, recipe: Recipe, *, source: str = "model"
) -> Outcome:
    """Compare the written file with the plan; refuse float ops the recipe did not allow.

    Returns:
        The float ops (for integer-activation recipes, else None) and notes.

    Raises:
        ConversionError: Ops planned integer stayed float and the recipe is ``integer_only``.
    """
    parsed = read_tflite(content, source=source)
    modes = op_modes(parsed)
    stayed: list[OpPlan] = []
    not_applied: dict[int, list[str]] = defaultdict(list)
    for op in plan:
        got = next((modes[name] for name in op.outputs if name in modes), None)
        if op.mode is None or got in (None, "n/a") or got == op.mode:
            continue
        if op.mode in _WEIGHT_ONLY and not op.has_weights:
            continue  # nothing to quantize in an op without weights
        if op.mode in _STATIC and got not in _STATIC:
            stayed.append(op)
        if op.rule:
            not_applied[op.rule].append(f"{op.op_type} became {got}")
    if stayed and recipe.integer_only:
        names = describe_float_ops([op.op_type for op in stayed])
        raise ConversionError(
            f"LiteRT Quantizer has no {recipe.name} setting for {len(stayed)} op(s) of "
            f"{source!r} and left them float ({names}), but the recipe is integer-only; drop "
            "--integer-only (integer_only=True) to keep them float, or use --engine converter."
        )
    notes = []
    for number, what in sorted(not_applied.items()):
        rule = recipe.rules[number - 1]
        notes.append(
            f"rule {number} ({rule.describe()}) was not applied to {len(what)} of its ops "
            f"(LiteRT Quantizer has no such setting for them): {describe_float_ops(what)}"
        )
    integer = any(op.mode in _STATIC for op in plan)
    if integer:
        _check_io(parsed, recipe, source)
    float_ops = find_float_ops(parsed) if integer else None
    return Outcome(float_ops, tuple(notes))


def _check_io(parsed: TFLiteFile, recipe: Recipe, source: str) -> None:
    """The inputs and outputs have the dtypes the recipe asked for."""
    wrong = io_mismatch(parsed.subgraphs[0], recipe.input_type, recipe.output_type)
    if wrong is not None:
        kind, wanted, got = wrong
        raise ConversionError(
            f"LiteRT Quantizer made the {kind} of {source!r} {', '.join(got)}, not {wanted} "
            f"(the op next to it has no such setting); use {kind}_type float32 "
            f"(--{kind}-type float32)."
        )
