"""Judge one planned check: a metric on one output of both models, into a :class:`Verdict`.

A task metric is scored on each model against the labels and its drop judged with a paired
interval (McNemar for per-sample correctness, a seeded bootstrap otherwise), with per-class
changes for class ids; a fidelity metric compares the candidate to the reference and is judged
on its value (Clopper-Pearson for agreement, a bootstrap for snr and cosine, no interval for
max_abs). :mod:`tfcompress.testing.judge` plans the checks and calls :func:`judge_check`.
Importing this module imports no TensorFlow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from tfcompress.bench.metric_def import MetricDef
from tfcompress.errors import InvalidInputError
from tfcompress.testing.report import ClassChange, Verdict
from tfcompress.testing.settings import GateSettings
from tfcompress.testing.stats import (
    MetricEstimate,
    PairedDifference,
    bootstrap_estimate,
    paired_difference,
    paired_metric_difference,
    point_estimate,
    proportion_estimate,
)

__all__ = ["judge_check"]


def judge_check(
    output: str,
    definition: MetricDef,
    threshold: float,
    reason: str | None,
    labels: Any,
    ref: np.ndarray,
    cand: np.ndarray,
    settings: GateSettings,
) -> Verdict:
    """Judge one metric on one output: measure it on both models and compare to the threshold.

    A task metric's drop gets McNemar's interval when the metric is per-sample correctness
    (unless ``settings.interval`` is ``"bootstrap"``), else a seeded paired bootstrap; a
    fidelity metric's value gets Clopper-Pearson (agreement), a bootstrap, or no interval
    (max_abs). ``settings.mode`` decides which number meets ``threshold`` (in the metric's
    unit). ``definition`` is bound to the reference's outputs here; ``reason`` says why it
    was chosen (None when the user named it); ``labels`` are None for fidelity metrics.

    Raises:
        InvalidInputError: ``interval='mcnemar'`` for a metric that is not per-sample
            correctness, or a metric that means nothing for the output.
        InvalidDataError: Labels or outputs the metric refuses.

    Example:
        >>> from tfcompress.bench.metrics import get_metric
        >>> ref = np.array([[1.0, 2.0]] * 3)
        >>> verdict = judge_check("box", get_metric("snr"), 20.0, None, None, ref, ref * 1.01,
        ...                       GateSettings())
        >>> verdict.passed, verdict.rule()
        (True, 'snr 40.00 dB >= min_snr 20.00 dB')
    """
    bound = definition.for_reference(ref)  # e.g. one binary cut for both models
    notes: list[str] = []
    if cand.dtype.kind == "f" and not np.isfinite(cand).all():
        bad = int(np.count_nonzero(~np.isfinite(cand)))
        notes.append(f"the candidate's outputs hold {bad} NaN or Inf values")
    per_class: tuple[ClassChange, ...] = ()
    difference: PairedDifference | None = None
    estimate: MetricEstimate | None = None
    if bound.kind == "task":
        difference, per_class = _drop(bound, labels, ref, cand, output, settings)
        ref_score, cand_score = difference.reference_score, difference.candidate_score
        value, low, high = difference.drop, difference.ci_low, difference.ci_high
        method = difference.method
    else:
        estimate = _fidelity(bound, ref, cand, output, settings)
        ref_score, cand_score, value = None, estimate.value, estimate.value
        low, high, method = estimate.ci_low, estimate.ci_high, estimate.method
        if estimate.method == "none":
            notes.append(
                f"no interval ({bound.name} is a maximum: a bootstrap cannot bound it), so the "
                f"point value decides in mode {settings.mode}"
            )
    verdict = Verdict(
        output,
        bound.name,
        bound.kind,
        ref_score,
        cand_score,
        value,
        low,
        high,
        threshold,
        bound.threshold_name,
        False,
        reason,
        method,
        len(ref),
        settings.confidence,
        settings.mode,
        bound,
        per_class,
        difference,
        estimate,
        tuple(notes),
    )
    return replace(verdict, passed=verdict.meets_threshold())


def _drop(
    metric: MetricDef,
    labels: Any,
    ref: np.ndarray,
    cand: np.ndarray,
    output: str,
    settings: GateSettings,
) -> tuple[PairedDifference, tuple[ClassChange, ...]]:
    options = _bootstrap_options(settings)
    ref_target, ref_ready = metric.validate(labels, ref, output=output)
    cand_target, cand_ready = metric.validate(labels, cand, output=output)
    if metric.correctness is not None:
        ref_ok = metric.correctness(ref_target, ref_ready)
        cand_ok = metric.correctness(cand_target, cand_ready)
        if ref_ok is not None and cand_ok is not None:
            method = "bootstrap" if settings.interval == "bootstrap" else "mcnemar"
            difference = paired_difference(ref_ok, cand_ok, method=method, **options)
            return difference, _per_class(ref_target, ref_ok.__getitem__, cand_ok.__getitem__)
    if settings.interval == "mcnemar":
        raise InvalidInputError(
            f"interval='mcnemar' needs per-sample correctness, but {metric.name} on output "
            f"{output!r} is not; use interval='auto' or 'bootstrap'."
        )
    ref_rows = metric.per_sample(ref_target, ref_ready)
    cand_rows = metric.per_sample(cand_target, cand_ready)
    difference = paired_metric_difference(
        lambda idx: metric.aggregate(ref_rows[idx]),
        lambda idx: metric.aggregate(cand_rows[idx]),
        len(ref),
        higher_is_better=metric.higher_is_better,
        **options,
    )
    # Per class only for accuracy-like scores (a metric function such as a mean true-class
    # probability) whose labels are class ids.
    if not (metric.higher_is_better and metric.unit == "fraction"):
        return difference, ()
    if np.asarray(ref_target).dtype.kind not in "iu":
        return difference, ()
    score = metric.aggregate
    per_class = _per_class(ref_target, lambda i: score(ref_rows[i]), lambda i: score(cand_rows[i]))
    return difference, per_class


def _fidelity(
    metric: MetricDef, ref: np.ndarray, cand: np.ndarray, output: str, settings: GateSettings
) -> MetricEstimate:
    target, ready = metric.validate(ref, cand, output=output)
    rows = metric.per_sample(target, ready)

    def score(indices: np.ndarray) -> float:
        return float(metric.aggregate(rows[indices]))

    method = metric.interval
    if method != "none" and settings.interval == "bootstrap":
        method = "bootstrap"
    if method == "clopper-pearson" and metric.correctness is not None:
        hits = metric.correctness(target, ready)
        if hits is not None:
            return proportion_estimate(hits, confidence=settings.confidence)
    if method in ("bootstrap", "clopper-pearson"):
        return bootstrap_estimate(score, len(ref), **_bootstrap_options(settings))
    return point_estimate(score, len(ref), confidence=settings.confidence)


def _bootstrap_options(settings: GateSettings) -> dict[str, Any]:
    return {
        "confidence": settings.confidence,
        "resamples": settings.resamples,
        "seed": settings.seed,
    }


def _per_class(
    target: np.ndarray,
    reference: Callable[[np.ndarray], Any],
    candidate: Callable[[np.ndarray], Any],
) -> tuple[ClassChange, ...]:
    """Both models' score per class (the mean of what each gives on the class's indices)."""
    flat = np.asarray(target).reshape(len(target), -1)
    if flat.shape[1] != 1:
        return ()
    labels = flat[:, 0].astype(np.int64)
    changes = []
    for label in np.unique(labels):
        indices = np.flatnonzero(labels == label)
        changes.append(
            ClassChange(
                int(label),
                int(indices.size),
                float(np.mean(reference(indices))),
                float(np.mean(candidate(indices))),
            )
        )
    return tuple(sorted(changes, key=lambda c: (c.change, c.label)))
