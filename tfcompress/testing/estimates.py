"""Intervals of one measured quantity, and the bootstrap and binomial machinery behind them.

* a rate (e.g. top-1 agreement): an exact Clopper-Pearson interval (:func:`clopper_pearson`,
  :func:`proportion_estimate`), from the binomial tail summed in log space
  (:func:`binomial_cdf`) and inverted by bisection;
* any metric (snr, cosine, a drop): a percentile interval over bootstrap resamples drawn with
  a fixed seed (:func:`bootstrap_interval`, :func:`bootstrap_estimate`), so it is the same on
  every run and machine;
* a maximum (max_abs): no interval (:func:`point_estimate`).

:class:`MetricEstimate` is a value with its interval. The paired drops of
:mod:`tfcompress.testing.stats` build on the same machinery. Pure numpy.

Example:
    >>> estimate = proportion_estimate(np.array([True, True, False, True]))
    >>> estimate.value, estimate.method
    (0.75, 'clopper-pearson')
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from tfcompress.errors import InvalidInputError

__all__ = [
    "MetricEstimate",
    "binomial_cdf",
    "bootstrap_estimate",
    "bootstrap_interval",
    "clopper_pearson",
    "point_estimate",
    "proportion_estimate",
]

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
    """Exact two-sided interval of a binomial proportion.

    Args:
        successes: Observed successes ``k``.
        trials: Trials ``n`` (0 gives the uninformative interval (0, 1)).
        confidence: Two-sided level; each tail holds ``(1 - confidence) / 2``.

    Returns:
        ``(low, high)`` with ``P(X >= k; low) = P(X <= k; high) = (1 - confidence) / 2``.

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
    """Percentile interval of ``statistic`` over paired bootstrap resamples.

    Each resample draws ``samples`` indices with replacement from a generator seeded with
    ``seed``, so the interval is the same on every run and machine.

    Args:
        statistic: Maps an index array (shape ``(samples,)``) to a number, e.g. the drop of
            both models on those samples.
        samples: Number of paired samples.
        confidence: Two-sided level.
        resamples: Bootstrap resamples.
        seed: Seed of ``numpy.random.default_rng``.

    Returns:
        ``(low, high)``: the lower ``(1 - confidence) / 2`` quantile (rounded down to an
        observed value) and the upper one (rounded up).

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
    if resamples < 1:
        raise InvalidInputError(f"resamples must be at least 1, got {resamples}.")
    values = draw_resamples(
        samples, resamples, seed, lambda block: [statistic(row) for row in block]
    )
    return percentile_interval(values, confidence)


@dataclass(frozen=True)
class MetricEstimate:
    """One metric of one model (e.g. a fidelity value), with its interval where it has one.

    Attributes:
        samples: Samples the value was measured on.
        value: The metric on all samples.
        ci_low: Lower bound of the two-sided interval; None when there is none.
        ci_high: Upper bound; None when there is none.
        confidence: Two-sided level of the interval.
        method: ``"clopper-pearson"`` (exact, a proportion), ``"bootstrap"`` or ``"none"``.
        successes: Samples counted as successes (Clopper-Pearson only).
        resamples: Bootstrap resamples (bootstrap only).
        seed: Bootstrap seed (bootstrap only).

    Example:
        >>> proportion_estimate(np.array([True, True, False, True])).value
        0.75
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
    """A rate (e.g. top-1 agreement) with its exact Clopper-Pearson interval.

    Args:
        successes: Booleans (or 0/1), one per sample.
        confidence: Two-sided level.

    Returns:
        The share of successes and its interval.

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

    The interval is widened to hold the point estimate, as for the paired drops. Infinite
    values (an snr of identical outputs) are kept as they are.

    Args:
        score: Metric on the samples at the given indices.
        samples: Number of samples.
        confidence: Two-sided level.
        resamples: Bootstrap resamples.
        seed: Bootstrap seed.

    Returns:
        The value on all samples and its interval.

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

    Example:
        >>> point_estimate(lambda i: 0.5, 3).method
        'none'
    """
    check_confidence(confidence)
    return MetricEstimate(samples, float(score(np.arange(samples))), None, None, confidence, "none")


def draw_resamples(
    samples: int, resamples: int, seed: int, evaluate: Callable[[np.ndarray], Any]
) -> np.ndarray:
    """``evaluate`` on every seeded bootstrap resample, drawn in blocks to bound memory.

    Args:
        samples: Samples to draw from (and per resample).
        resamples: Resamples in all.
        seed: Seed of ``numpy.random.default_rng``.
        evaluate: Maps a block of resamples, an index array ``(block, samples)``, to one
            value per resample.

    Returns:
        The ``resamples`` values, as float64.

    Example:
        >>> draw_resamples(3, 2, 0, lambda block: block.min(axis=1)).shape
        (2,)
    """
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

    Example:
        >>> as_correctness(np.array([1, 0]), "hits")
        array([ True, False])
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
    """Refuse a ``value`` that is not a count (an integer >= 0).

    Raises:
        InvalidInputError: Not a whole number >= 0 (``what`` names it).
    """
    if int(value) != value or value < 0:
        raise InvalidInputError(f"{what} must be a count (integer >= 0), got {value!r}.")


def check_confidence(confidence: float) -> None:
    """Refuse a two-sided confidence level outside (0, 1).

    Raises:
        InvalidInputError: ``confidence`` is not strictly between 0 and 1.
    """
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
