"""LiteRT Quantizer's two calibrations, and which one a run keeps.

LiteRT Quantizer calibrates activation ranges with a moving average of each sample's
min/max (its ``qsv_utils.moving_average_update``, smoothing 0.95); tfcompress calibrates
with the full min/max over every sample (``qsv_utils.min_max_update``), as the TFLite
converter does. Neither is safe on its own: on real files min/max was 4.4 dB worse on a
face detector and 21 dB better on another model. So with eval data both are made, both are
scored against the float reference on that data, and the better one is kept:

- with gate thresholds (``check_gate``'s keywords): the candidates that pass every output's
  gate, then the one with the largest worst-output margin;
- without: the one with the best worst-output SNR;
- a tie (or nothing to tell them apart): :data:`DEFAULT_CALIBRATION`.

Without eval data nothing is measured and :data:`DEFAULT_CALIBRATION` is made.

:func:`keep_calibration` is the keep rule on its own (fidelities and gate reports in, an
index and a reason out), so the shared keep rule of the post-training methods can take its
place once it judges by the gate the same way.

Example:
    >>> a = CalibrationCandidate("min-max", (OutputFidelity("y", 30.0, None),))
    >>> b = CalibrationCandidate("moving-average", (OutputFidelity("y", 34.5, None),))
    >>> keep_calibration((a, b))
    (1, 'moving-average: worst-output SNR 34.50 dB against 30.00 dB for min-max')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tfcompress.quantization.methods.report import OutputFidelity

__all__ = [
    "CALIBRATIONS",
    "DEFAULT_CALIBRATION",
    "MIN_MAX",
    "MOVING_AVERAGE",
    "CalibrationCandidate",
    "CalibrationChoice",
    "keep_calibration",
    "worst_margin",
]

MIN_MAX = "min-max"
MOVING_AVERAGE = "moving-average"
#: Both calibrations, the default first.
CALIBRATIONS = (MIN_MAX, MOVING_AVERAGE)
#: Made without eval data, and kept on a tie: the converter's full min/max ranges (on the
#: landmarker of the tests LiteRT Quantizer's moving average left its presence head at
#: 0.5 dB SNR where min/max kept 37 dB).
DEFAULT_CALIBRATION = MIN_MAX


@dataclass(frozen=True)
class CalibrationCandidate:
    """One calibration, scored against the float reference.

    Attributes:
        method: ``"min-max"`` or ``"moving-average"``.
        fidelity: SNR (and top-1 agreement for class scores) per output.
        gate: The gate's report on this file when gate thresholds were given, else None.
        size_bytes: Size of the file it made.
    """

    method: str
    fidelity: tuple[OutputFidelity, ...]
    gate: Any = field(default=None, repr=False, compare=False)
    size_bytes: int | None = None

    @property
    def worst_snr_db(self) -> float:
        """The lowest SNR over the outputs (inf when every output matches exactly)."""
        values = [f.snr_db for f in self.fidelity]
        if any(math.isnan(v) for v in values):
            return -math.inf
        return min(values, default=math.inf)

    @property
    def gate_passed(self) -> bool | None:
        """Whether the gate passed (None without a gate)."""
        return None if self.gate is None else bool(self.gate.passed)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the method, per-output SNR/agreement, worst SNR, gate pass and margin."""
        out: dict[str, Any] = {
            "method": self.method,
            "worst_snr_db": _finite_or_none(self.worst_snr_db),
            "outputs": [
                {
                    "output": f.output,
                    "snr_db": _finite_or_none(f.snr_db),
                    "agreement": f.agreement,
                }
                for f in self.fidelity
            ],
            "size_bytes": self.size_bytes,
        }
        if self.gate is not None:
            out["gate_passed"] = self.gate_passed
            out["worst_margin"] = _finite_or_none(worst_margin(self.gate))
        return out


