"""What the Edge TPU linter reports about one op: a rule broken, why, what to try."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass
from typing import Any

# Rule names (stable: JSON consumers and tests match on them).
NOT_FULLY_QUANTIZED = "not-fully-quantized"
DYNAMIC_SHAPE = "dynamic-shape"
NON_CONSTANT_PARAMETER = "non-constant-parameter"
TENSOR_RANK = "tensor-rank"
UNSUPPORTED_OP = "unsupported-op"
OP_SUPPORT_UNKNOWN = "op-support-unknown"
OP_LIMITATION = "op-limitation"
OP_VERSION = "op-version"
MULTIPLE_SUBGRAPHS = "multiple-subgraphs"
ALREADY_COMPILED = "already-compiled"


class Effect(enum.StrEnum):
    """What a finding does to the compiled model.

    ``compile-fails``: edgetpu_compiler refuses the whole file, nothing runs on the TPU.
    ``cpu``: this op cannot be mapped; the first such op ends the TPU segment.
    ``info``: worth knowing, changes nothing in the prediction.
    """

    COMPILE_FAILS = "compile-fails"
    CPU = "cpu"
    INFO = "info"


@dataclass(frozen=True)
class Issue:
    """A rule an op breaks, before it is tied to the op (what a check returns)."""

    rule: str
    message: str
    fix: str
    effect: Effect = Effect.CPU
    source: str = ""


@dataclass(frozen=True)
class Finding:
    """One rule broken by one op (``op``/``index`` None for a finding about the whole file).

    Attributes:
        op: The op's type (``CONV_2D``), None for the whole file.
        index: The op's position in execution order, None for the whole file.
        rule: The rule's stable name (``not-fully-quantized``, ``dynamic-shape``...).
        effect: ``compile-fails``, ``cpu`` or ``info`` (see :class:`Effect`).
        source: Where the rule comes from (URL and what it says), "" for Coral's requirements.
    """

    op: str | None
    index: int | None
    rule: str
    message: str
    fix: str
    effect: Effect = Effect.CPU
    source: str = ""

    @classmethod
    def of(cls, issue: Issue, op: str | None, index: int | None) -> Finding:
        """Tie ``issue`` to an op."""
        return cls(op, index, issue.rule, issue.message, issue.fix, issue.effect, issue.source)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        data = asdict(self)
        data["effect"] = str(self.effect)
        return data
