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

One model's value (:class:`MetricEstimate`) gets an exact Clopper-Pearson interval when it
is a rate (e.g. top-1 agreement; the binomial tail summed in log space and inverted by
bisection), a seeded percentile bootstrap for any other metric (snr, cosine), or none for a
maximum (max_abs). Every bootstrap draws with a fixed seed, so an interval is the same on every
run and machine. Pure numpy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from tfcompress.errors import InvalidInputError

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
_CHUNK = 256  # bootstrap resamples drawn per block (bounds memory at 256 x n indices)


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in log space (exact to float precision).

    Example:
        >>> round(binomial_cdf(1, 7, 0.5), 6)  # (1 + 7) / 128
        0.0625
    """
    if k < 0:
        return 0.0
    if k >= n or p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    ks = np.arange(k + 1, dtype=np.float64)
    steps = np.log(np.arange(n, n - k, -1, dtype=np.float64)) - np.log(ks[1:])
    log_comb = np.concatenate([[0.0], np.cumsum(steps)])
    logs = log_comb + ks * math.log(p) + (n - ks) * math.log1p(-p)
    peak = float(logs.max())
    return float(min(1.0, math.exp(peak) * float(np.exp(logs - peak).sum())))


def clopper_pearson(
    successes: int, trials: int, *, confidence: float = 0.95
) -> tuple[float, float]:
    """Exact two-sided interval ``(low, high)`` of a binomial proportion ``k / n``.

    ``P(X >= k; low) = P(X <= k; high) = (1 - confidence) / 2``; 0 trials give (0, 1).

    Raises:
        InvalidInputError: Counts out of range or confidence outside (0, 1).

    Example:
        >>> low, high = clopper_pearson(5, 5)
        >>> round(low, 6), high  # 0.025 ** (1 / 5)
        (0.478176, 1.0)
    """
    check_count(successes, "successes")
    check_count(trials, "trials")
    check_confidence(confidence)
    if successes > trials:
        raise InvalidInputError(f"successes ({successes}) cannot exceed trials ({trials}).")
    tail = (1.0 - confidence) / 2.0
    low = 0.0
    if successes > 0:  # P(X >= k; p) = 1 - cdf(k - 1) rises with p
        low = _bisect(lambda p: 1.0 - binomial_cdf(successes - 1, trials, p) - tail)
    high = 1.0
    if successes < trials:  # cdf(k; p) falls with p
        high = _bisect(lambda p: tail - binomial_cdf(successes, trials, p))
    return low, high


def bootstrap_interval(
    statistic: Callable[[np.ndarray], float],
    samples: int,
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile interval ``(low, high)`` of ``statistic`` over paired bootstrap resamples.

    ``statistic`` maps an index array of shape ``(samples,)`` to a number (e.g. the drop of
    both models on those samples). Each resample draws ``samples`` indices with replacement
    from ``numpy.random.default_rng(seed)``, so the interval is the same on every run and
    machine; the bounds are the ``(1 - confidence) / 2`` quantiles, rounded out to observed
    values.

    Raises:
        InvalidInputError: No samples, fewer than one resample, or confidence outside (0, 1).

    Example:
        >>> d = np.array([1.0, 0.0, 0.0, 0.0])
        >>> bootstrap_interval(lambda i: float(d[i].mean()), 4, resamples=10000)
        (0.0, 0.75)
    """
    check_confidence(confidence)
    if samples < 1:
        raise InvalidInputError("bootstrap needs at least one sample.")
    values = draw_resamples(
        samples, resamples, seed, lambda block: [statistic(row) for row in block]
    )
    return percentile_interval(values, confidence)


