"""``tfcompress.benchmark``: size, accuracy, latency and throughput of artifacts on backends."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from tfcompress.bench import analysis
from tfcompress.bench.environment import capture_environment
from tfcompress.bench.memory import peak_rss_mb
from tfcompress.bench.metrics import MetricLike, resolve_metric
from tfcompress.bench.result import BenchmarkResult, BenchmarkRow
from tfcompress.bench.size import SizeInfo, measure_size
from tfcompress.bench.stats import measure
from tfcompress.data import DataLike, Dataset, load_data, validate_for_model
from tfcompress.errors import (
    BackendUnavailableError,
    InvalidDataError,
    InvalidInputError,
    TFCompressError,
)
from tfcompress.models.loading import model_name, resolve_model
from tfcompress.models.signature import input_spec
from tfcompress.runtime import create_runner, default_backend, list_backends
from tfcompress.runtime.base import backend_class

logger = logging.getLogger(__name__)

# What can fail inside one row without being a bug of tfcompress: our typed errors, and the
# native runtimes' own (RuntimeError/ValueError from LiteRT and ORT, OSError, out of memory).
ROW_ERRORS = (TFCompressError, RuntimeError, ValueError, OSError, MemoryError)


@dataclass(frozen=True)
class _Plan:
    backends: tuple[str, ...]
    threads: tuple[int, ...]
    batch_sizes: tuple[int, ...]
    timing: dict[str, float]
    options: dict[str, dict[str, Any]]


def benchmark(
    artifacts: Any,
    *,
    data: DataLike | None = None,
    backends: Sequence[str] = ("cpu",),
    threads: Sequence[int] = (1,),
    batch_sizes: Sequence[int] = (1,),
    runs: int = 50,
    min_seconds: float = 1.0,
    warmup_runs: int = 1,
    warmup_seconds: float = 0.5,
    metric: MetricLike = "accuracy",
    reference: str | None = None,
    backend_options: Mapping[str, Mapping[str, Any]] | None = None,
    report_dir: str | os.PathLike[str] | None = None,
    progress: bool = False,
) -> BenchmarkResult:
    """Measure artifacts side by side: size, accuracy, latency and throughput per backend.

    Every artifact runs on each requested backend that accepts its format (``cpu``,
    ``gpu`` and ``edgetpu`` run ``.tflite``; ``onnxruntime`` runs ``.onnx``; ``keras``
    runs Keras/SavedModel); an artifact no requested backend accepts runs on its natural
    one. Latency follows LiteRT's benchmark_model: the first call is timed alone, warm-up
    runs follow, then at least ``runs`` calls and ``min_seconds``. A backend missing here
    gives a row ``"unavailable: <reason>"``; a failure gives a row ``"error: <reason>"``;
    neither stops the other rows.

    Args:
        artifacts: Paths, loaded models or ``.tflite`` bytes; a sequence or a mapping of
            display name to artifact.
        data: Samples for latency inputs and, with labels, accuracy (see
            :func:`tfcompress.data.load_data`). Without it inputs are seeded random values.
        backends: Backend names (see :func:`tfcompress.runtime.list_backends`).
        threads: CPU thread counts to measure.
        batch_sizes: Batch sizes to measure (throughput vs latency).
        runs: Minimum timed runs per row.
        min_seconds: Minimum timed seconds per row.
        warmup_runs: Minimum warm-up runs (the first call included).
        warmup_seconds: Minimum warm-up seconds.
        metric: ``"accuracy"`` (top-1), ``"top5"`` or ``callable(labels, outputs)``.
        reference: Artifact name the ratios compare to (default: the first float32 one).
        backend_options: Extra runner options per backend, e.g.
            ``{"cpu": {"use_xnnpack": False}, "edgetpu": {"device": "usb:0"}}``.
        report_dir: Also write JSON, CSV, Markdown and PNG reports into this folder.
        progress: Draw a progress bar on stderr.

    Returns:
        The frozen result, rows in artifact x backend x threads x batch order.

    Raises:
        InvalidInputError: Unknown backend, or threads/batch/runs below 1, no artifacts.
        MissingDependencyError: ``report_dir`` given without matplotlib for the plots.

    Example:
        >>> result = tfcompress.benchmark(
        ...     ["cnn.tflite", "cnn_int8.tflite"], data="test.npz", threads=(1, 2)
        ... )  # doctest: +SKIP
        >>> print(result)  # doctest: +SKIP
    """
    plan = _plan(backends, threads, batch_sizes, runs, min_seconds, warmup_runs, warmup_seconds)
    plan = _Plan(
        plan.backends,
        plan.threads,
        plan.batch_sizes,
        plan.timing,
        {k: dict(v) for k, v in (backend_options or {}).items()},
    )
    named = _named(artifacts)
    if report_dir is not None:
        from tfcompress.report.writers import check_report_dir

        check_report_dir(Path(report_dir))  # a bad report folder fails now, not after timing
    metric_name, score = resolve_metric(metric)
    raw = load_data(data) if data is not None else None
    environment = capture_environment()
    # Every artifact is loaded, measured and matched with the data before anything is timed:
    # a missing or corrupt file is bad input (one error, nothing measured), not a report row.
    prepared = {name: _prepare(name, source, raw) for name, source in named.items()}
    rows: list[BenchmarkRow] = []
    samples = 0
    total = len(named) * len(plan.backends) * len(plan.threads) * len(plan.batch_sizes)
    with tqdm(total=total, desc="benchmark", unit="row", disable=not progress) as bar:
        for name, artifact in prepared.items():
            new_rows, counted = _artifact_rows(name, artifact, plan, score)
            rows.extend(new_rows)
            samples = max(samples, counted)
            bar.update(len(plan.backends) * len(plan.threads) * len(plan.batch_sizes))
    chosen = analysis.pick_reference(rows, reference)
    rows = analysis.with_ratios(rows, chosen)
    result = BenchmarkResult(
        rows=tuple(rows),
        environment=environment,
        settings={
            "backends": list(plan.backends),
            "threads": list(plan.threads),
            "batch_sizes": list(plan.batch_sizes),
            **plan.timing,
            "backend_options": plan.options,
        },
        metric=metric_name,
        samples=samples,
        reference=chosen,
        notes=tuple(analysis.int8_notes(rows, environment)),
    )
    return result.save(report_dir) if report_dir is not None else result


def _plan(
    backends: Sequence[str],
    threads: Sequence[int],
    batch_sizes: Sequence[int],
    runs: int,
    min_seconds: float,
    warmup_runs: int,
    warmup_seconds: float,
) -> _Plan:
    known = list_backends()
    if isinstance(backends, str):
        backends = [backends]
    unknown = [b for b in backends if b not in known]
    if unknown or not backends:
        raise InvalidInputError(
            f"unknown backend(s) {', '.join(unknown) or '(none given)'}; choose from "
            f"{', '.join(known)}."
        )
    for what, values in (("threads", threads), ("batch sizes", batch_sizes)):
        if not values or any(int(v) < 1 for v in values):
            raise InvalidInputError(f"{what} must be integers >= 1, got {list(values)}.")
    if runs < 1 or warmup_runs < 1:
        raise InvalidInputError(f"runs and warmup_runs must be >= 1, got {runs}/{warmup_runs}.")
    if min_seconds < 0 or warmup_seconds < 0:
        raise InvalidInputError("min_seconds and warmup_seconds must be >= 0.")
    timing = {
        "runs": runs,
        "min_seconds": min_seconds,
        "warmup_runs": warmup_runs,
        "warmup_seconds": warmup_seconds,
    }
    return _Plan(
        tuple(dict.fromkeys(backends)),
        tuple(dict.fromkeys(int(v) for v in threads)),
        tuple(dict.fromkeys(int(v) for v in batch_sizes)),
        timing,
        {},
    )


def _named(artifacts: Any) -> dict[str, Any]:
    if isinstance(artifacts, Mapping):
        pairs = [(str(k), v) for k, v in artifacts.items()]
    else:
        single = isinstance(artifacts, str | os.PathLike | bytes) or not isinstance(
            artifacts, Sequence
        )
        items = [artifacts] if single else list(artifacts)
        pairs = [(_label(item), item) for item in items]
    if not pairs:
        raise InvalidInputError("no artifacts to benchmark; pass at least one path or model.")
    named: dict[str, Any] = {}
    for label, item in pairs:
        while label in named:
            label += "'"
        named[label] = item
    return named


def _label(item: Any) -> str:
    if isinstance(item, str | os.PathLike):
        return Path(item).name
    if isinstance(item, bytes | bytearray):
        return "tflite"
    return model_name(item)


def _backends_for(model: Any, requested: tuple[str, ...]) -> list[str]:
    accepted = [b for b in requested if backend_class(b).accepts(model)]
    return accepted or [default_backend(model)]


@dataclass(frozen=True)
class _Artifact:
    model: Any
    size: SizeInfo
    dataset: Dataset


def _prepare(name: str, source: Any, raw: Dataset | None) -> _Artifact:
    model = resolve_model(source)
    path = Path(source) if isinstance(source, str | os.PathLike) else None
    return _Artifact(model, measure_size(model, path=path), _fit_data(raw, model, name))


def _artifact_rows(
    name: str, artifact: _Artifact, plan: _Plan, score: Any
) -> tuple[list[BenchmarkRow], int]:
    rows: list[BenchmarkRow] = []
    samples = 0
    for backend in _backends_for(artifact.model, plan.backends):
        backend_rows, counted = _backend_rows(
            name, artifact.model, artifact.size, artifact.dataset, backend, plan, score
        )
        rows.extend(backend_rows)
        samples = max(samples, counted)
    return rows, samples


def _fit_data(raw: Dataset | None, model: Any, name: str) -> Dataset:
    spec = input_spec(model)
    if raw is not None:
        return validate_for_model(raw, spec, what=f"data for {name!r}")
    if any(d is None for d in spec.sample_shape):
        raise InvalidDataError(
            f"{name}: the input {spec.describe()} has unknown dimensions; pass data to "
            "benchmark with."
        )
    rng = np.random.default_rng(0)
    sample_shape = tuple(int(d) for d in spec.sample_shape if d is not None)
    return Dataset(rng.random((8, *sample_shape), dtype=np.float32).astype(spec.dtype))


def _backend_rows(
    name: str,
    model: Any,
    size: SizeInfo,
    dataset: Dataset,
    backend: str,
    plan: _Plan,
    score: Any,
) -> tuple[list[BenchmarkRow], int]:
    rows: list[BenchmarkRow] = []
    accuracy: float | None = None
    samples = 0
    options = plan.options.get(backend, {})
    for threads in plan.threads:
        base = {"artifact": name, "backend": backend, "threads": threads, "size": size}
        try:
            start = time.perf_counter()
            runner = create_runner(model, backend=backend, threads=threads, **options)
            init_ms = (time.perf_counter() - start) * 1000.0
        except BackendUnavailableError as error:
            logger.info("%s on %s: %s", name, backend, error)
            return [BenchmarkRow(name, backend, None, None, f"unavailable: {error}", size)], 0
        except ROW_ERRORS as error:
            logger.debug("%s on %s (%d threads): %s", name, backend, threads, error)
            rows.append(BenchmarkRow(**base, batch=None, status=_status(error)))
            continue
        with runner:
            if accuracy is None and dataset.has_labels:
                try:
                    accuracy, samples = _accuracy(runner, dataset, score, name), len(dataset)
                except ROW_ERRORS as error:
                    logger.debug("%s on %s: accuracy failed: %s", name, backend, error)
                    rows.append(BenchmarkRow(**base, batch=None, status=_status(error)))
                    return rows, 0
            for batch in plan.batch_sizes:
                rows.append(_timed_row(runner, dataset, batch, base, init_ms, accuracy, plan))
    return rows, samples


def _accuracy(runner: Any, dataset: Dataset, score: Any, name: str) -> float:
    outputs = runner.predict(dataset.x)
    classes = int(np.prod(outputs.shape[1:]))
    if classes > 1 and int(dataset.y.max()) >= classes:
        raise InvalidDataError(
            f"labels go up to {int(dataset.y.max())} but {name!r} has {classes} outputs; check "
            "that the data belongs to this model."
        )
    return float(score(dataset.y, outputs))


def _timed_row(
    runner: Any,
    dataset: Dataset,
    batch: int,
    base: dict[str, Any],
    init_ms: float,
    accuracy: float | None,
    plan: _Plan,
) -> BenchmarkRow:
    try:
        x = _batch_of(dataset.x, batch)
        call = runner.bind(x)
        timing = measure(call, **plan.timing)
        details = runner.details()
    except ROW_ERRORS as error:
        logger.debug("%s on %s (batch %d): %s", base["artifact"], base["backend"], batch, error)
        return BenchmarkRow(**base, batch=batch, status=_status(error), init_ms=init_ms)
    return BenchmarkRow(
        **base,
        batch=batch,
        init_ms=init_ms,
        first_inference_ms=timing.first_ms,
        latency=timing.latency,
        accuracy=accuracy,
        peak_rss_mb=peak_rss_mb(),
        details=details,
    )


def _batch_of(x: np.ndarray, batch: int) -> np.ndarray:
    """The first ``batch`` samples, repeated when the data holds fewer."""
    if len(x) >= batch:
        return np.ascontiguousarray(x[:batch])
    out = np.empty((batch, *x.shape[1:]), x.dtype)  # MemoryError at once when too large
    for start in range(0, batch, len(x)):
        out[start : start + len(x)] = x[: batch - start]
    return out


def _status(error: BaseException) -> str:
    if isinstance(error, TFCompressError):
        return f"error: {error}"
    message = " ".join(str(error).split()) or "no message"
    return f"error: {type(error).__name__}: {message}"
