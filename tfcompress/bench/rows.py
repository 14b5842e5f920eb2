"""Measure one artifact on one backend: a runner per thread count, a timed row per batch size.

:mod:`tfcompress.bench.harness` plans the work (which artifacts, on which backends, with which
data); this module turns one planned (artifact, backend) pair into report rows. What fails
inside a row becomes that row's ``error: ...`` status and never stops the other rows. A
``.tflite`` or ``.onnx`` runner lives in a worker process
(:class:`~tfcompress.bench.isolation.IsolatedRunner`) and is timed there, so a native crash
or a measurement past the plan's time limit is such an error too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tfcompress.bench.config import BenchmarkConfig
from tfcompress.bench.isolation import IsolatedRunner, WorkerTransferError
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
from tfcompress.models.feeding import FeedLayout
from tfcompress.models.signature import model_signature
from tfcompress.runtime import create_runner
from tfcompress.runtime.base import Runner

logger = logging.getLogger(__name__)

# What can fail inside one row without being a bug of tfcompress: our typed errors, and the
# native runtimes' own (RuntimeError/ValueError from LiteRT and ORT, OSError, out of memory).
ROW_ERRORS = (TFCompressError, RuntimeError, ValueError, OSError, MemoryError)


@dataclass(frozen=True)
class Artifact:
    """One loaded artifact, sized and matched with its data, ready to be measured."""

    model: Any
    size: SizeInfo
    dataset: Dataset
    load_ms: float | None  # share of init before the runner; None: unknown (loaded Keras)
    converted: dict[str, Any] = field(default_factory=dict)  # into its rows' backend_details
    score: Callable[[dict[str, np.ndarray]], float] | None = None  # the accuracy column
    layout: FeedLayout | None = None  # how its signature is fed (None: not read)


def isolated(model: Any, isolate: bool) -> bool:
    """Whether ``model`` is measured in a worker process (``isolate``: the plan's choice).

    Native runtimes are (``.tflite``, ``.onnx``). A Keras model or SavedModel runs on
    TensorFlow in this process: TensorFlow is already loaded here to read it, and custom
    objects registered by the caller are known only here.
    """
    from tfcompress.models.loading import TFLiteModel
    from tfcompress.models.onnx import OnnxModel

    return isolate and isinstance(model, TFLiteModel | OnnxModel)


def start_runner(
    model: Any,
    backend: str,
    options: dict[str, Any],
    batch_dims: dict[str, int],
    *,
    isolate: bool = True,
    timeout: float | None = None,
) -> tuple[Runner, float]:
    """A runner of ``model``, in a worker process with ``isolate``, and its creation's ms.

    Only native runtimes (``.tflite``, ``.onnx``) go to a worker
    (:class:`~tfcompress.bench.isolation.IsolatedRunner`); Keras runs here.

    Raises:
        What :func:`tfcompress.runtime.create_runner` raises, in this process or the worker;
        :class:`~tfcompress.bench.isolation.RuntimeCrashedError` or
        :class:`~tfcompress.bench.isolation.MeasurementTimeoutError` from a worker.
    """
    if isolated(model, isolate):
        try:
            worker = IsolatedRunner(
                model, backend=backend, options=options, batch_dims=batch_dims, timeout=timeout
            )
            return worker, worker.created_ms
        except WorkerTransferError as error:
            # A backend defined where a worker cannot import it (a script's __main__): it is
            # measured here; its rows say "process": "in-process" and the notes count them.
            logger.info("%s; running it in this process", error)
    start = time.perf_counter()
    runner = create_runner(model, backend=backend, **options)
    created_ms = (time.perf_counter() - start) * 1000.0
    if batch_dims:
        runner.declare_batch_dims(batch_dims)
    return runner, created_ms


def backend_rows(
    name: str,
    artifact: Artifact,
    backend: str,
    plan: BenchmarkConfig,
) -> tuple[list[BenchmarkRow], int]:
    """Rows for ``artifact`` on ``backend``: one runner per thread count, one row per batch.

    Accuracy is measured once, on the first runner, when the artifact has a score (data
    with labels for the scored output). A backend that
    is unavailable here gives one ``unavailable: ...`` row; a thread count it cannot run
    gives that row only; any other failure (a crash or a time-out in the worker included)
    is the row's ``error: ...`` status, and the other rows go on.
    """
    model, size, dataset = artifact.model, artifact.size, artifact.dataset
    rows: list[BenchmarkRow] = []
    accuracy: float | None = None
    samples = 0
    for threads in plan.threads:
        base = {"artifact": name, "backend": backend, "threads": threads, "size": size}
        try:
            # Memory is measured where the runner lives: a worker reports its own; None here
            # (unknown growth) for a runner that could not go to its worker after all.
            rss_before = None if isolated(model, plan.isolate) else current_rss_mb()
            options = {"threads": threads, **plan.backend_options.get(backend, {})}
            dims = plan.input_dims(model_signature(model))
            runner, created_ms = start_runner(
                model, backend, options, dims, isolate=plan.isolate, timeout=plan.timeout
            )
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
            for batch, asked in true_batches(plan.batch_sizes, runner.layout.static_batch):
                row = _timed_row(runner, dataset, batch, base, init_ms, accuracy, plan)
                if row.ok and asked != (batch,):  # a static batch: what was asked, said
                    row = replace(row, details={**row.details, "batch_asked": list(asked)})
                if row.ok and not isinstance(runner, IsolatedRunner):  # in-process memory
                    row = replace(row, rss_growth_mb=growth_mb(rss_before, current_rss_mb()))
                rows.append(row)
    if artifact.converted:  # every row of a converted artifact says what actually ran
        rows = [replace(r, details={**r.details, **artifact.converted}) for r in rows]
    return rows, samples


def true_batches(
    asked: tuple[int, ...], static_batch: int | None
) -> list[tuple[int, tuple[int, ...]]]:
    """The batches a runner is timed at, each with the asked sizes it stands for.

    A model whose signature fixes the batch computes whole calls of that batch: an asked
    batch becomes the next multiple of it (a batch of 1 on a file fixed at 8 is one call of
    8 samples, and is timed and reported as that), so samples per second, latency per sample
    and ``x ref`` count the samples the model really computed.
    """
    if not static_batch:
        return [(batch, (batch,)) for batch in asked]
    rounded: dict[int, list[int]] = {}
    for batch in asked:
        rounded.setdefault(-(-batch // static_batch) * static_batch, []).append(batch)
    return [(batch, tuple(sources)) for batch, sources in sorted(rounded.items())]


def _timed_row(
    runner: Runner,
    dataset: Dataset,
    batch: int,
    base: dict[str, Any],
    init_ms: float | None,
    accuracy: float | None,
    plan: BenchmarkConfig,
) -> BenchmarkRow:
    try:
        x = _batch_of(dataset.x, batch)
        timing, details, growth, peak = _measure(runner, x, plan)
    except ROW_ERRORS as error:
        logger.debug("%s on %s (batch %d): %s", base["artifact"], base["backend"], batch, error)
        return BenchmarkRow(**base, batch=batch, status=row_status(error), init_ms=init_ms)
    calls = runner.calls_for(batch)
    profile = _op_profile(runner, x, timing.latency, plan) if plan.profile_ops else None
    if calls > 1 or runner.layout.static_batch is not None:
        # A static-batch model ran the batch as calls of its own size: the row says so.
        details = {**details, "static_batch": runner.layout.static_batch, "calls": calls}
    return BenchmarkRow(
        **base,
        batch=batch,
        init_ms=init_ms,
        first_inference_ms=timing.first_ms,
        latency=timing.latency,
        accuracy=accuracy,
        process_peak_rss_mb=peak,
        rss_growth_mb=growth,
        details=details,
        op_profile=profile,
    )


def _op_profile(runner: Runner, x: Any, whole: Any, plan: BenchmarkConfig) -> dict[str, Any]:
    """The row's per-op profile, measured where it was timed; what stopped it, said in it."""
    from tfcompress.bench.op_profile import profile_runner

    try:
        if isinstance(runner, IsolatedRunner):
            return runner.profile_ops(x, plan.timing, whole)
        return profile_runner(runner, runner.feed(x), plan.timing, whole)
    except ROW_ERRORS as error:
        logger.debug("op profile on %s failed: %s", runner.backend, error)
        return {"unavailable": row_status(error).removeprefix("error: ")}


def _measure(
    runner: Runner, x: Any, plan: BenchmarkConfig
) -> tuple[Any, dict[str, object], float | None, float | None]:
    """Time one batch where the runner lives: ``(timing, details, rss growth, peak rss)``.

    In-process the growth is left to the caller (None here), who measured before the runner.
    """
    if isinstance(runner, IsolatedRunner):  # the loop runs in its worker
        timing, details, rss, peak = runner.time(x, **plan.timing)
        return timing, {**details, "process": "worker"}, growth_mb(runner.rss_before_mb, rss), peak
    timing = measure(runner.bind(x), **plan.timing)
    return timing, {**runner.details(), "process": "in-process"}, None, peak_rss_mb()


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
    r"""The ``error: ...`` status of a row that failed with ``error``, on one line."""
    if isinstance(error, TFCompressError):
        return f"error: {error}"
    message = " ".join(str(error).split()) or "no message"
    return f"error: {type(error).__name__}: {message}"
