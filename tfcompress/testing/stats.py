"""Paired statistics for accuracy drops: both models are scored on the same samples.

Two intervals for the drop (reference score minus candidate score):

* ``"mcnemar"``: unconditional and conservative, not exact. Of the ``b + c`` samples where
  exactly one model is right, ``b`` favour the reference. The drop is
  ``(2 * theta - 1) * pi`` with ``theta`` the share of disagreements won by the reference
  and ``pi`` the disagreement rate; each gets an exact (Clopper-Pearson) interval at level
  ``1 - alpha / 2`` and the drop's interval is the range of the product over both, a
  Bonferroni combination whose coverage is at least the stated level, and usually more
  (wider than an exact joint interval would be). It never collapses to [0, 0] when the
  models happen to agree on every sample of a small test set. The p-value is McNemar's
  exact (binomial) test of "no difference"; only that part is exact.
* ``"bootstrap"``: resample the samples (pairs kept together) with a fixed seed and take
  percentiles of the drop (widened to include the point estimate should a skewed metric
  put it outside). Works for any metric, not only per-sample correctness.

The binomial tail, Clopper-Pearson and the seeded bootstrap live in
:mod:`tfcompress.testing.estimates`, with :class:`~tfcompress.testing.estimates.MetricEstimate`
(one model's value and its interval); their names are re-exported here. Pure numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from tfcompress.errors import InvalidInputError
from tfcompress.testing.estimates import (
    MetricEstimate,
    as_correctness,
    binomial_cdf,
    bootstrap_estimate,
    bootstrap_interval,
    check_confidence,
    check_count,
    clopper_pearson,
    contain,
    draw_resamples,
    percentile_interval,
    point_estimate,
    proportion_estimate,
)

__all__ = [
    "INTERVAL_METHODS",
    "MetricEstimate",
    "PairedDifference",
    "binomial_cdf",
    "bootstrap_estimate",
    "bootstrap_interval",
    "clopper_pearson",
    "mcnemar_exact",
    "paired_difference",
    "paired_metric_difference",
    "point_estimate",
    "proportion_estimate",
]

INTERVAL_METHODS = ("mcnemar", "bootstrap")


@dataclass(frozen=True)
class PairedDifference:
    """The drop of a candidate against a reference on the same samples, with its interval.

    Attributes:
        samples: Number of paired samples.
        reference_score: Reference metric on all samples.
        candidate_score: Candidate metric on all samples.
        drop: ``reference_score - candidate_score`` (positive = the candidate lost accuracy);
            for a lower-is-better metric (:func:`paired_metric_difference` with
            ``higher_is_better=False``) ``candidate_score - reference_score``: positive is
            always worse.
        ci_low: Lower bound of the two-sided interval of the drop.
        ci_high: Upper bound of the interval.
        confidence: Two-sided confidence level of the interval (each bound is one-sided at
            ``(1 + confidence) / 2``).
        method: ``"mcnemar"`` (McNemar's exact p-value with a conservative Bonferroni
            interval from two Clopper-Pearson intervals) or ``"bootstrap"``.
        reference_only: Samples only the reference gets right (``b``); None for metrics that
            are not per-sample correctness.
        candidate_only: Samples only the candidate gets right (``c``).
        p_value: McNemar's exact two-sided p-value for "no difference", when defined.
        resamples: Bootstrap resamples (None for McNemar).
        seed: Bootstrap seed (None for McNemar).
    """

    samples: int
    reference_score: float
    candidate_score: float
    drop: float
    ci_low: float
    ci_high: float
    confidence: float
    method: str
    reference_only: int | None = None
    candidate_only: int | None = None
    p_value: float | None = None
    resamples: int | None = None
    seed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports."""
        return asdict(self)

    def __str__(self) -> str:
        pct = round(self.confidence * 100, 2)
        text = (
            f"drop {self.drop * 100:+.2f} pt, {pct:g}% interval "
            f"[{self.ci_low * 100:+.2f}, {self.ci_high * 100:+.2f}] pt ({self.method}, "
            f"{self.samples} samples)"
        )
        if self.reference_only is not None:
            text += (
                f"; only reference right: {self.reference_only}, "
                f"only candidate right: {self.candidate_only}"
            )
        return text


def mcnemar_exact(reference_only: int, candidate_only: int) -> float:
    """McNemar's exact two-sided p-value from the discordant counts ``b`` and ``c``.

    Under "no difference" ``b ~ Binomial(b + c, 1/2)``; the p-value doubles the smaller tail.

    Args:
        reference_only: Samples only the reference gets right (``b``).
        candidate_only: Samples only the candidate gets right (``c``).

    Returns:
        The p-value in [0, 1]; 1.0 when there are no discordant pairs.

    Example:
        >>> round(mcnemar_exact(6, 1), 12)  # 2 * (1 + 7) / 2**7
        0.125
    """
    check_count(reference_only, "reference_only")
    check_count(candidate_only, "candidate_only")
    n = reference_only + candidate_only
    if n == 0:
        return 1.0
    return min(1.0, 2.0 * binomial_cdf(min(reference_only, candidate_only), n, 0.5))


