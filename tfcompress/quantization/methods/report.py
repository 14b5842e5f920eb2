"""What the post-training methods did and how each candidate compared with plain int8.

:class:`MethodsReport` is ``QuantizationResult.methods``: every candidate made in the run
(plain converter int8 first), scored (and judged) alike, which one was kept and why, what
each cost and changed, and the candidates skipped before any work, with why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from tfcompress.quantization.methods.ranges import TensorRange
from tfcompress.quantization.methods.rewrite import Rewrite

PLAIN = "plain int8"


@dataclass(frozen=True)
class OutputFidelity:
    """One output of one candidate against the float32 reference.

    Attributes:
        output: The output's name.
        snr_db: Signal-to-noise ratio of the candidate's output (dB; +inf when identical).
        agreement: Share of samples with the reference's top-1 class (class probability outputs
            only, else None).
    """

    output: str
    snr_db: float
    agreement: float | None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports (an infinite SNR is written as null)."""
        return {
            "output": self.output,
            "snr_db": round(self.snr_db, 3) if math.isfinite(self.snr_db) else None,
            "agreement": None if self.agreement is None else round(self.agreement, 6),
        }

    def __str__(self) -> str:
        text = f"{self.output}: SNR {self.snr_db:.2f} dB"
        if self.agreement is not None:
            text += f", agreement {self.agreement:.2%}"
        return text


