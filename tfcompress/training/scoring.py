"""Score every output of the original, fine-tuned and exported models on the validation data.

An output with validation labels is scored against them (accuracy for class ids, per pixel
for masks; binary accuracy for 0/1 labels; mean squared error for targets). An output
without labels is scored against the original float model's outputs: top-1 agreement for a
softmax output, signal-to-noise ratio (dB) otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tfcompress.training.tasks import BINARY, INDICES, REGRESSION, SOFT, Labels, is_distribution
from tfcompress.training.tasks import in_unit_range as _in_unit_range

ACCURACY, BINARY_ACCURACY, MSE, AGREEMENT, SNR = (
    "accuracy",
    "binary_accuracy",
    "mse",
    "agreement",
    "snr_db",
)
_HIGHER_IS_BETTER = {ACCURACY: True, BINARY_ACCURACY: True, MSE: False, AGREEMENT: True, SNR: True}


@dataclass(frozen=True)
class OutputScore:
    """One output of the three models on the validation data.

    Attributes:
        output: The output's name.
        metric: ``accuracy`` (class ids; per pixel for masks), ``binary_accuracy``, ``mse``
            (against labels), or without labels ``agreement`` (top-1 agreement with the
            original float model) or ``snr_db`` (10·log10(Σref²/Σ(ref-out)²) against it).
        reference: The original model's score (None for ``snr_db``: infinite against itself).
        keras: The fine-tuned Keras model's score.
        tflite: The exported ``.tflite``'s score.
        labelled: Whether the score compares to labels (else to the original model).

    Example:
        >>> OutputScore("cls", "accuracy", 0.95, 0.95, 0.94, True).drop
        0.01
    """

    output: str
    metric: str
    reference: float | None
    keras: float
    tflite: float
    labelled: bool

    @property
    def higher_is_better(self) -> bool:
        """True for accuracies, agreement and SNR; False for ``mse``."""
        return _HIGHER_IS_BETTER[self.metric]

    @property
    def drop(self) -> float | None:
        """How much worse the export is than the original (positive = worse); None for SNR."""
        if self.reference is None:
            return None
        change = self.reference - self.tflite
        return round(change if self.higher_is_better else -change, 12)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports."""
        return {
            "output": self.output,
            "metric": self.metric,
            "labelled": self.labelled,
            "reference": _round(self.reference),
            "keras": _round(self.keras),
            "tflite": _round(self.tflite),
            "drop": _round(self.drop),
        }

    def format(self, value: float | None) -> str:
        """A value of this metric for people: ``95.20%``, ``31.4 dB``, ``0.00123``."""
        if value is None:
            return "-"
        if self.metric == SNR:
            return f"{value:.1f} dB" if math.isfinite(value) else "inf dB"
        if self.metric == MSE:
            return f"{value:.4g}"
        return f"{value:.2%}"


def score_outputs(
    names: Sequence[str],
    labels: Sequence[Labels | None],
    reference: Sequence[np.ndarray],
    keras: Sequence[np.ndarray],
    tflite: Sequence[np.ndarray],
) -> tuple[OutputScore, ...]:
    """Score each output of the three models (lists in output order).

    Example:
        >>> ref = [np.array([[0.1, 0.9], [0.8, 0.2]])]
        >>> score_outputs(["cls"], [None], ref, ref, ref)[0].tflite
        1.0
    """
    scores = []
    for index, name in enumerate(names):
        given = labels[index]
        ref = reference[index]
        if given is None:
            metric = AGREEMENT if is_distribution(ref) else SNR
            values = [_fidelity(metric, ref, out) for out in (keras[index], tflite[index])]
            baseline = None if metric == SNR else 1.0
            scores.append(OutputScore(name, metric, baseline, values[0], values[1], False))
            continue
        metric = {INDICES: ACCURACY, SOFT: ACCURACY, BINARY: BINARY_ACCURACY}.get(given.kind, MSE)
        threshold = 0.5 if _in_unit_range(ref) else 0.0
        ref_score, keras_score, tflite_score = (
            _task(given, out, threshold) for out in (ref, keras[index], tflite[index])
        )
        scores.append(OutputScore(name, metric, ref_score, keras_score, tflite_score, True))
    return tuple(scores)


def snr_db(reference: np.ndarray, candidate: np.ndarray) -> float:
    """10·log10(Σref² / Σ(ref - candidate)²); inf when they are equal.

    Example:
        >>> round(snr_db(np.array([1.0, 1.0]), np.array([1.1, 0.9])), 2)
        20.0
    """
    ref = np.asarray(reference, np.float64)
    noise = float(np.sum((ref - np.asarray(candidate, np.float64)) ** 2))
    signal = float(np.sum(ref**2))
    if noise == 0:
        return math.inf
    if signal == 0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def _task(labels: Labels, outputs: np.ndarray, threshold: float) -> float:
    if labels.kind == INDICES:
        return float(np.mean(outputs.argmax(axis=-1) == labels.values))
    if labels.kind == SOFT:
        return float(np.mean(outputs.argmax(axis=-1) == labels.values.argmax(axis=-1)))
    if labels.kind == BINARY:
        predicted = outputs.reshape(labels.values.shape) > threshold
        return float(np.mean(predicted == (labels.values > 0.5)))
    if labels.kind != REGRESSION:  # pragma: no cover - read_labels makes only these kinds
        raise ValueError(f"unknown label kind {labels.kind!r}")
    difference = outputs.reshape(labels.values.shape).astype(np.float64) - labels.values
    return float(np.mean(difference**2))


def _fidelity(metric: str, reference: np.ndarray, candidate: np.ndarray) -> float:
    if metric == AGREEMENT:
        return float(np.mean(reference.argmax(axis=-1) == candidate.argmax(axis=-1)))
    return snr_db(reference, candidate)


def _round(value: float | None) -> float | str | None:
    if value is None:
        return None
    if not math.isfinite(value):
        return "inf" if value > 0 else "-inf"
    return round(value, 6)
