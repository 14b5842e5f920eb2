"""The verdicts of the many-output gate: one :class:`Verdict` per (output, metric) check.

:func:`~tfcompress.testing.judge.judge_outputs_by_name` judges each check into a
:class:`Verdict`; :class:`GateReport` gathers them and renders the headline, table, JSON and
advice. Every gate returns a :class:`GateReport` (``check_accuracy_drop`` too: its one verdict
reads as ``report.drop``...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tfcompress.bench.metric_def import MetricDef
from tfcompress.report.table import format_table
from tfcompress.testing.settings import GateSettings
from tfcompress.testing.stats import MetricEstimate, PairedDifference

if TYPE_CHECKING:
    from tfcompress.testing.config import GateConfig

__all__ = ["ClassChange", "GateReport", "Verdict"]

WORST_CLASSES_SHOWN = 5  # per-class rows a failure message lists
_TOLERANCE = 1e-12  # drops are ratios of counts; keep 0.01 == 1/100 from failing on rounding


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
class Verdict:
    """One check of a gate: one metric on one output, judged against its threshold.

    Attributes:
        output: The output's name.
        metric: The metric's canonical name (``"accuracy"``, ``"snr"``...).
        kind: ``"task"`` (judged on the drop) or ``"fidelity"`` (judged on the value).
        reference_score: Reference's metric on all samples; None for fidelity metrics.
        candidate_score: Candidate's metric (for fidelity metrics, equal to ``value``).
        value: The judged number: for task metrics the drop, the worsening from reference to
            candidate in the metric's unit (positive = worse; ``candidate - reference`` for
            lower-is-better metrics such as mse); for fidelity metrics the value itself.
        ci_low: Lower bound of the interval of ``value``; None when there is none (max_abs).
        ci_high: Upper bound of the interval; None when there is none.
        threshold: The threshold applied.
        threshold_name: ``"max_drop"``, ``"min_snr"``, ``"min_cosine"``, ``"max_abs"`` or
            ``"min_agreement"``.
        passed: Whether the check passed in ``mode``.
        chosen_because: Why the metric was chosen, when the user named none; else None.
        method: Interval method: ``"mcnemar"``, ``"bootstrap"``, ``"clopper-pearson"`` or
            ``"none"``.
        samples: Samples judged.
        confidence: Two-sided level of the interval.
        mode: ``"strict"`` (the point value decides), ``"tolerant"`` (the favourable end of
            the interval) or ``"proven"`` (the unfavourable end); without an interval the
            point value decides in every mode.
        definition: The metric (units, direction, formatting).
        per_class: For class-like task metrics, both models' score per label, worst first.
        difference: The paired drop (task metrics).
        estimate: The value with its interval (fidelity metrics).
        notes: Remarks shown with the verdict (e.g. non-finite candidate outputs).
    """

    output: str
    metric: str
    kind: str
    reference_score: float | None
    candidate_score: float
    value: float
    ci_low: float | None
    ci_high: float | None
    threshold: float
    threshold_name: str
    passed: bool
    chosen_because: str | None
    method: str
    samples: int
    confidence: float
    mode: str
    definition: MetricDef = field(repr=False, compare=False)
    per_class: tuple[ClassChange, ...] = ()
    difference: PairedDifference | None = None
    estimate: MetricEstimate | None = None
    notes: tuple[str, ...] = ()

    @property
    def lower_is_better(self) -> bool:
        """True when a smaller ``value`` is better: every drop, and max_abs."""
        return self.kind == "task" or not self.definition.higher_is_better

    @property
    def decided_by(self) -> str:
        """Which number met the threshold: ``"value"``, ``"ci_low"`` or ``"ci_high"``."""
        if self.mode == "strict" or self.ci_low is None or self.ci_high is None:
            return "value"
        favourable = "ci_low" if self.lower_is_better else "ci_high"
        unfavourable = "ci_high" if self.lower_is_better else "ci_low"
        return favourable if self.mode == "tolerant" else unfavourable

    @property
    def deciding_value(self) -> float:
        """The number compared with the threshold (see :attr:`decided_by`)."""
        number = getattr(self, self.decided_by)
        return math.nan if number is None else float(number)

    def rule(self) -> str:
        """The decision in words: ``interval lower bound +35.46 pt > max_drop 5.00 pt``."""
        label = {
            "value": "drop" if self.kind == "task" else self.metric,
            "ci_low": "interval lower bound",
            "ci_high": "interval upper bound",
        }[self.decided_by]
        if self.lower_is_better:
            op = "<=" if self.passed else ">"
        else:
            op = ">=" if self.passed else "<"
        return (
            f"{label} {self._show(self.deciding_value)} {op} {self.threshold_name} "
            f"{self.definition.format_threshold(self.threshold)}"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON; non-finite numbers become null, named in ``non_finite``.

        An snr of identical outputs is +inf: JSON gets ``"value": null`` and
        ``"non_finite": {"value": "+inf", ...}``; a NaN from broken outputs gets ``"nan"``.
        """
        non_finite: dict[str, str] = {}

        def number(key: str, value: float | None) -> float | None:
            if value is None:
                return None
            if not math.isfinite(value):
                non_finite[key] = "nan" if math.isnan(value) else f"{value:+}"
                return None
            return float(f"{value:.6g}")

        diff = self.difference
        data: dict[str, Any] = {
            "output": self.output,
            "metric": self.metric,
            "kind": self.kind,
            "unit": self.definition.unit,
            "direction": self.definition.direction,
            "reference_score": number("reference_score", self.reference_score),
            "candidate_score": number("candidate_score", self.candidate_score),
            "value": number("value", self.value),
            "drop": number("drop", self.value) if self.kind == "task" else None,
            "ci_low": number("ci_low", self.ci_low),
            "ci_high": number("ci_high", self.ci_high),
            "confidence": self.confidence,
            "interval": self.method,
            "threshold_name": self.threshold_name,
            "threshold": self.threshold,
            "mode": self.mode,
            "decided_by": self.decided_by,
            "passed": self.passed,
            "chosen_because": self.chosen_because,
            "samples": self.samples,
            **{k: getattr(diff, k, None) for k in ("p_value", "reference_only", "candidate_only")},
            "per_class": [change.to_dict() for change in self.per_class[:10]],
            "notes": list(self.notes),
        }
        data["non_finite"] = non_finite
        return data

    def row(self) -> list[str]:
        """Cells of :meth:`GateReport.table`."""
        task = self.kind == "task"
        fmt = self.definition.format_value
        if self.ci_low is None or self.ci_high is None:
            interval = "none"
        else:
            low, high, unit = self._show(self.ci_low), self._show(self.ci_high), ""
            for suffix in (" pt", " dB", "%"):
                if low.endswith(suffix) and high.endswith(suffix):
                    low, high, unit = low[: -len(suffix)], high[: -len(suffix)], suffix
                    break
            interval = f"[{low}, {high}]{unit}"
        return [
            self.output,
            self.metric,
            fmt(self.reference_score) if task else "",
            fmt(self.candidate_score) if task else "",
            self._show(self.value),
            interval,
            f"{self.threshold_name} {self.definition.format_threshold(self.threshold)}",
            "PASSED" if self.passed else "FAILED",
        ]

    def advice(self) -> str:
        """What to do about this check (a failing one), in one or two sentences."""
        if self.passed:
            return f"output {self.output!r}, {self.metric}: within {self.threshold_name}."
        head = f"output {self.output!r}, {self.metric}: {self.rule()}."
        point_ok = self.meets_threshold(self.value)
        if self.mode == "proven" and point_ok:
            return (
                f"{head} The measured value meets {self.threshold_name} but is not proven: the "
                "interval is too wide. Gate on more samples, or use mode 'tolerant' for "
                "everyday CI."
            )
        if self.kind == "task":
            classes = "compare the classes below; " if self.per_class else ""
            return (
                f"{head} What to do: {classes}re-quantize with more or more representative "
                "calibration data, keep the most sensitive layers in float, or fine-tune "
                "(quantization-aware training). Raise max_drop only if this loss is "
                "acceptable."
            )
        extra = (
            " max_abs is a worst case over every element: one outlier fails it; snr or "
            "cosine judge the typical error."
            if self.metric == "max_abs"
            else ""
        )
        return (
            f"{head} What to do: the candidate's outputs drift from the reference's; keep the "
            f"layers feeding {self.output!r} in float, calibrate with more representative "
            f"data, or use quantization-aware training. Relax {self.threshold_name} only if "
            f"this drift is acceptable.{extra}"
        )

    def meets_threshold(self, number: float | None = None) -> bool:
        """Whether ``number`` (default: :attr:`deciding_value`) meets the threshold; NaN never."""
        number = self.deciding_value if number is None else number
        if math.isnan(number):
            return False
        if self.lower_is_better:
            return number <= self.threshold + _TOLERANCE
        return number >= self.threshold - _TOLERANCE

    def _show(self, number: float | None) -> str:
        if self.kind == "task":
            return self.definition.format_change(number)
        return self.definition.format_value(number)


