"""The single-output accuracy gate's verdict: scores, paired interval, per-class changes, advice.

:class:`GateResult` is the verdict of the single-output accuracy gate and :class:`ClassChange`
one class's score under both models (the many-output judge's verdicts list them too).
:class:`~tfcompress.testing.report.Verdict` and :class:`~tfcompress.testing.report.GateReport`,
the verdicts of the many-output judge, live in :mod:`tfcompress.testing.report` and are
re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tfcompress.report.table import format_table
from tfcompress.testing.report import WORST_CLASSES_SHOWN, GateReport, Verdict
from tfcompress.testing.settings import GateSettings
from tfcompress.testing.stats import PairedDifference

__all__ = ["ClassChange", "GateReport", "GateResult", "Verdict"]


@dataclass(frozen=True)
class ClassChange:
    """Score of both models on the samples of one class."""

    label: int
    samples: int
    reference_score: float
    candidate_score: float

    @property
    def change(self) -> float:
        """Candidate minus reference (negative = the class lost accuracy)."""
        return self.candidate_score - self.reference_score

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports."""
        return {
            "label": self.label,
            "samples": self.samples,
            "reference_accuracy": round(self.reference_score, 6),
            "candidate_accuracy": round(self.candidate_score, 6),
            "change": round(self.change, 6),
        }


@dataclass(frozen=True)
class GateResult:
    """The verdict of one accuracy gate, with everything needed to act on a failure.

    ``reference_accuracy`` and friends hold the gate's metric (top-1 accuracy by default).
    """

    reference: str
    candidate: str
    reference_backend: str
    backend: str
    settings: GateSettings
    difference: PairedDifference
    per_class: tuple[ClassChange, ...]
    passed: bool

    @property
    def reference_accuracy(self) -> float:
        """Reference score on all samples."""
        return self.difference.reference_score

    @property
    def candidate_accuracy(self) -> float:
        """Candidate score on all samples."""
        return self.difference.candidate_score

    @property
    def drop(self) -> float:
        """Point estimate of the drop (reference minus candidate)."""
        return self.difference.drop

    @property
    def ci_low(self) -> float:
        """Lower bound of the interval of the drop."""
        return self.difference.ci_low

    @property
    def ci_high(self) -> float:
        """Upper bound of the interval of the drop."""
        return self.difference.ci_high

    @property
    def samples(self) -> int:
        """Number of paired samples."""
        return self.difference.samples

    def to_dict(self) -> dict[str, Any]:
        """Plain data: the keys the CLI's ``--json`` and the pytest JSON report carry."""
        diff = self.difference
        return {
            "passed": self.passed,
            "reference_accuracy": round(diff.reference_score, 6),
            "candidate_accuracy": round(diff.candidate_score, 6),
            "drop": round(diff.drop, 6),
            "ci_low": round(diff.ci_low, 6),
            "ci_high": round(diff.ci_high, 6),
            "max_drop": self.settings.max_drop,
            "mode": self.settings.mode,
            "metric": self.settings.metric_name,
            "samples": diff.samples,
            "confidence": diff.confidence,
            "interval": diff.method,
            "p_value": diff.p_value,
            "reference_only": diff.reference_only,
            "candidate_only": diff.candidate_only,
            "reference": self.reference,
            "candidate": self.candidate,
            "reference_backend": self.reference_backend,
            "backend": self.backend,
            "per_class": [change.to_dict() for change in self.per_class],
        }

    def table(self) -> str:
        """Both models' scores and the drop with its interval."""
        metric = self.settings.metric_name
        header = [
            "",
            "model",
            "backend",
            metric,
            "drop",
            f"{self.difference.confidence:.0%} interval",
        ]
        interval = f"[{self.ci_low * 100:+.2f}, {self.ci_high * 100:+.2f}] pt"
        rows = [
            [
                "reference",
                self.reference,
                self.reference_backend,
                f"{self.reference_accuracy:.2%}",
                "",
                "",
            ],
            [
                "candidate",
                self.candidate,
                self.backend,
                f"{self.candidate_accuracy:.2%}",
                f"{self.drop * 100:+.2f} pt",
                interval,
            ],
        ]
        return format_table(header, rows)

    def explain(self) -> str:
        """The failure message: verdict, table, worst classes, sample count and what to do."""
        lines = [self.headline(), "", self.table(), ""]
        diff = self.difference
        lines.append(f"{diff.samples} samples, interval: {diff.method}")
        if diff.reference_only is not None:
            lines[-1] += (
                f"; only the reference is right on {diff.reference_only}, only the candidate "
                f"on {diff.candidate_only} (McNemar p = {diff.p_value:.3g})"
            )
        if self.per_class:
            worst = self.per_class[:WORST_CLASSES_SHOWN]
            rows = [
                [
                    str(c.label),
                    str(c.samples),
                    f"{c.reference_score:.2%}",
                    f"{c.candidate_score:.2%}",
                    f"{c.change * 100:+.2f} pt",
                ]
                for c in worst
            ]
            header = ["class", "samples", "reference", "candidate", "change"]
            lines += ["", f"per-class change, worst {len(worst)} of {len(self.per_class)}:"]
            lines.append(format_table(header, rows))
        lines += ["", self._advice()]
        return "\n".join(lines)

    def __str__(self) -> str:
        return f"{self.headline()}\n{self.table()}\n{self.samples} samples"

    def headline(self) -> str:
        """One line: PASSED/FAILED, mode, the deciding number against max_drop, both scores."""
        s = self.settings
        status = "PASSED" if self.passed else "FAILED"
        rule = {
            "strict": f"drop {self.drop * 100:+.2f} pt vs max_drop {s.max_drop * 100:.2f} pt",
            "tolerant": (
                f"interval lower bound {self.ci_low * 100:+.2f} pt vs max_drop "
                f"{s.max_drop * 100:.2f} pt"
            ),
            "proven": (
                f"interval upper bound {self.ci_high * 100:+.2f} pt vs max_drop "
                f"{s.max_drop * 100:.2f} pt"
            ),
        }[s.mode]
        return (
            f"accuracy gate {status} ({s.mode}): {rule}; {s.metric_name} "
            f"{self.reference_accuracy:.2%} -> {self.candidate_accuracy:.2%}"
        )

    def _advice(self) -> str:
        if self.passed:
            return "The candidate is within the allowed drop."
        if self.settings.mode == "proven" and self.drop <= self.settings.max_drop:
            return (
                "The measured drop is within max_drop but not proven: the interval is too wide. "
                "Gate on more test samples, or use mode='tolerant' for everyday CI."
            )
        return (
            "What to do: compare the classes above; re-quantize with more or more representative "
            "calibration data, keep the most sensitive layers in float, or fine-tune "
            "(quantization-aware training). Raise max_drop only if this loss is acceptable."
        )
