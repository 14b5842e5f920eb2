"""Latency measurement with the method of LiteRT's ``benchmark_model``, and its statistics."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from tfcompress.errors import InvalidInputError


@dataclass(frozen=True)
class LatencyStats:
    """Statistics of timed runs, in milliseconds.

    ``std`` is the population standard deviation (as ``benchmark_model`` reports it);
    percentiles interpolate linearly between the two nearest runs. A row's interval is
    ``mean`` +- ``std`` (:attr:`interval`), as ``benchmark_model`` prints it; a median
    always lies within one standard deviation of the mean. Two rows agree when each median
    lies in the other's interval (:meth:`agrees_with`): that is how a row measured on a
    device through ``benchmark --on`` is compared with a local one. (A confidence interval
    of the median from one row's runs is far narrower than what differs between two
    processes timing the same file, 0.3% on a 64 us CNN: ``benchmarks/remote_overhead.py``.)
    """

    runs: int
    mean: float
    std: float
    min: float
    p50: float
    p90: float
    p99: float
    max: float

    @property
    def interval(self) -> tuple[float, float]:
        """``(mean - std, mean + std)``: the spread of the runs, in ms."""
        return self.mean - self.std, self.mean + self.std

    def agrees_with(self, other: LatencyStats) -> bool:
        """Whether each median lies in the other's :attr:`interval` (mean +- std)."""
        low, high = self.interval
        their_low, their_high = other.interval
        return low <= other.p50 <= high and their_low <= self.p50 <= their_high

    def to_dict(self) -> dict[str, float | int]:
        """Plain data (ms), rounded to the microsecond."""
        return {k: (v if k == "runs" else round(v, 4)) for k, v in asdict(self).items()}

    def __str__(self) -> str:
        return (
            f"{self.p50:.3f} ms median ({self.mean:.3f} ± {self.std:.3f} mean, "
            f"{self.min:.3f}-{self.max:.3f}, p90 {self.p90:.3f}, p99 {self.p99:.3f}; "
            f"{self.runs} runs)"
        )


@dataclass(frozen=True)
class Timing:
    """One latency measurement: the first call after loading, and the steady state."""

    first_ms: float
    warmup_runs: int
    latency: LatencyStats
    seconds: float


def summarize(seconds: Sequence[float]) -> LatencyStats:
    """Statistics of run times given in seconds (one per run), reported in milliseconds.

    Raises:
        InvalidInputError: No durations.

    Example:
        >>> summarize([0.004, 0.001, 0.003, 0.002]).mean
        2.5
    """
    if len(seconds) == 0:
        raise InvalidInputError("no timed runs to summarize; run at least once.")
    ms = np.asarray(seconds, dtype=np.float64) * 1000.0
    p50, p90, p99 = np.percentile(ms, [50, 90, 99])
    return LatencyStats(
        runs=int(ms.size),
        mean=float(ms.mean()),
        std=float(ms.std()),
        min=float(ms.min()),
        p50=float(p50),
        p90=float(p90),
        p99=float(p99),
        max=float(ms.max()),
    )


def measure(
    call: Callable[[], object],
    *,
    runs: int = 50,
    min_seconds: float = 1.0,
    warmup_runs: int = 1,
    warmup_seconds: float = 0.5,
    max_seconds: float = 150.0,
    clock: Callable[[], float] = time.perf_counter,
) -> Timing:
    """Time ``call`` like ``benchmark_model``: warm up, then at least N runs and T seconds.

    The first call is timed on its own (first-inference cost: lazy allocation, delegate
    preparation, cache misses). Warm-up continues until ``warmup_runs`` calls and
    ``warmup_seconds`` have passed. Timed runs continue until both ``runs`` calls and
    ``min_seconds`` have passed, but stop at ``max_seconds`` once ``runs`` are done.
    ``call`` runs the model once (:meth:`tfcompress.runtime.Runner.bind`); ``clock`` is a
    monotonic clock in seconds (tests inject a fake one).

    Raises:
        InvalidInputError: ``runs`` or ``warmup_runs`` below 1, or negative times.

    Example:
        >>> measure(lambda: None, runs=3, min_seconds=0, warmup_seconds=0).latency.runs
        3
    """
    if runs < 1 or warmup_runs < 1:
        raise InvalidInputError(f"runs and warmup_runs must be >= 1, got {runs}/{warmup_runs}.")
    if min(min_seconds, warmup_seconds, max_seconds) < 0:
        raise InvalidInputError("min_seconds, warmup_seconds and max_seconds must be >= 0.")
    start = clock()
    call()
    first = clock() - start
    warmups, warm_start = 1, start
    while warmups < warmup_runs or clock() - warm_start < warmup_seconds:
        call()
        warmups += 1
    durations: list[float] = []
    began = clock()
    while True:
        before = clock()
        call()
        after = clock()
        durations.append(after - before)
        elapsed = after - began
        if len(durations) >= runs and (elapsed >= min_seconds or elapsed >= max_seconds):
            break
    return Timing(first * 1000.0, warmups, summarize(durations), clock() - began)
