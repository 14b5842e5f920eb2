"""Measure one artifact on one backend: a runner per thread count, a timed row per batch size.

:mod:`tfcompress.bench.harness` plans the work (which artifacts, on which backends, with which
data); this module turns one planned (artifact, backend) pair into report rows. What fails
inside a row becomes that row's ``error: ...`` status and never stops the other rows.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tfcompress.bench.memory import current_rss_mb, growth_mb, peak_rss_mb
from tfcompress.bench.result import BenchmarkRow
from tfcompress.bench.size import SizeInfo
from tfcompress.bench.stats import measure
from tfcompress.data import Dataset
from tfcompress.errors import (
    BackendUnavailableError,
    SettingUnavailableError,
    TFCompressError,
)
from tfcompress.runtime import create_runner

logger = logging.getLogger(__name__)

# What can fail inside one row without being a bug of tfcompress: our typed errors, and the
# native runtimes' own (RuntimeError/ValueError from LiteRT and ORT, OSError, out of memory).
ROW_ERRORS = (TFCompressError, RuntimeError, ValueError, OSError, MemoryError)


@dataclass(frozen=True)
class Plan:
    """What to measure for every artifact: backends, threads, batch sizes, timing, options."""

    backends: tuple[str, ...]
    threads: tuple[int, ...]
    batch_sizes: tuple[int, ...]
    timing: dict[str, float]
    options: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Artifact:
    """One loaded artifact, sized and matched with its data, ready to be measured."""

    model: Any
    size: SizeInfo
    dataset: Dataset
    load_ms: float | None  # share of init before the runner; None: unknown (loaded Keras)
    converted: dict[str, Any] = field(default_factory=dict)  # into its rows' backend_details
    score: Callable[[dict[str, np.ndarray]], float] | None = None  # the accuracy column


def backend_rows(
    name: str,
    artifact: Artifact,
    backend: str,
    plan: Plan,
) -> tuple[list[BenchmarkRow], int]:
    """Rows for ``artifact`` on ``backend``: one runner per thread count, one row per batch.

    Accuracy is measured once, on the first runner, when the artifact has a score (data
    with labels for the scored output). A backend that
    is unavailable here gives one ``unavailable: ...`` row; a thread count it cannot run
    gives that row only; any other failure is the row's ``error: ...`` status.

    Returns:
        The rows and how many labelled samples the accuracy was measured on (0: none).

    Example:
        >>> rows, samples = backend_rows("m.tflite", artifact, "cpu", plan)  # doctest: +SKIP
    """
    model, size, dataset = artifact.model, artifact.size, artifact.dataset
    rows: list[BenchmarkRow] = []
    accuracy: float | None = None
    samples = 0
    options = plan.options.get(backend, {})
    for threads in plan.threads:
        base = {"artifact": name, "backend": backend, "threads": threads, "size": size}
        try:
            rss_before = current_rss_mb()
            start = time.perf_counter()
            runner = create_runner(model, backend=backend, threads=threads, **options)
            created_ms = (time.perf_counter() - start) * 1000.0
            # The row's init is everything from the artifact as given to a ready runner.
            load_ms = artifact.load_ms
            init_ms = None if load_ms is None else load_ms + created_ms
        except SettingUnavailableError as error:
            # The backend runs here, not at this thread count (TensorFlow's pools are fixed
            # per process): say so on this row and measure the other thread counts.
            logger.info("%s on %s (%d threads): %s", name, backend, threads, error)
            rows.append(BenchmarkRow(**base, batch=None, status=f"unavailable: {error}"))
            continue
        except BackendUnavailableError as error:
            logger.info("%s on %s: %s", name, backend, error)
            return [BenchmarkRow(name, backend, None, None, f"unavailable: {error}", size)], 0
        except ROW_ERRORS as error:
            logger.debug("%s on %s (%d threads): %s", name, backend, threads, error)
            rows.append(BenchmarkRow(**base, batch=None, status=row_status(error)))
            continue
        with runner:
            if accuracy is None and artifact.score is not None:
                try:
                    accuracy = float(artifact.score(runner.run(dataset.x)))
                    samples = len(dataset)
                except ROW_ERRORS as error:
                    logger.debug("%s on %s: accuracy failed: %s", name, backend, error)
                    rows.append(BenchmarkRow(**base, batch=None, status=row_status(error)))
                    return rows, 0
            for batch in plan.batch_sizes:
                row = _timed_row(runner, dataset, batch, base, init_ms, accuracy, plan)
                if row.ok:  # this row's own memory: what the process gained since its runner
                    row = replace(row, rss_growth_mb=growth_mb(rss_before, current_rss_mb()))
                rows.append(row)
    if artifact.converted:  # every row of a converted artifact says what actually ran
        rows = [replace(r, details={**r.details, **artifact.converted}) for r in rows]
    return rows, samples


def _timed_row(
    runner: Any,
    dataset: Dataset,
    batch: int,
    base: dict[str, Any],
    init_ms: float | None,
    accuracy: float | None,
    plan: Plan,
) -> BenchmarkRow:
    try:
        x = _batch_of(dataset.x, batch)
        call = runner.bind(x)
        timing = measure(call, **plan.timing)
        details = runner.details()
    except ROW_ERRORS as error:
        logger.debug("%s on %s (batch %d): %s", base["artifact"], base["backend"], batch, error)
        return BenchmarkRow(**base, batch=batch, status=row_status(error), init_ms=init_ms)
    return BenchmarkRow(
        **base,
        batch=batch,
        init_ms=init_ms,
        first_inference_ms=timing.first_ms,
        latency=timing.latency,
        accuracy=accuracy,
        process_peak_rss_mb=peak_rss_mb(),
        details=details,
    )


def _batch_of(x: np.ndarray | dict[str, np.ndarray], batch: int) -> Any:
    """The first ``batch`` samples (of every input), repeated when the data holds fewer."""
    if isinstance(x, dict):
        return {name: _batch_of(array, batch) for name, array in x.items()}
    if len(x) >= batch:
        return np.ascontiguousarray(x[:batch])
    out = np.empty((batch, *x.shape[1:]), x.dtype)  # MemoryError at once when too large
    for start in range(0, batch, len(x)):
        out[start : start + len(x)] = x[: batch - start]
    return out


def row_status(error: BaseException) -> str:
    r"""The ``error: ...`` status of a row that failed with ``error``, on one line.

    Example:
        >>> row_status(RuntimeError("failed to\nprepare"))
        'error: RuntimeError: failed to prepare'
    """
    if isinstance(error, TFCompressError):
        return f"error: {error}"
    message = " ".join(str(error).split()) or "no message"
    return f"error: {type(error).__name__}: {message}"
