"""Score every output of the original, fine-tuned and exported models on the validation data.

The metrics are the project's one registry, :mod:`tfcompress.bench.metrics` (the ones
``tfcompress gate`` and ``tfcompress evaluate`` use); this module only decides which one each
output gets (:func:`choose_score_metric`) and lays the three scores side by side.

An output with validation labels is scored against them with the metric
:func:`~tfcompress.bench.metrics.choose_metric` picks for them (``accuracy`` for class ids,
``binary_accuracy`` for 0/1 labels, ``miou`` for integer masks), except that regression
targets are reported as ``mse`` against the labels (see :func:`choose_score_metric`). An
output without labels is scored against the original float model's outputs: top-1
``agreement`` for probability rows, ``snr`` (dB) otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tfcompress.bench.metrics import MetricDef, choose_metric, get_metric
from tfcompress.training.tasks import Labels

# How much worse than the un-fine-tuned export an output may come out before the result says
# so: half a point of accuracy, agreement or mIoU (fractions), half a decibel of SNR, 5% more
# squared error. Smaller differences are the noise of a seeded fine-tune on a few hundred
# validation samples.
FRACTION_MARGIN = 0.005
RELATIVE_MARGIN = 0.05
WORSE_MARGINS = {"snr": 0.5}


@dataclass(frozen=True)
class OutputScore:
    """One output of the three models on the validation data.

    Attributes:
        output: The output's name.
        metric: The registry's name of the metric (:func:`tfcompress.bench.metrics.get_metric`):
            against labels ``accuracy``, ``binary_accuracy``, ``miou`` (masks) or ``mse``;
            without labels ``agreement`` (top-1 agreement with the original float model) or
            ``snr`` (dB, 10·log10(Σref²/Σ(ref-out)²) against it).
        reference: The original model's score; for a fidelity metric its value against
            itself (1.0 agreement), None where that is infinite (``snr``).
        keras: The fine-tuned Keras model's score.
        tflite: The exported ``.tflite``'s score.
        labelled: Whether the score compares to labels (else to the original model).
        baseline: The score of the original model exported at the same precision without
            fine-tuning (for ``int8``: plain post-training int8), the result the fine-tuning
            is meant to beat; None when it was not measured.

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
    baseline: float | None = None

    @property
    def definition(self) -> MetricDef:
        """The registry's definition of :attr:`metric` (direction, unit, formatting)."""
        return get_metric(self.metric)

    @property
    def higher_is_better(self) -> bool:
        """True for accuracies, mIoU, agreement and SNR; False for ``mse``."""
        return self.definition.higher_is_better

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
            "baseline": _round(self.baseline),
            "worse_than_baseline": self.worse_than_baseline,
        }

    @property
    def worse_than_baseline(self) -> bool:
        """The export is worse than the baseline by more than :data:`WORSE_MARGINS` allows.

        Example:
            >>> OutputScore("cls", "agreement", 1.0, 0.8, 0.772, False, 0.94).worse_than_baseline
            True
        """
        if self.baseline is None or not (
            math.isfinite(self.baseline) and math.isfinite(self.tflite)
        ):
            return False
        if self.metric in WORSE_MARGINS:
            margin = WORSE_MARGINS[self.metric]
            return self.baseline - self.tflite > margin
        if self.higher_is_better:
            return self.baseline - self.tflite > FRACTION_MARGIN
        return self.tflite > self.baseline * (1 + RELATIVE_MARGIN) + 1e-12

    def format(self, value: float | None) -> str:
        """A value of this metric for people: ``95.20%``, ``31.40 dB``, ``0.00123``; ``-``."""
        return "-" if value is None else self.definition.format_value(value)

    def format_drop(self) -> str:
        """:attr:`drop` for people: ``+1.25 pt``, ``+0.0031``; ``-`` without one."""
        drop = self.drop
        return "-" if drop is None else self.definition.format_change(drop)


def choose_score_metric(
    output: str, reference: np.ndarray, labels: Labels | None
) -> tuple[MetricDef, bool]:
    """The registry metric an output is scored with, and whether it compares to labels.

    :func:`~tfcompress.bench.metrics.choose_metric` decides, as for ``tfcompress gate``,
    with one exception: for regression targets it picks ``snr`` against the reference,
    because a gate needs a threshold that means the same for every output and an error in
    the output's own unit has none. A score needs no threshold, and the targets are what the
    output was fine-tuned on, so training reports ``mse`` against those labels instead.

    Raises:
        InvalidInputError: Labels that fit no metric of the registry.
    """
    given = None if labels is None else labels.values
    metric, _ = choose_metric(reference.shape, given, output=output, reference_outputs=reference)
    if given is not None and metric.kind == "fidelity":
        metric = get_metric("mse")
    return metric.for_reference(reference), given is not None


def score_outputs(
    names: Sequence[str],
    labels: Sequence[Labels | None],
    reference: Sequence[np.ndarray],
    keras: Sequence[np.ndarray],
    tflite: Sequence[np.ndarray],
    baseline: Sequence[np.ndarray] | None = None,
) -> tuple[OutputScore, ...]:
    """Score each output of the models (lists in output order).

    Raises:
        InvalidInputError: Labels that fit no metric of the registry.
        InvalidDataError: Labels that do not fit the chosen metric.
    """
    scores = []
    for index, name in enumerate(names):
        ref = reference[index]
        given = labels[index]
        metric, labelled = choose_score_metric(name, ref, given)
        # a task metric compares to the labels, a fidelity metric to the original's outputs
        target = ref if given is None else given.values
        values = [
            metric.score(target, outputs, output=name)
            for outputs in (ref, keras[index], tflite[index])
        ]
        original: float | None = values[0]
        if not labelled and not math.isfinite(values[0]):
            original = None  # snr of the original against itself
        plain = None if baseline is None else metric.score(target, baseline[index], output=name)
        scores.append(
            OutputScore(name, metric.name, original, values[1], values[2], labelled, plain)
        )
    return tuple(scores)


def _round(value: float | None) -> float | str | None:
    if value is None or math.isnan(value):
        return None
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return round(value, 6)