@dataclass(frozen=True)
class MetricEstimate:
    """One metric of one model (e.g. a fidelity value), with its interval where it has one.

    ``value`` is the metric on all ``samples``; ``ci_low``/``ci_high`` bound its two-sided
    interval at ``confidence`` (None for ``method`` ``"none"``), ``method`` is
    ``"clopper-pearson"`` (with ``successes``), ``"bootstrap"`` (with ``resamples``, ``seed``)
    or ``"none"``.
    """

    samples: int
    value: float
    ci_low: float | None
    ci_high: float | None
    confidence: float
    method: str
    successes: int | None = None
    resamples: int | None = None
    seed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports (non-finite numbers as they are; see the judge)."""
        return asdict(self)


def proportion_estimate(successes: np.ndarray, *, confidence: float = 0.95) -> MetricEstimate:
    """A rate (e.g. top-1 agreement) of booleans (or 0/1) with its Clopper-Pearson interval.

    Raises:
        InvalidInputError: Not a non-empty 0/1 vector, or confidence outside (0, 1).

    Example:
        >>> estimate = proportion_estimate(np.array([True] * 5))
        >>> estimate.value, round(estimate.ci_low, 6), estimate.ci_high
        (1.0, 0.478176, 1.0)
    """
    hits = as_correctness(successes, "successes")
    k, n = int(np.count_nonzero(hits)), int(hits.size)
    low, high = clopper_pearson(k, n, confidence=confidence)
    return MetricEstimate(n, k / n, low, high, confidence, "clopper-pearson", successes=k)


def bootstrap_estimate(
    score: Callable[[np.ndarray], float],
    samples: int,
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> MetricEstimate:
    """Any metric of one model (snr, cosine...) with a seeded percentile bootstrap interval.

    ``score`` is the metric on the samples at the given indices. The interval (see
    :func:`bootstrap_interval`) is widened to hold the value on all samples, as for the paired
    drops. Infinite values (an snr of identical outputs) are kept as they are.

    Raises:
        InvalidInputError: See :func:`bootstrap_interval`.

    Example:
        >>> values = np.array([1.0, 0.0, 0.0, 0.0])
        >>> estimate = bootstrap_estimate(lambda i: float(values[i].mean()), 4, resamples=10000)
        >>> estimate.value, estimate.ci_low, estimate.ci_high
        (0.25, 0.0, 0.75)
    """
    low, high = bootstrap_interval(
        lambda idx: float(score(idx)),
        samples,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
    )
    value = float(score(np.arange(samples)))
    if not math.isnan(value):
        low, high = contain((low, high), value)
    return MetricEstimate(
        samples, value, low, high, confidence, "bootstrap", resamples=resamples, seed=seed
    )


def point_estimate(
    score: Callable[[np.ndarray], float], samples: int, *, confidence: float = 0.95
) -> MetricEstimate:
    """A metric without an interval, such as a maximum (``max_abs``): no useful bootstrap.

    A bootstrap resample can only repeat or leave out the worst sample, so its "interval" of a
    maximum says nothing about unseen samples; the value is reported alone.
    """
    check_confidence(confidence)
    return MetricEstimate(samples, float(score(np.arange(samples))), None, None, confidence, "none")


def draw_resamples(
    samples: int, resamples: int, seed: int, evaluate: Callable[[np.ndarray], Any]
) -> np.ndarray:
    """``evaluate`` on every seeded bootstrap resample, drawn in blocks to bound memory.

    ``evaluate`` maps a block of resamples, an index array ``(block, samples)``, to one value
    per resample; the ``resamples`` values come back as float64.
    """
    if resamples < 1:
        raise InvalidInputError(f"resamples must be at least 1, got {resamples}.")
    rng = np.random.default_rng(seed)
    values: list[np.ndarray] = []
    for start in range(0, resamples, _CHUNK):
        block = rng.integers(0, samples, size=(min(_CHUNK, resamples - start), samples))
        values.append(np.asarray(evaluate(block), dtype=np.float64))
    return np.concatenate(values)


def percentile_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """The two-sided percentile interval of bootstrap ``values``, rounded out to observed values.

    Example:
        >>> percentile_interval(np.array([0.0, 1.0, 2.0, 3.0, 4.0]), 0.5)
        (1.0, 3.0)
    """
    tail = (1.0 - confidence) / 2.0
    low = float(np.quantile(values, tail, method="lower"))
    high = float(np.quantile(values, 1.0 - tail, method="higher"))
    return low + 0.0, high + 0.0


def contain(interval: tuple[float, float], point: float) -> tuple[float, float]:
    """``interval`` widened to hold ``point``, its point estimate.

    A percentile interval of a skewed statistic can miss the point estimate; widening it
    keeps the gate's modes ordered (proven passes => strict passes => tolerant passes).

    Example:
        >>> contain((0.1, 0.3), 0.05)
        (0.05, 0.3)
    """
    return min(interval[0], point), max(interval[1], point)


def as_correctness(values: np.ndarray, what: str) -> np.ndarray:
    """A non-empty 1-D vector of booleans or 0/1 (one per sample) as booleans.

    Raises:
        InvalidInputError: Not 1-D, empty, or not booleans/0/1 (``what`` names it).
    """
    array = np.asarray(values)
    if array.ndim != 1 or array.size == 0:
        raise InvalidInputError(
            f"{what} must be a non-empty 1-D vector (one entry per sample), got shape "
            f"{array.shape}."
        )
    if array.dtype != np.bool_:
        if array.dtype.kind not in "iuf" or not np.isin(array, (0, 1)).all():
            raise InvalidInputError(f"{what} must hold booleans or 0/1, got {array.dtype}.")
        array = array.astype(bool)
    return array


def check_count(value: int, what: str) -> None:
    """Refuse (InvalidInputError naming ``what``) a ``value`` that is not an integer >= 0."""
    if int(value) != value or value < 0:
        raise InvalidInputError(f"{what} must be a count (integer >= 0), got {value!r}.")


def check_confidence(confidence: float) -> None:
    """Refuse (InvalidInputError) a two-sided confidence level outside (0, 1)."""
    if not 0.0 < confidence < 1.0:
        raise InvalidInputError(
            f"confidence must lie strictly between 0 and 1 (e.g. 0.95), got {confidence!r}."
        )


def _bisect(increasing: Callable[[float], float]) -> float:
    low, high = 0.0, 1.0
    for _ in range(80):  # 2**-80 is far below float precision of a proportion
        middle = (low + high) / 2.0
        if increasing(middle) < 0.0:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


@dataclass(frozen=True)
class PairedDifference:
    """The drop of a candidate against a reference on the same samples, with its interval.

    ``drop`` is ``reference_score - candidate_score`` (positive = the candidate lost
    accuracy); for a lower-is-better metric (:func:`paired_metric_difference` with
    ``higher_is_better=False``) ``candidate_score - reference_score``: positive is always
    worse. ``ci_low``/``ci_high`` bound it at two-sided ``confidence`` by ``method``
    (``"mcnemar"`` or ``"bootstrap"``, see the module). ``reference_only`` (``b``) and
    ``candidate_only`` (``c``) count the samples only one model gets right, with McNemar's
    exact ``p_value``; None where the metric is not per-sample correctness. ``resamples`` and
    ``seed`` are the bootstrap's (None for McNemar).
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

    Under "no difference" ``b ~ Binomial(b + c, 1/2)``; the p-value doubles the smaller tail
    (1.0 when there are no discordant pairs).

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

    Each correctness vector holds booleans (or 0/1), one per sample in the same order.
    ``method`` is ``"mcnemar"`` or ``"bootstrap"`` (with ``resamples`` and ``seed``; see the
    module); the result holds the point estimate, the interval, the discordant counts and
    McNemar's exact p-value.

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
    if method not in INTERVAL_METHODS:
        raise InvalidInputError(
            f"unknown interval method {method!r}; choose one of {', '.join(INTERVAL_METHODS)}."
        )
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

    Each score function gives its model's metric on the samples at the given indices. The
    drop is always the worsening, positive when the candidate is worse: ``reference -
    candidate`` for scores such as accuracy or mIoU, ``candidate - reference`` for errors
    such as mse (``higher_is_better=False``). No discordant counts or p-value.

    Raises:
        InvalidInputError: See :func:`bootstrap_interval`.
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