@dataclass(frozen=True)
class CalibrationChoice:
    """Which calibration made the file, and why.

    Attributes:
        kept: The method whose file was returned.
        default: :data:`DEFAULT_CALIBRATION`.
        candidates: Both candidates, scored (empty when nothing was measured).
        reason: One line: what decided.
        measured_on: Samples scored on (0 when nothing was measured).
    """

    kept: str
    default: str
    candidates: tuple[CalibrationCandidate, ...]
    reason: str
    measured_on: int = 0

    @property
    def measured(self) -> bool:
        """Whether both calibrations were made and scored."""
        return bool(self.candidates)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "kept": self.kept,
            "default": self.default,
            "reason": self.reason,
            "samples": self.measured_on,
            "candidates": [c.to_dict() for c in self.candidates],
        }

    def __str__(self) -> str:
        if not self.measured:
            return f"calibration: {self.kept} ({self.reason})"
        scores = ", ".join(f"{c.method} {_db(c.worst_snr_db)}" for c in self.candidates)
        return (
            f"calibration: kept {self.kept} (worst-output SNR on {self.measured_on} eval "
            f"samples: {scores}; {self.reason})"
        )


def worst_margin(report: Any) -> float:
    """The smallest margin of a gate's verdicts, in each verdict's unit (positive: inside).

    A ``min_*`` threshold's margin is ``value - threshold``; a ``max_*`` one's
    ``threshold - value``.
    """
    margins = []
    for verdict in report.verdicts:
        if verdict.threshold_name.startswith("max_"):
            margins.append(verdict.threshold - verdict.value)
        else:
            margins.append(verdict.value - verdict.threshold)
    clean = [-math.inf if math.isnan(m) else m for m in margins]
    return min(clean, default=math.inf)


def keep_calibration(
    candidates: Sequence[CalibrationCandidate], *, default: str = DEFAULT_CALIBRATION
) -> tuple[int, str]:
    """The index of the candidate to keep and one line saying why.

    With gate reports on the candidates: those that pass every output's gate, then the
    largest worst-output margin. Without: the best worst-output SNR. A tie keeps
    ``default``.

    Example:
        >>> a = CalibrationCandidate("min-max", (OutputFidelity("y", 30.0, None),))
        >>> b = CalibrationCandidate("moving-average", (OutputFidelity("y", 30.0, None),))
        >>> keep_calibration((a, b))
        (0, 'tie at worst-output SNR 30.00 dB: the default, min-max')
    """
    if not candidates:
        raise ValueError("keep_calibration needs at least one candidate")
    methods = [c.method for c in candidates]
    fallback = methods.index(default) if default in methods else 0
    if len(candidates) == 1:
        return 0, f"{methods[0]}: the only calibration made"
    gated = all(c.gate is not None for c in candidates)
    if gated:
        passing = [i for i, c in enumerate(candidates) if c.gate_passed]
        if len(passing) == 1:
            i = passing[0]
            failed = ", ".join(methods[j] for j in range(len(candidates)) if j != i)
            return i, f"{methods[i]} passes the gate and {failed} does not"
        pool = passing or list(range(len(candidates)))
        keys = {i: worst_margin(candidates[i].gate) for i in pool}
        what = "worst gate margin"
        prefix = "" if passing else "no calibration passes the gate; "
    else:
        pool = list(range(len(candidates)))
        keys = {i: candidates[i].worst_snr_db for i in pool}
        what = "worst-output SNR"
        prefix = ""
    best = max(keys.values())
    leaders = [i for i in pool if keys[i] == best]
    if len(leaders) > 1:
        kept = fallback if fallback in leaders else leaders[0]
        return kept, f"{prefix}tie at {what} {_value(best, gated)}: the default, {methods[kept]}"
    kept = leaders[0]
    others = " and ".join(f"{_value(keys[i], gated)} for {methods[i]}" for i in pool if i != kept)
    return kept, f"{prefix}{methods[kept]}: {what} {_value(best, gated)} against {others}"


def _value(value: float, gated: bool) -> str:
    return f"{value:+.4g}" if gated else _db(value)


def _db(value: float) -> str:
    return "exact" if math.isinf(value) and value > 0 else f"{value:.2f} dB"


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None
