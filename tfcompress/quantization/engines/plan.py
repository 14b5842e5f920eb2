"""Which rule decides each op, and the same recipe in LiteRT Quantizer's own recipe format.

Both engines read rules the same way (see :mod:`tfcompress.quantization.rules`): an op's
*scope* is its output tensor names joined by ``;`` with a trailing ``;`` (LiteRT
Quantizer's ``get_op_scope``), the recipe's own setting applies to every op, and a later
rule overrides an earlier one. :func:`plan_ops` says, before any quantization, what each op
of the float model should become; the engines then check the written file against it.

:func:`litert_recipe` writes the LiteRT Quantizer recipe (a list of JSON-ready dicts, the
format of its ``recipes/*.json``). LiteRT Quantizer keeps one entry list per regex, so each
rule's regex is made unique with a comment group (``(?#rule 2)``): the rules keep their
order whatever their patterns. LiteRT Quantizer matches with Python's backtracking ``re``,
which a crafted op name or pattern can keep busy for hours; given the model's ops, the
recipe names the ops each rule matched (by RE2, see :mod:`tfcompress.quantization.rules`)
as escaped, anchored literals instead of the user's pattern, which ``re`` matches in
linear time.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from tfcompress.errors import InvalidInputError, shown_name
from tfcompress.models.tflite_file import Subgraph, TFLiteFile
from tfcompress.quantization.recipes import Recipe
from tfcompress.quantization.rules import ALGORITHMS, SCOPE_LIMIT, Rule

_BOUNDARY = frozenset({"QUANTIZE", "DEQUANTIZE"})
_GRANULARITY = {
    "channel": "CHANNELWISE",
    "tensor": "TENSORWISE",
    "block32": "BLOCKWISE_32",
    "block64": "BLOCKWISE_64",
    "block128": "BLOCKWISE_128",
}
# LiteRT Quantizer's op names where they differ from the TFLite schema's.
_LITERT_OP_NAMES = {"TRANSPOSE_CONV": "CONV_2D_TRANSPOSE"}
# Blockwise weight scales exist for these ops only (their weights' input dimension).
_BLOCKWISE_OPS = ("FULLY_CONNECTED", "EMBEDDING_LOOKUP")
_FLOAT = Rule(mode="float")


@dataclass(frozen=True)
class OpPlan:
    """What one op of the float model should become.

    ``index`` is in the main subgraph; ``scope`` its ``outputs`` ``;``-joined with a
    trailing ``;``; ``rule`` 0 for the recipe's own setting, else the 1-based deciding rule;
    ``mode`` None when the recipe quantizes nothing; ``has_weights``: the op reads a constant
    float tensor of rank 2 or more (what weight-only, dynamic and float16 settings quantize).
    """

    index: int
    op_type: str
    scope: str
    outputs: tuple[str, ...]
    rule: int
    mode: str | None
    has_weights: bool = False


def op_scope(names: list[str] | tuple[str, ...]) -> str:
    """An op's scope from its output tensor names (LiteRT Quantizer's ``get_op_scope``)."""
    names = [n for n in names if n]
    return ";".join(names) + ";" if names else ""


def plan_ops(parsed: TFLiteFile, recipe: Recipe, *, source: object = "model") -> tuple[OpPlan, ...]:
    """What every op of the float model's main subgraph should become under ``recipe``.

    Returns:
        One plan per op (QUANTIZE/DEQUANTIZE left out), in graph order.

    Raises:
        InvalidInputError: A rule matches no op of the model (a typo would otherwise be
            dropped silently); the message lists a few op names.
    """
    graph = parsed.subgraphs[0]
    spec = recipe.spec
    base = "float16" if spec.float16_weights else spec.base_rule and spec.base_rule.mode
    plans = []
    used = [False] * len(recipe.rules)
    for op in graph.operators:
        if op.opcode in _BOUNDARY:
            continue
        outputs = _names(graph, op.outputs)
        scope = op_scope(outputs) or op_scope(_names(graph, op.inputs))  # as LiteRT Quantizer
        decided, mode = 0, base
        for k, rule in enumerate(recipe.rules, start=1):
            if rule.matches(op.opcode, scope):
                decided, mode = k, rule.mode
                used[k - 1] = True
        weights = any(
            0 <= i < len(graph.tensors)
            and parsed.is_constant(graph.tensors[i])
            and graph.tensors[i].dtype == "float32"
            and len(graph.tensors[i].signature) >= 2
            for i in op.inputs
        )
        plans.append(OpPlan(op.index, op.opcode, scope, outputs, decided, mode, weights))
    unused = [k for k, hit in enumerate(used, start=1) if not hit]
    if unused:
        rule = recipe.rules[unused[0] - 1]
        examples = "; ".join(
            f"{p.op_type} '{shown_name(p.scope.rstrip(';'), limit=80)}'" for p in plans[:3]
        )
        raise InvalidInputError(
            f"rule {unused[0]} ({rule.describe()}) matches no op of {source}; its ops are "
            f"named like: {examples} (see `tfcompress inspect`)."
        )
    return tuple(plans)


def litert_ops(parsed: TFLiteFile) -> tuple[tuple[str, str], ...]:
    """Every op LiteRT Quantizer asks its recipe about, as ``(op type, scope)``.

    Every subgraph's operators, then its ``INPUT`` and ``OUTPUT`` pseudo-ops (scoped by
    the subgraph's input and output tensor names), as LiteRT Quantizer 0.11 walks them.
    """
    ops = []
    for graph in parsed.subgraphs:
        for op in graph.operators:
            outputs = op_scope(_names(graph, op.outputs))
            ops.append((op.opcode, outputs or op_scope(_names(graph, op.inputs))))
        ops.append(("INPUT", op_scope(_names(graph, graph.inputs))))
        ops.append(("OUTPUT", op_scope(_names(graph, graph.outputs))))
    return tuple(ops)


def _names(graph: Subgraph, indices: Sequence[int]) -> tuple[str, ...]:
    return tuple(graph.tensors[i].name for i in indices if 0 <= i < len(graph.tensors))


def _literal_regex(rule: Rule, ops: Sequence[tuple[str, str]], number: int) -> str:
    r"""A regex Python's ``re`` matches in linear time, for the scopes ``rule`` matches.

    A scope longer than :data:`SCOPE_LIMIT` is matched by its first characters (all the
    rule saw); ``\A`` makes ``re`` try the first position only.
    """
    scopes = {
        re.escape(scope) + r"\Z" if len(scope) <= SCOPE_LIMIT else re.escape(scope[:SCOPE_LIMIT])
        for op_type, scope in ops
        if rule.matches(op_type, scope)
    }
    if not scopes:
        return f"(?!)(?#rule {number})"
    return rf"\A(?:{'|'.join(sorted(scopes))})(?#rule {number})"


def litert_recipe(
    recipe: Recipe, ops: Sequence[tuple[str, str]] | None = None
) -> list[dict[str, Any]]:
    """``recipe`` (and its rules) as a LiteRT Quantizer recipe.

    Args:
        recipe: A recipe LiteRT Quantizer makes.
        ops: The model's ops (:func:`litert_ops`). Given, each rule's regex is the escaped
            scopes of the ops it matches (safe for LiteRT Quantizer's backtracking
            ``re``); None, the rule's own pattern (a recipe to read, or for a trusted model).

    Returns:
        The entries, in order; empty for ``float32`` without rules.

    Raises:
        InvalidInputError: The recipe is not made by LiteRT Quantizer.
    """
    spec = recipe.spec
    if "litert-quantizer" not in spec.engines:
        raise InvalidInputError(f"recipe {recipe.name!r} is not made by LiteRT Quantizer.")
    entries: list[dict[str, Any]] = []
    if spec.float16_weights:
        entries.append(_float16_entry())
    elif spec.base_rule is not None:
        granularity = "channel" if recipe.per_channel else "tensor"
        entries.append(_entry(".*", "*", replace(spec.base_rule, granularity=granularity)))
        if recipe.block_size is not None:  # blockwise where the kernels have it
            blockwise = replace(spec.base_rule, granularity=f"block{recipe.block_size}")
            entries += [_entry(f"(?:.*)(?#blockwise {op})", op, blockwise) for op in _BLOCKWISE_OPS]
    for k, rule in enumerate(recipe.rules, start=1):
        operation = _LITERT_OP_NAMES.get(rule.op_type, rule.op_type)
        own = f"(?:{rule.pattern})(?#rule {k})"
        regex = own if ops is None else _literal_regex(rule, ops, k)
        entries.append(_entry(regex, operation, rule))
    if entries:  # LiteRT Quantizer quantizes the model's I/O too unless told not to
        for operation, option in (("INPUT", recipe.input_type), ("OUTPUT", recipe.output_type)):
            if option == "float32":
                entries.append(_entry(f"(?:.*)(?#float {operation})", operation, _FLOAT))
    return entries


def _entry(regex: str, operation: str, rule: Rule) -> dict[str, Any]:
    if rule.mode == "float":
        return {"regex": regex, "operation": operation, "algorithm_key": "no_quantize"}
    config: dict[str, Any] = {
        "weight_tensor_config": {
            "num_bits": rule.weight_bits,
            "symmetric": True,  # LiteRT's integer kernels take symmetric weights only
            "granularity": _GRANULARITY[rule.granularity],
            "dtype": "INT",
        },
        "compute_precision": "FLOAT" if rule.mode == "weights" else "INTEGER",
        "explicit_dequantize": rule.mode == "weights",
    }
    if rule.mode in ("int8", "int16"):
        bits = 8 if rule.mode == "int8" else 16
        config["activation_tensor_config"] = {
            "num_bits": bits,
            "symmetric": bits == 16,  # LiteRT's int16 kernels take symmetric activations
            "granularity": "TENSORWISE",
            "dtype": "INT",
        }
    return {
        "regex": regex,
        "operation": operation,
        "algorithm_key": ALGORITHMS[rule.algorithm],
        "op_config": config,
    }


def _float16_entry() -> dict[str, Any]:
    return {
        "regex": ".*",
        "operation": "*",
        "algorithm_key": "float_casting",
        "op_config": {
            "weight_tensor_config": {"num_bits": 16, "dtype": "FLOAT"},
            "compute_precision": "FLOAT",
            "explicit_dequantize": True,
        },
    }
