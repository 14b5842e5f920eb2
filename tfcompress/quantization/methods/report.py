"""What the post-training methods did and how each candidate compared with plain int8.

:class:`MethodsReport` is ``QuantizationResult.methods``: every candidate made in the run
(plain converter int8 first), each scored against the float32 ``.tflite`` of the same model
on the same samples, which one was kept and why, and what each method changed (the
rewrite's folding, equalization scales, rounding and bias corrections; the activation
ranges chosen).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
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
class Candidate:
    """One artifact made in the run: plain int8 (no methods) or a set of methods.

    Attributes:
        methods: The methods that made it (``()`` for the converter's plain int8).
        fidelity: Each output against the float32 reference (empty if it was not made).
        size_bytes: Size of its ``.tflite`` (None if it was not made).
        seconds: Wall time of making it (rewrite, calibration, range search, quantizer).
        rewrite: What the weight methods changed (None without weight methods).
        ranges: The activation ranges chosen (empty without a range method).
        error: Why it could not be made (None when it was).
    """

    methods: tuple[str, ...]
    fidelity: tuple[OutputFidelity, ...] = ()
    size_bytes: int | None = None
    seconds: float = 0.0
    rewrite: Rewrite | None = None
    ranges: tuple[TensorRange, ...] = ()
    error: str | None = None

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
            "error": self.error,
        }

    def line(self) -> str:
        """One line: the label and each output's fidelity (or the error)."""
        if self.error is not None:
            return f"{self.label}: not made ({self.error})"
        scores = "; ".join(str(f) for f in self.fidelity)
        return f"{self.label}: {scores} ({self.seconds:.1f}s)"


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
        reason: One line: why that one.
        searched: True when the methods were tried against plain int8 and the better one
            kept (``methods=...``); False when a recipe's methods were applied as given.

    Example:
        >>> result.methods.kept  # doctest: +SKIP
        ('equalize', 'bias-correction')
    """

    measured_on: str
    samples: int
    plain: Candidate
    candidates: tuple[Candidate, ...]
    kept: tuple[str, ...]
    reason: str
    searched: bool

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
        }

    def __str__(self) -> str:
        kept = self.kept_candidate.label
        lines = [f"methods, scored against float32 on {self.samples} {self.measured_on}:"]
        for candidate in (self.plain, *self.candidates):
            mark = "  <- kept" if candidate.label == kept else ""
            lines.append(f"  {candidate.line()}{mark}")
        lines.append(f"kept {kept}: {self.reason}")
        return "\n".join(lines)
