"""The Edge TPU linter's result: the predicted split, the MACs it keeps, the findings."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

from tfcompress.report.table import format_table
from tfcompress.targets.edgetpu.findings import Effect, Finding
from tfcompress.targets.edgetpu.ops import CORAL_TABLE
from tfcompress.targets.edgetpu.versions import COMPILER_VERSION

_SHOWN_INDICES = 4


@dataclass(frozen=True)
class OpPrediction:
    """Where one op is predicted to run.

    Attributes:
        type: The op (``CONV_2D``, ``CUSTOM:<code>``).
        on_tpu: Predicted inside the Edge TPU segment.
        macs: Multiply-accumulates of one sample (0 for ops the counter does not weigh).
    """

    index: int
    type: str
    version: int
    on_tpu: bool
    macs: int


@dataclass(frozen=True)
class EdgeTPUReport:
    """What edgetpu_compiler 16 is predicted to do with a ``.tflite``, and why.

    Attributes:
        compiles: False when the compiler is predicted to refuse the whole file (an op
            version it does not know, dynamic shapes): then nothing runs on the TPU until that
            is fixed, and ``ops_mapped`` is what it would map afterwards.
        ops: Every op of the main subgraph, in execution order, with its prediction.
        findings: Every rule broken, file-level ones first, then by op.
        split_index: The op that ends the TPU segment (it and every later op run on the
            CPU); None when the segment runs to the last op.
    """

    source: str
    compiles: bool
    ops: tuple[OpPrediction, ...]
    findings: tuple[Finding, ...]
    split_index: int | None

    @property
    def ops_total(self) -> int:
        """Ops in the main subgraph."""
        return len(self.ops)

    @property
    def ops_mapped(self) -> int:
        """Ops predicted inside the Edge TPU segment (once the file compiles)."""
        return sum(op.on_tpu for op in self.ops)

    @property
    def compatible(self) -> bool:
        """True when the file compiles and every op is predicted on the TPU."""
        return self.compiles and self.ops_total > 0 and self.ops_mapped == self.ops_total

    @property
    def segments_predicted(self) -> int:
        """Edge TPU segments (custom ops) the compiler writes by default: 1, or 0."""
        return int(self.compiles and self.ops_mapped > 0)

    @property
    def first_unmapped_op(self) -> OpPrediction | None:
        """The first op, in execution order, predicted on the CPU (None: none is)."""
        return next((op for op in self.ops if not op.on_tpu), None)

    @property
    def split_op(self) -> OpPrediction | None:
        """The op that ends the TPU segment: it and every op after it run on the CPU."""
        return None if self.split_index is None else self.ops[self.split_index]

    @property
    def macs_total(self) -> int:
        """MACs of one sample through the whole model (conv, depthwise, dense, matmul)."""
        return sum(op.macs for op in self.ops)

    @property
    def macs_mapped_fraction(self) -> float | None:
        """Share of the MACs predicted on the TPU; None when the model has none to count."""
        total = self.macs_total
        return sum(op.macs for op in self.ops if op.on_tpu) / total if total else None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (``tfcompress edgetpu --json``)."""
        first, split = self.first_unmapped_op, self.split_op
        return {
            "source": self.source,
            "compiler": COMPILER_VERSION,
            "rules": CORAL_TABLE,
            "compatible": self.compatible,
            "compiles": self.compiles,
            "ops_total": self.ops_total,
            "ops_mapped": self.ops_mapped,
            "ops_mapped_fraction": self.ops_mapped / self.ops_total if self.ops_total else None,
            "macs_total": self.macs_total,
            "macs_mapped_fraction": self.macs_mapped_fraction,
            "first_unmapped_op": {"index": first.index, "type": first.type} if first else None,
            "split_op": {"index": split.index, "type": split.type} if split else None,
            "segments_predicted": self.segments_predicted,
            "findings": [finding.to_dict() for finding in self.findings],
            "ops": [asdict(op) for op in self.ops],
        }

    def __str__(self) -> str:
        return "\n".join([*self._summary(), "", *self._findings_table()])

    def _summary(self) -> list[str]:
        verdict = "compatible" if self.compatible else "not compatible"
        lines = [f"Edge TPU check of {self.source} (rules of edgetpu_compiler {COMPILER_VERSION})"]
        if self.compiles:
            lines.append(f"Verdict: {verdict}")
        else:
            lines += [
                f"Verdict: {verdict}: edgetpu_compiler is predicted to refuse the whole file "
                "(compile-fails findings); nothing runs on the TPU until that is fixed. Then:",
            ]
        share = f"{self.ops_mapped / self.ops_total:.1%}" if self.ops_total else "-"
        macs = self.macs_mapped_fraction
        lines.append(
            f"Predicted on the Edge TPU: {self.ops_mapped}/{self.ops_total} ops ({share}), "
            f"{'-' if macs is None else f'{macs:.1%}'} of {self.macs_total:,} MACs, "
            f"{int(self.ops_mapped > 0)} Edge TPU segment(s)"
        )
        first_tpu = next((op.index for op in self.ops if op.on_tpu), None)
        before = [op for op in self.ops if first_tpu is not None and op.index < first_tpu]
        if before:
            names = ", ".join(f"#{op.index} {op.type}" for op in before)
            lines.append(f"On the CPU before the TPU segment: {names}")
        split = self.split_op
        if split is not None:
            after = self.ops_total - split.index - 1
            tail = f"it and the {after} op(s) after it run" if after else "it runs"
            lines.append(f"Graph splits at op #{split.index} {split.type}: {tail} on the CPU")
        return lines

    def _findings_table(self) -> list[str]:
        if not self.findings:
            return ["No findings."]
        groups: dict[tuple[str, str, str], list[Finding]] = defaultdict(list)
        for finding in self.findings:
            groups[(finding.op or "(model)", finding.rule, str(finding.effect))].append(finding)
        rows, notes = [], []
        for (op, rule, effect), members in groups.items():
            indices = ["-" if f.index is None else str(f.index) for f in members]
            shown = ",".join(indices[:_SHOWN_INDICES])
            more = f" +{len(indices) - _SHOWN_INDICES}" if len(indices) > _SHOWN_INDICES else ""
            rows.append([f"#{shown}{more}", op, rule, effect])
            similar = f" (and {len(members) - 1} similar)" if len(members) > 1 else ""
            notes += [f"#{indices[0]} {op} {rule}: {members[0].message}{similar}"]
            notes += [f"    fix: {members[0].fix}"] if members[0].fix else []
        blocking = sum(f.effect is not Effect.INFO for f in self.findings)
        return [
            f"Findings ({len(self.findings)}, {blocking} blocking):",
            format_table(["op #", "type", "rule", "effect"], rows),
            "",
            *notes,
        ]