@dataclass(frozen=True)
class GateMargin:
    """One check of the user's gate on one candidate: how far inside (or outside) it is.

    Attributes:
        output: The output's name.
        metric: The metric (``"snr"``, ``"accuracy"``...).
        threshold_name: ``"min_snr"``, ``"max_drop"``...
        value: The number the gate compared (the drop for task metrics), in the metric's unit.
        threshold: The threshold, in the same unit.
        passed: Whether the check passed (in the gate's mode).
        margin: How far inside the threshold ``value`` is, in the metric's unit: positive
            inside, negative outside (``value - threshold`` for a minimum, ``threshold -
            value`` for a maximum or a drop).
        scaled: ``margin`` on the one scale every metric is compared on
            (:func:`~tfcompress.quantization.methods.selection.scaled_margin`).
        shown: ``margin`` in words: ``"+3.10 dB"``, ``"-0.40 pt"``.
    """

    output: str
    metric: str
    threshold_name: str
    value: float
    threshold: float
    passed: bool
    margin: float
    scaled: float
    shown: str

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports (non-finite numbers as null)."""
        data: dict[str, Any] = asdict(self)
        for key in ("value", "threshold", "margin", "scaled"):
            data[key] = round(data[key], 6) if math.isfinite(data[key]) else None
        data["scaled_margin"] = data.pop("scaled")
        return data


@dataclass(frozen=True)
class Candidate:
    """One artifact made in the run: plain int8 (no methods) or a set of methods.

    Attributes:
        methods: The methods that made it (``()`` for the converter's plain int8).
        fidelity: Each output against the float32 reference (empty if it was not made).
        size_bytes: Size of its ``.tflite`` (None if it was not made).
        seconds: Wall time of making it (rewrite, calibration, range search, quantizer).
        rewrite: What the weight methods changed (None without weight methods).
        ranges: The activation ranges a range method chose (empty without one).
        edits: What each graph method changed in the calibrated flatbuffer, keyed by its
            ``report_key`` (``{"corrected": (BiasCorrection, ...)}``; empty without one).
        error: Why it could not be made (None when it was).
        gate: With a gate: each of its checks on this candidate (empty without one).
        latency_ms: Its median ms per sample on LiteRT's CPU, where the method timed it
            (``per-op``; else None).
    """

    methods: tuple[str, ...]
    fidelity: tuple[OutputFidelity, ...] = ()
    size_bytes: int | None = None
    seconds: float = 0.0
    rewrite: Rewrite | None = None
    ranges: tuple[TensorRange, ...] = ()
    error: str | None = None
    gate: tuple[GateMargin, ...] = ()
    edits: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    latency_ms: float | None = None

    @property
    def passes(self) -> bool:
        """Made, judged by a gate, and every check of it passed."""
        return self.error is None and bool(self.gate) and all(g.passed for g in self.gate)

    @property
    def worst_margin(self) -> GateMargin | None:
        """The gate check with the smallest scaled margin (None without a gate)."""
        return min(self.gate, key=lambda g: _ordered(g.scaled), default=None)

    @property
    def worst_snr(self) -> float:
        """The SNR of its weakest output against float32 (NaN counts as the worst)."""
        values = [f.snr_db for f in self.fidelity]
        return min((_ordered(v) for v in values), default=-math.inf)

    @property
    def label(self) -> str:
        """``plain int8`` or the methods joined by ``+``."""
        return "+".join(self.methods) if self.methods else PLAIN

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports."""
        return {
            "methods": list(self.methods),
            "fidelity": [f.to_dict() for f in self.fidelity],
            "size_bytes": self.size_bytes,
            "seconds": round(self.seconds, 3),
            "rewrite": None if self.rewrite is None else self.rewrite.to_dict(),
            "ranges": [r.to_dict() for r in self.ranges],
            "edits": {key: [e.to_dict() for e in entries] for key, entries in self.edits.items()},
            "error": self.error,
            "gate": [g.to_dict() for g in self.gate],
            "passes": self.passes if self.gate else None,
            "latency_ms": self.latency_ms,
        }

    def line(self) -> str:
        """One line: the label, each output's fidelity, the gate's worst margin (or the error)."""
        if self.error is not None:
            return f"{self.label}: not made ({self.error})"
        scores = "; ".join(str(f) for f in self.fidelity) or "not scored (nothing to compare)"
        worst = self.worst_margin
        if worst is not None:
            verdict = "passes the gate" if self.passes else "fails the gate"
            scores += f"; {verdict}, worst margin {worst.shown} ({worst.output} {worst.metric})"
        size = "" if self.size_bytes is None else f"{self.size_bytes:,} bytes, "
        size += "" if self.latency_ms is None else f"{self.latency_ms:.4g} ms/sample, "
        edits = "".join(f", {len(v)} {k}" for k, v in self.edits.items())
        return f"{self.label}: {scores} ({size}{self.seconds:.1f}s{edits})"


def _ordered(value: float) -> float:
    """NaN sorts below everything (an unmeasurable value is the worst)."""
    return -math.inf if math.isnan(value) else value


@dataclass(frozen=True)
class MethodsReport:
    """How the methods compared with the converter's plain int8, and which artifact was kept.

    Attributes:
        measured_on: ``"eval data"`` or ``"calibration samples"``: what the candidates were
            scored on.
        samples: How many samples.
        plain: The converter's plain int8, scored the same way.
        candidates: Each set of methods tried, in order.
        kept: The methods of the artifact returned (``()``: the converter's plain int8).
        reason: One line: why that one, with the numbers that decided.
        searched: True when the methods were tried against plain int8 and one kept by
            :func:`~tfcompress.quantization.methods.selection.choose`; False when a
            recipe's methods were applied as given.
        why_run: Why the methods ran: ``"asked"`` (``methods=``/``--methods``, or a recipe
            that names them), ``"plain int8 failed the gate"`` or ``"plain int8 passed the
            gate: auto not run"``.
        gated: The candidates were judged by the user's gate (else by worst-output SNR).
        skipped: ``(candidate, why)`` for each candidate not tried, decided before any
            conversion (a weight method on a model that is not a Keras model).
        reference_seconds: Converting the float32 reference (and the trace it shares with
            plain int8).
        scoring_seconds: Running every artifact on the samples and judging it.
        total_seconds: The whole run: reference, plain int8, every candidate, scoring.
        budget_seconds: ``auto``'s budget in this run
            (:data:`~tfcompress.quantization.methods.budget.AUTO_BUDGET` times the plain
            path's seconds); None when the methods were named (all made) or auto did not run.
    """

    measured_on: str
    samples: int
    plain: Candidate
    candidates: tuple[Candidate, ...]
    kept: tuple[str, ...]
    reason: str
    searched: bool
    why_run: str = "asked"
    gated: bool = False
    skipped: tuple[tuple[str, str], ...] = ()
    reference_seconds: float = 0.0
    scoring_seconds: float = 0.0
    total_seconds: float = 0.0
    budget_seconds: float | None = None

    @property
    def kept_candidate(self) -> Candidate:
        """The candidate whose artifact was returned."""
        return next((c for c in self.candidates if c.methods == self.kept), self.plain)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports."""
        return {
            "measured_on": self.measured_on,
            "samples": self.samples,
            "plain": self.plain.to_dict(),
            "candidates": [c.to_dict() for c in self.candidates],
            "kept": list(self.kept),
            "reason": self.reason,
            "searched": self.searched,
            "why_run": self.why_run,
            "gated": self.gated,
            "skipped": [{"methods": label, "why": why} for label, why in self.skipped],
            "seconds": {
                "reference": round(self.reference_seconds, 3),
                "plain": round(self.plain.seconds, 3),
                "candidates": {c.label: round(c.seconds, 3) for c in self.candidates},
                "scoring": round(self.scoring_seconds, 3),
                "total": round(self.total_seconds, 3),
                "budget": None if self.budget_seconds is None else round(self.budget_seconds, 3),
            },
        }

    def __str__(self) -> str:
        kept = self.kept_candidate.label
        judged = "judged by the gate" if self.gated else "scored against float32"
        lines = [f"methods ({self.why_run}), {judged} on {self.samples} {self.measured_on}:"]
        for candidate in (self.plain, *self.candidates):
            mark = "  <- kept" if candidate.label == kept else ""
            lines.append(f"  {candidate.line()}{mark}")
        lines += [f"  {label}: skipped ({why})" for label, why in self.skipped]
        lines.append(f"kept {kept}: {self.reason}")
        made = sum(c.seconds for c in self.candidates)
        # the reference's and plain int8's seconds both hold their shared trace
        parts = self.reference_seconds + self.plain.seconds + made + self.scoring_seconds
        other = max(0.0, self.total_seconds - parts)
        lines.append(
            f"time: {self.total_seconds:.1f}s in all (float32 reference "
            f"{self.reference_seconds:.1f}s, plain int8 {self.plain.seconds:.1f}s, "
            f"candidates {made:.1f}s, scoring {self.scoring_seconds:.1f}s, other "
            f"{other:.1f}s: starting the converter, reading the data)"
        )
        if self.budget_seconds is not None:
            lines[-1] += f"; auto's budget {self.budget_seconds:.1f}s"
        return "\n".join(lines)
