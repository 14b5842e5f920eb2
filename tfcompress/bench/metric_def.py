"""What a metric is: :class:`MetricDef`, its threshold ranges, units and formatting; where it is.

A leaf of :mod:`tfcompress.bench`: the task metrics (:mod:`tfcompress.bench.task_metrics`),
the fidelity metrics (:mod:`tfcompress.bench.fidelity`) and any module of ``bench/`` register
their factories here (:func:`register_metric`, into :data:`METRICS`), and
:mod:`tfcompress.bench.metrics` resolves names and aliases
(:func:`~tfcompress.bench.metrics.get_metric`, the way in); it imports none of them. Pure numpy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tfcompress._registry import Registry
from tfcompress.bench.thresholds import ThresholdDef, get_threshold

Prepared = tuple[np.ndarray, np.ndarray]  # (target, outputs) after validation


@dataclass(frozen=True)
class MetricDef:
    """A named metric: what it compares, which way is better, how to show it, how to score.

    Task metrics take ``(labels, outputs)``; fidelity metrics take
    ``(reference_outputs, candidate_outputs)``. Below, *target* is whichever comes first.

    Attributes:
        name: Canonical name (``"accuracy"``, ``"top5"``, ``"snr"``...).
        kind: ``"task"`` (needs labels; a gate judges the drop reference -> candidate) or
            ``"fidelity"`` (no labels; a gate judges the value itself).
        direction: ``"higher"`` or ``"lower"`` is better.
        unit: ``"fraction"`` (shown in %, changes in points), ``"dB"`` or ``"number"``.
        description: One sentence for people, including any threshold used.
        threshold_name: The gate threshold that applies: ``"max_drop"`` for every task
            metric, else ``"min_snr"``, ``"min_cosine"``, ``"max_abs"``, ``"min_agreement"``.
        default_threshold: Threshold when none is given; None where no unit-free default
            exists (``mse``, ``mae``, ``rmse``, ``max_abs``). Fraction task metrics take
            the gate's ``max_drop`` instead, so this is None for them too.
        interval: Default interval: ``"mcnemar"`` (per-sample correctness),
            ``"bootstrap"``, ``"clopper-pearson"`` (agreement) or ``"none"`` (``max_abs``).
        prepare: ``(target, outputs, output_name) -> (target, outputs)``: validates (raises
            :class:`~tfcompress.errors.InvalidDataError` / ``InvalidInputError``) and
            normalises.
        per_sample: Prepared ``(target, outputs) -> (N, k)`` per-sample statistics.
        aggregate: Rows of ``per_sample`` for a subset -> the metric on that subset.
        correctness: Prepared ``(target, outputs) ->`` per-sample booleans, or None where
            the metric is not per-sample correctness (then McNemar does not apply).
        binder: ``reference_outputs -> MetricDef`` fixing anything read from the outputs
            (the cut of single-unit outputs), so both models are scored alike.

    Example:
        >>> from tfcompress.bench.metrics import get_metric
        >>> acc = get_metric("top1")
        >>> acc.name, acc.kind, acc.direction, acc.unit
        ('accuracy', 'task', 'higher', 'fraction')
    """

    name: str
    kind: str
    direction: str
    unit: str
    description: str
    threshold_name: str
    default_threshold: float | None
    interval: str
    prepare: Callable[[np.ndarray, np.ndarray, str], Prepared] = field(repr=False, compare=False)
    per_sample: Callable[[np.ndarray, np.ndarray], np.ndarray] = field(repr=False, compare=False)
    aggregate: Callable[[np.ndarray], float] = field(repr=False, compare=False)
    correctness: Callable[[np.ndarray, np.ndarray], np.ndarray | None] | None = field(
        default=None, repr=False, compare=False
    )
    binder: Callable[[np.ndarray], MetricDef] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def higher_is_better(self) -> bool:
        """True when a larger value is better (accuracy, snr), False for errors (mse)."""
        return self.direction == "higher"

    def __reduce__(self) -> tuple[Callable[[str], MetricDef], tuple[str]]:
        """Pickle by name: the registry rebuilds the definition (its functions are closures).

        Results travel between processes this way (fine-tuning in a child process returns a
        gate report whose verdicts name their metric). A metric bound to reference outputs
        (:meth:`for_reference`) comes back as the registry's definition of its name: units,
        direction and formatting, what a report reads, do not depend on the binding.
        """
        return (_registered, (self.name,))

    def validate(self, target: Any, outputs: Any, *, output: str = "output") -> Prepared:
        """Check ``target`` (labels, or reference outputs) against ``outputs`` and normalise both.

        ``output`` names the output in messages; the pair comes back as :attr:`per_sample`
        expects it.

        Raises:
            InvalidDataError: Labels of the wrong shape, class ids out of range, masks that
                are not whole numbers, NaN/Inf labels or reference outputs.
            InvalidInputError: The metric means nothing for this output (the message names
                one that fits).

        Example:
            >>> from tfcompress.bench.metrics import get_metric
            >>> get_metric("accuracy").validate(np.array([[0, 1], [1, 0]]), np.eye(2))[0]
            array([1, 0])
        """
        return self.prepare(np.asarray(target), np.asarray(outputs), output)

    def measure(
        self, target: Any, outputs: Any, *, output: str = "output"
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Validate once; per-sample statistics and per-sample correctness (None if n/a)."""
        ready = self.validate(target, outputs, output=output)
        correct = self.correctness(*ready) if self.correctness is not None else None
        return self.per_sample(*ready), correct

    def scorer(
        self, target: Any, outputs: Any, *, output: str = "output"
    ) -> Callable[[np.ndarray], float]:
        """A function of sample indices -> the metric on those samples (computed once).

        Example:
            >>> from tfcompress.bench.metrics import get_metric
            >>> on = get_metric("mae").scorer([[0.0], [1.0]], [[1.0], [1.0]])
            >>> on(np.array([0])), on(np.array([0, 1]))
            (1.0, 0.5)
        """
        stats = self.measure(target, outputs, output=output)[0]
        return lambda indices: float(self.aggregate(stats[np.asarray(indices)]))

    def score(self, target: Any, outputs: Any, *, output: str = "output") -> float:
        """The metric on all samples."""
        stats = self.measure(target, outputs, output=output)[0]
        return float(self.aggregate(stats))

    def for_reference(self, reference_outputs: Any) -> MetricDef:
        """This metric with anything read from outputs (a binary cut) fixed from the reference.

        Example:
            >>> from tfcompress.bench.metrics import get_metric
            >>> get_metric("binary_accuracy").for_reference(np.array([[-2.0], [3.0]])).description
            'binary accuracy: an output above 0 counts as positive (the reference outputs logits)'
        """
        return self if self.binder is None else self.binder(np.asarray(reference_outputs))

    def check_threshold(self, value: Any, *, source: str | None = None) -> float:
        """A threshold for this metric as a float, refused when out of range.

        The ranges are the threshold table's (:mod:`tfcompress.bench.thresholds`). ``source``
        names where the value came from in the message (default: the threshold's name).

        Raises:
            InvalidInputError: Not a finite number, or out of range.

        Example:
            >>> from tfcompress.bench.metrics import get_metric
            >>> get_metric("cosine").check_threshold("0.995")
            0.995
        """
        return get_threshold(self.threshold_name).check(
            value, source=source, unit=self.unit, metric=self.name
        )

    def format_value(self, value: float | None) -> str:
        """A value in this metric's unit: ``95.56%``, ``23.10 dB``, ``+inf dB``, ``0.0123``."""
        if value is None:
            return ""
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return f"{value:+} dB" if self.unit == "dB" else f"{value:+}"
        if self.unit == "fraction":
            return f"{value:.2%}"
        return f"{value:.2f} dB" if self.unit == "dB" else f"{value:.6g}"

    def format_change(self, value: float | None, *, signed: bool = True) -> str:
        """A drop or change: ``+1.25 pt`` (fraction), ``+0.5 dB``, ``+0.0031`` (number)."""
        if value is None:
            return ""
        sign = "+" if signed else ""
        if not math.isfinite(value):
            return f"{value:{sign}}"
        if self.unit == "fraction":
            return f"{value * 100:{sign}.2f} pt"
        return f"{value:{sign}.2f} dB" if self.unit == "dB" else f"{value:{sign}.6g}"

    def format_threshold(self, value: float) -> str:
        """The threshold as shown next to its name: ``1.00 pt``, ``20.00 dB``, ``99.00%``."""
        if self.kind == "task":
            return self.format_change(value, signed=False)
        return self.format_value(value)