def paired_difference(
    reference_correct: np.ndarray,
    candidate_correct: np.ndarray,
    *,
    confidence: float = 0.95,
    method: str = "mcnemar",
    resamples: int = 2000,
    seed: int = 0,
) -> PairedDifference:
    """Accuracy drop between two models from their per-sample correctness on the same samples.

    Args:
        reference_correct: Booleans (or 0/1), one per sample: was the reference right?
        candidate_correct: The same for the candidate, in the same sample order.
        confidence: Two-sided level of the interval.
        method: ``"mcnemar"`` (unconditional, conservative: two Clopper-Pearson intervals
            combined with a Bonferroni bound, coverage >= ``confidence``) or ``"bootstrap"``.
        resamples: Bootstrap resamples (``"bootstrap"`` only).
        seed: Bootstrap seed (``"bootstrap"`` only).

    Returns:
        Point estimate, interval, discordant counts and McNemar's exact p-value.

    Raises:
        InvalidInputError: Vectors of different lengths, empty, not 0/1, or bad options.

    Example:
        >>> ref = np.array([1] * 12 + [0] * 1 + [1] * 6 + [0] * 1, bool)
        >>> cand = np.array([1] * 12 + [1] * 1 + [0] * 6 + [0] * 1, bool)
        >>> result = paired_difference(ref, cand)
        >>> result.drop, result.reference_only, result.candidate_only, round(result.p_value, 9)
        (0.25, 6, 1, 0.125)
    """
    check_confidence(confidence)
    method = _check_method(method)
    ref = as_correctness(reference_correct, "reference_correct")
    cand = as_correctness(candidate_correct, "candidate_correct")
    if ref.shape != cand.shape:
        raise InvalidInputError(
            f"reference has {ref.size} samples but candidate has {cand.size}; score both "
            "models on the same samples."
        )
    n = int(ref.size)
    b = int(np.count_nonzero(ref & ~cand))
    c = int(np.count_nonzero(~ref & cand))
    ref_score, cand_score = float(ref.mean()), float(cand.mean())
    drop = (b - c) / n
    if method == "mcnemar":
        low, high = _unconditional_mcnemar_interval(b, c, n, confidence)
        extra: dict[str, Any] = {}
    else:
        if resamples < 1:
            raise InvalidInputError(f"resamples must be at least 1, got {resamples}.")
        diff = ref.astype(np.int8) - cand.astype(np.int8)
        values = draw_resamples(n, resamples, seed, lambda block: diff[block].mean(axis=1))
        low, high = contain(percentile_interval(values, confidence), drop)
        extra = {"resamples": resamples, "seed": seed}
    return PairedDifference(
        n,
        ref_score,
        cand_score,
        drop,
        low,
        high,
        confidence,
        method,
        b,
        c,
        mcnemar_exact(b, c),
        **extra,
    )


def paired_metric_difference(
    reference_score: Callable[[np.ndarray], float],
    candidate_score: Callable[[np.ndarray], float],
    samples: int,
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    higher_is_better: bool = True,
) -> PairedDifference:
    """Drop of any metric (not per-sample correctness) with a paired bootstrap interval.

    Args:
        reference_score: Metric of the reference on the samples at the given indices.
        candidate_score: Metric of the candidate on the samples at the given indices.
        samples: Number of paired samples.
        confidence: Two-sided level.
        resamples: Bootstrap resamples.
        seed: Bootstrap seed.
        higher_is_better: The metric's direction. The drop is always the worsening, positive
            when the candidate is worse: ``reference - candidate`` for scores such as
            accuracy or mIoU, ``candidate - reference`` for errors such as mse (False).

    Returns:
        Point estimate and bootstrap interval (no discordant counts or p-value).

    Raises:
        InvalidInputError: See :func:`bootstrap_interval`.

    Example:
        >>> f1 = lambda idx: my_f1(labels[idx], ref_out[idx])  # doctest: +SKIP
    """
    sign = 1.0 if higher_is_better else -1.0
    everything = np.arange(samples)
    ref, cand = float(reference_score(everything)), float(candidate_score(everything))
    low, high = bootstrap_interval(
        lambda idx: sign * (float(reference_score(idx)) - float(candidate_score(idx))),
        samples,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
    )
    drop = sign * (ref - cand) + 0.0
    low, high = contain((low, high), drop)
    return PairedDifference(
        samples,
        ref,
        cand,
        drop,
        low,
        high,
        confidence,
        "bootstrap",
        resamples=resamples,
        seed=seed,
    )


def _unconditional_mcnemar_interval(
    b: int, c: int, n: int, confidence: float
) -> tuple[float, float]:
    # drop = (2 * theta - 1) * pi, with theta = P(reference right | models disagree) and
    # pi = P(models disagree). Conditioning on the observed b + c would treat pi as known and
    # give [0, 0] whenever the models agree on every sample, however few samples there are.
    # Bounding both at level 1 - alpha / 2 (Bonferroni) keeps joint coverage >= confidence:
    # a conservative interval, not an exact one (the two exact intervals are only combined).
    level = 1.0 - (1.0 - confidence) / 2.0
    theta_low, theta_high = clopper_pearson(b, b + c, confidence=level)
    pi_low, pi_high = clopper_pearson(b + c, n, confidence=level)
    slope_low, slope_high = 2.0 * theta_low - 1.0, 2.0 * theta_high - 1.0
    low = slope_low * (pi_high if slope_low < 0 else pi_low)
    high = slope_high * (pi_high if slope_high > 0 else pi_low)
    return low + 0.0, high + 0.0  # + 0.0 turns -0.0 into 0.0


def _check_method(method: str) -> str:
    if method not in INTERVAL_METHODS:
        raise InvalidInputError(
            f"unknown interval method {method!r}; choose one of {', '.join(INTERVAL_METHODS)}."
        )
    return method