@dataclass(frozen=True)
class GateReport:
    """The verdicts of a gate over many outputs and metrics; it passes when all of them pass.

    Attributes:
        verdicts: One per (output, metric), in the order checked.
        reference: Reference display name.
        candidate: Candidate display name.
        reference_backend: Where the reference ran.
        backend: Where the candidate ran.
        settings: Mode, interval level, bootstrap options (and ``max_drop``, the default of
            fraction task metrics).
        samples: Samples judged (the same for every output).
        config: The :class:`~tfcompress.testing.config.GateConfig` of a
            :func:`~tfcompress.testing.output_gates.check_gate` run (``to_dict()["config"]``;
            ``GateConfig.from_dict`` reads it back); None for other gates.
    """

    verdicts: tuple[Verdict, ...]
    reference: str
    candidate: str
    reference_backend: str
    backend: str
    settings: GateSettings
    samples: int
    config: GateConfig | None = None

    @property
    def passed(self) -> bool:
        """True when every verdict passed."""
        return all(v.passed for v in self.verdicts)

    @property
    def failures(self) -> tuple[Verdict, ...]:
        """The verdicts that failed, in order."""
        return tuple(v for v in self.verdicts if not v.passed)

    # -- the one verdict of a single-output gate (check_accuracy_drop) -------------------
    @property
    def only(self) -> Verdict:
        """The verdict of a gate with exactly one check (``check_accuracy_drop``).

        Raises:
            ValueError: The gate has several verdicts: read :attr:`verdicts` or
                :meth:`verdict` instead.
        """
        if len(self.verdicts) != 1:
            raise ValueError(
                f"this gate has {len(self.verdicts)} verdicts; read report.verdicts or "
                "report.verdict(output, metric)."
            )
        return self.verdicts[0]

    @property
    def drop(self) -> float:
        """The one task verdict's drop (reference minus candidate, in the metric's unit)."""
        return self.only.value

    @property
    def ci_low(self) -> float | None:
        """Lower bound of the one verdict's interval."""
        return self.only.ci_low

    @property
    def ci_high(self) -> float | None:
        """Upper bound of the one verdict's interval."""
        return self.only.ci_high

    @property
    def reference_accuracy(self) -> float | None:
        """The reference's score on the one verdict's metric (accuracy by default)."""
        return self.only.reference_score

    @property
    def candidate_accuracy(self) -> float:
        """The candidate's score on the one verdict's metric."""
        return self.only.candidate_score

    @property
    def per_class(self) -> tuple[ClassChange, ...]:
        """The one verdict's per-class scores, worst change first."""
        return self.only.per_class

    @property
    def difference(self) -> PairedDifference | None:
        """The one verdict's paired drop (McNemar or bootstrap), with its p-value if any."""
        return self.only.difference

    def verdict(self, output: str, metric: str | None = None) -> Verdict:
        """The verdict of ``output`` (and ``metric``, needed when the output has several).

        Raises:
            KeyError: No such verdict, or several match.
        """
        found = [v for v in self.verdicts if v.output == output and metric in (None, v.metric)]
        if len(found) != 1:
            raise KeyError(f"{len(found)} verdicts for output {output!r}, metric {metric!r}")
        return found[0]

    def to_dict(self) -> dict[str, Any]:
        """Plain data, the CLI's ``--json``: ``checks`` holds one :meth:`Verdict.to_dict` each."""
        return {
            "passed": self.passed,
            "mode": self.settings.mode,
            "confidence": self.settings.confidence,
            "samples": self.samples,
            "failed": len(self.failures),
            "reference": self.reference,
            "candidate": self.candidate,
            "reference_backend": self.reference_backend,
            "backend": self.backend,
            "checks": [v.to_dict() for v in self.verdicts],
            **({} if self.config is None else {"config": self.config.to_dict()}),
        }

    def headline(self) -> str:
        """One line: PASSED/FAILED, mode, and the deciding rule of each failing check."""
        mode = self.settings.mode
        total = len(self.verdicts)
        outputs = len({v.output for v in self.verdicts})
        checks = f"{total} check{'s' * (total != 1)} on {outputs} output{'s' * (outputs != 1)}"
        failures = self.failures
        if not failures:
            rules = "; ".join(f"{v.output} {v.metric}: {v.rule()}" for v in self.verdicts[:3])
            more = f"; {total - 3} more" if total > 3 else ""
            return f"gate PASSED ({mode}): {checks}; {rules}{more}"
        rules = "; ".join(f"{v.output} {v.metric}: {v.rule()}" for v in failures)
        return f"gate FAILED ({mode}): {len(failures)} of {checks} failed: {rules}"

    def table(self) -> str:
        """One row per verdict: scores, drop or value, interval, threshold, result."""
        level = f"{round(self.settings.confidence * 100, 2):g}% interval"
        header = [
            "output",
            "metric",
            "reference",
            "candidate",
            "drop / value",
            level,
            "threshold",
            "result",
        ]
        return format_table(header, [v.row() for v in self.verdicts])

    def explain(self) -> str:
        """The full message: headline, models, table, chosen metrics, advice per failure."""
        s = self.settings
        intervals = ", ".join(dict.fromkeys(v.method for v in self.verdicts))
        lines = [
            self.headline(),
            "",
            f"reference {self.reference}{_on(self.reference_backend)}, candidate "
            f"{self.candidate}{_on(self.backend)}; {self.samples} samples, mode {s.mode}, "
            f"interval: {intervals}",
            "",
            self.table(),
        ]
        chosen = [v for v in self.verdicts if v.chosen_because]
        if chosen:
            lines += ["", "metrics chosen for you (name one with --metric to override):"]
            lines += [f"  {v.chosen_because}" for v in chosen]
        notes = [f"  {v.output} {v.metric}: {n}" for v in self.verdicts for n in v.notes]
        if notes:
            lines += ["", "notes:", *notes]
        for v in self.failures:
            lines += ["", v.advice()]
            if v.per_class:
                worst = v.per_class[:WORST_CLASSES_SHOWN]
                fmt = v.definition.format_value
                rows = [
                    [
                        str(c.label),
                        str(c.samples),
                        fmt(c.reference_score),
                        fmt(c.candidate_score),
                        v.definition.format_change(c.change),
                    ]
                    for c in worst
                ]
                header = ["class", "samples", "reference", "candidate", "change"]
                lines += [f"per-class change, worst {len(worst)} of {len(v.per_class)}:"]
                lines.append(format_table(header, rows))
        if self.passed:
            lines += ["", "Every check is within its threshold."]
        return "\n".join(lines)

    def __str__(self) -> str:
        lines = [self.headline(), self.table(), f"{self.samples} samples"]
        lines += [f"chosen: {v.chosen_because}" for v in self.verdicts if v.chosen_because]
        return "\n".join(lines)


def _on(backend: str) -> str:
    return f" on {backend}" if backend else ""