@dataclass(frozen=True)
class MetricEntry:
    """A registered metric: its factory and its own gate threshold (None: ``max_drop``)."""

    factory: Callable[[], MetricDef]
    threshold: ThresholdDef | None = None


#: Every named metric: a factory with ``@register_metric(NAME)`` in a module of bench/.
METRICS: Registry[MetricEntry] = Registry(
    "metric",
    "bench",
    "register_metric",
    ordered=True,
    hint=" (topN for the top-N accuracy: top5, top3...; binary_accuracy@T cuts at T)",
)


def register_metric(
    name: str, *, threshold: ThresholdDef | None = None
) -> Callable[[Callable[[], MetricDef]], Callable[[], MetricDef]]:
    """Decorator: the factory's metric is ``--metric NAME``, judged by ``threshold``.

    ``threshold``: the metric's own gate threshold, written as literals (``--help`` reads
    it from the source), e.g. ``ThresholdDef("min_snr", "smallest SNR in dB", 20.0)``:
    ``--min-snr`` on the gating verbs, ``min_snr=`` of check_gate and compress. None: a task
    metric, judged on its drop (``max_drop``).
    """

    def decorate(factory: Callable[[], MetricDef]) -> Callable[[], MetricDef]:
        row = None if threshold is None else replace(threshold, metric=name)
        METRICS.register(name, MetricEntry(factory, row), replace=True)
        return factory

    return decorate


def metric_thresholds() -> list[ThresholdDef]:
    """The thresholds of the metrics registered so far (the threshold table reads them)."""
    return [e.threshold for e in METRICS.loaded().values() if e.threshold is not None]


def _registered(name: str) -> MetricDef:
    """The registry's definition of ``name`` (unpickling; see :meth:`MetricDef.__reduce__`)."""
    from tfcompress.bench.metrics import get_metric

    return get_metric(name)
