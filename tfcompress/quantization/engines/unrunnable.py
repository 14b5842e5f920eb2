"""LiteRT Quantizer's files LiteRT cannot run: every op to keep float, found at once.

LiteRT Quantizer writes some int8 files LiteRT refuses to prepare. The class seen on
MediaPipe-style face detectors, and reproduced by a CONV_2D whose weights are computed in the
graph rather than stored (a scale applied to them, a TRANSPOSE in front of them): it takes
such weights for an activation and quantizes them asymmetrically, and LiteRT's int8 CONV_2D
requires a weight zero point of 0 (``conv.cc: zero_point != 0 ... Node number 5 (CONV_2D)
failed to prepare``). LiteRT names only the first op it cannot prepare, so advice built from
one error fails on the next such op when followed.

:func:`unrunnable_message` therefore iterates: each op LiteRT names is kept float by a rule,
the float model is quantized again with those rules and run again, until the file runs (or
no new op is named, or :data:`MAX_ROUNDS` passed). The message names every op found and the
``--rules`` flags that, followed, made a file that runs: checked, not guessed.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tfcompress.models.probe import failing_op, runtime_said
from tfcompress.models.tflite_file import read_tflite
from tfcompress.quantization.rules import PATTERN_LIMIT, Rule

#: Quantizations made again, at most, to find every op LiteRT cannot run.
MAX_ROUNDS = 8


@dataclass(frozen=True)
class FailingOp:
    """An op of a quantized file that LiteRT cannot prepare or run.

    ``name`` is its first output tensor's name (the start of its scope), "" if it has none.
    """

    op_type: str
    name: str

    def shown(self) -> str:
        """``CONV_2D 'model/conv/Relu'``."""
        return f"{self.op_type} {self.name!r}" if self.name else self.op_type


def failing_ops(content: bytes, said: str, source: str) -> list[FailingOp]:
    """Every op LiteRT's words about ``content`` name, in the order it named them."""
    reason = " ".join((runtime_said(content, "tflite") or said).split())
    graph = read_tflite(content, source=source).subgraphs[0]
    found: list[FailingOp] = []
    rest = reason
    while (named := failing_op(rest)) is not None:
        node, op_type = named
        rest = rest[rest.index(f"Node number {node} (") + 12 :]
        name = ""
        if 0 <= node < len(graph.operators):
            outputs = [graph.tensors[i].name for i in graph.operators[node].outputs]
            name = next((n.split(";")[0] for n in outputs if n), "")
        op = FailingOp(op_type, name)
        if op not in found:
            found.append(op)
    return found


def rule_pattern(name: str) -> str:
    r"""A rule pattern that matches the op whose first output tensor is ``name``.

    An op's scope is its output names joined by ``;`` (:func:`~.plan.op_scope`), so the
    escaped name anchored at the start and followed by ``;`` matches that op and no other.
    A name too long for a pattern is matched by its start.
    """
    pattern = "^" + re.escape(name) + ";"
    while len(pattern) > PATTERN_LIMIT // 4:  # room for several ops in one pattern
        name = name[: len(name) // 2]
        pattern = "^" + re.escape(name)
    return pattern


def float_rules(ops: Sequence[FailingOp]) -> tuple[Rule, ...]:
    """One ``float`` rule per op type, its pattern matching exactly the ops named."""
    rules = []
    for op_type in dict.fromkeys(op.op_type for op in ops):
        names = [op.name for op in ops if op.op_type == op_type]
        pattern = ".*" if "" in names else "|".join(rule_pattern(n) for n in names)
        rules.append(Rule(pattern=pattern, op_type=op_type, mode="float"))
    return tuple(rules)


def rule_flags(rules: Sequence[Rule]) -> str:
    """The ``--rules`` flags of ``rules``, quoted for a POSIX shell, as ``quantize`` reads them."""
    return " ".join(
        f"--rules {shlex.quote(f'{rule.op_type}:{rule.pattern}={rule.mode}')}" for rule in rules
    )


def unrunnable_message(
    content: bytes,
    said: str,
    source: str,
    *,
    requantize: Callable[[tuple[Rule, ...]], bytes] | None,
    fails: Callable[[bytes], str | None],
) -> str:
    """Why LiteRT cannot run what LiteRT Quantizer wrote, and the rules that make it run.

    Args:
        content: The quantized file LiteRT refused.
        said: What the probe said about it.
        source: The model's name, for messages.
        requantize: Quantize the float model again with these extra ``float`` rules (None:
            no second quantization can be made; the ops of ``content`` are named).
        fails: None when LiteRT runs a file; else what it said.

    Returns:
        One line: every op found, LiteRT's words on the first, and the ``--rules`` flags,
        with whether a file made with them was run.
    """
    first_said = " ".join((runtime_said(content, "tflite") or said).split())[:300]
    found = failing_ops(content, said, source)
    if not found:
        return (
            f"LiteRT Quantizer produced a model LiteRT cannot run ({said}); nothing was "
            "returned: keep the failing ops float with quantize's --rules "
            "'OP_TYPE:NAME=float' (rules= in the API; see `tfcompress inspect` for the "
            "names), or try another recipe."
        )
    runs, rounds = False, 0
    while requantize is not None and rounds < MAX_ROUNDS:
        rounds += 1
        remade = requantize(float_rules(found))
        now_said = fails(remade)
        if now_said is None:
            runs = True
            break
        new = [op for op in failing_ops(remade, now_said, source) if op not in found]
        if not new:  # the same op again, or none named: the rules do not reach it
            break
        found += new
    ops = ", ".join(op.shown() for op in found)
    flags = rule_flags(float_rules(found))
    if runs:
        advice = (
            f"with {'that op' if len(found) == 1 else f'these {len(found)} ops'} float the "
            f"file runs (quantized again and run to check): add {flags} to quantize"
        )
    elif requantize is None:
        advice = f"keep it float: add {flags} to quantize"
    else:
        advice = (
            f"quantized again with {flags} it still does not run ({rounds} round(s) "
            "checked): keep more ops float, or try another recipe"
        )
    return (
        f"LiteRT Quantizer produced an int8 model LiteRT cannot run ({ops}: {first_said}); "
        f"nothing was returned: {advice}."
    )
