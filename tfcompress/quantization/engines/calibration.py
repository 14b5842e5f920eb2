"""LiteRT Quantizer's two calibrations, and which one a run keeps.

LiteRT Quantizer calibrates activation ranges with a moving average of each sample's
min/max (its ``qsv_utils.moving_average_update``, smoothing 0.95); tfcompress calibrates
with the full min/max over every sample (``qsv_utils.min_max_update``), as the TFLite
converter does. Neither is safe on its own: on real files min/max was 4.4 dB worse on a
face detector and 21 dB better on another model. So with eval data both are made, both are
scored against the float reference on that data, and the better one is kept by the same
rule that keeps a post-training method
(:func:`tfcompress.quantization.methods.selection.choose`, the default calibration in the
place of plain int8):

- with a gate (a ``GateConfig``, as ``check_gate`` takes it): the calibration that passes
  every output's gate, then the one whose weakest check has the larger margin;
- without: the one whose weakest output (SNR against float32) is better;
- a tie (within that rule's tolerance): :data:`DEFAULT_CALIBRATION`.

Without eval data nothing is measured and :data:`DEFAULT_CALIBRATION` is made. A recipe
that names one (``Recipe(..., calibration="moving-average")``, what a result's recipe records
after a comparison) gets that one, compared with nothing: a replay makes the same file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tfcompress._json import json_safe
from tfcompress.quantization.methods.report import PLAIN, Candidate, GateMargin, OutputFidelity
from tfcompress.quantization.recipes import LITERT_CALIBRATIONS

#: Both calibrations, the default first (``Recipe.calibration`` takes either).
CALIBRATIONS = LITERT_CALIBRATIONS
MIN_MAX, MOVING_AVERAGE = CALIBRATIONS
#: Made without eval data, and kept on a tie: the converter's full min/max ranges (on the
#: landmarker of the tests LiteRT Quantizer's moving average left its presence head at
#: 4.9 dB SNR where min/max kept 43.7 dB).
DEFAULT_CALIBRATION = MIN_MAX


@dataclass(frozen=True)
class CalibrationCandidate:
    """One calibration, scored against the float reference.

    Attributes:
        method: ``"min-max"`` or ``"moving-average"``.
        fidelity: SNR (and top-1 agreement for class scores) per output.
        gate: With a gate, each of its checks on this file (empty without one).
        size_bytes: Size of the file it made.
    """

    method: str
    fidelity: tuple[OutputFidelity, ...]
    gate: tuple[GateMargin, ...] = ()
    size_bytes: int | None = None

    @property
    def as_candidate(self) -> Candidate:
        """The methods' :class:`Candidate` (the default calibration as plain int8)."""
        methods = () if self.method == DEFAULT_CALIBRATION else (self.method,)
        return Candidate(methods, self.fidelity, self.size_bytes, gate=self.gate)

    @property
    def worst_snr_db(self) -> float:
        """The lowest SNR over the outputs (NaN counts as the worst)."""
        return self.as_candidate.worst_snr

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the method, per-output SNR/agreement, worst SNR and the gate's checks."""
        candidate = self.as_candidate
        out: dict[str, Any] = {
            "method": self.method,
            "worst_snr_db": json_safe(float(self.worst_snr_db)),
            "outputs": [f.to_dict() for f in self.fidelity],
            "size_bytes": self.size_bytes,
        }
        if self.gate:
            out["gate"] = [g.to_dict() for g in self.gate]
            out["passes"] = candidate.passes
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
        scores = ", ".join(
            f"{c.method} {'exact' if c.worst_snr_db == math.inf else f'{c.worst_snr_db:.2f} dB'}"
            for c in self.candidates
        )
        return (
            f"calibration: kept {self.kept} (worst-output SNR on {self.measured_on} eval "
            f"samples: {scores}; {self.reason})"
        )


def keep_calibration(
    candidates: Sequence[CalibrationCandidate], *, gated: bool = False
) -> tuple[int, str]:
    """The index of the candidate to keep and one line saying why.

    The post-training methods' keep rule
    (:func:`~tfcompress.quantization.methods.selection.choose`), with the default
    calibration where plain int8 stands: by the gate's checks when ``gated`` (every
    candidate carries them), else by the weakest output; ties keep the default.
    """
    from tfcompress.quantization.methods.selection import choose

    methods = [c.method for c in candidates]
    if DEFAULT_CALIBRATION not in methods:
        raise ValueError(f"keep_calibration needs the default, {DEFAULT_CALIBRATION}")
    default = methods.index(DEFAULT_CALIBRATION)
    others = [i for i in range(len(candidates)) if i != default]
    index, reason = choose(
        candidates[default].as_candidate,
        [candidates[i].as_candidate for i in others],
        gated=gated,
    )
    return (default if index is None else others[index]), reason.replace(PLAIN, DEFAULT_CALIBRATION)
