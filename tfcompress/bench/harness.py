"""``tfcompress.benchmark``: size, accuracy, latency and throughput of artifacts on backends."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from tfcompress._compat.keras import flavour_of
from tfcompress.bench import analysis
from tfcompress.bench.environment import capture_environment
from tfcompress.bench.memory import current_rss_mb, growth_mb, peak_rss_mb
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
from tfcompress.runtime import (
    SettingUnavailableError,
    check_backend_options,
    create_runner,
    list_backends,
)
from tfcompress.runtime.keras import pin_tensorflow_threads
from tfcompress.runtime.routing import Route, may_run_on_keras, plan_routes

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
    overwrite: bool = False,
    progress: bool = False,
) -> BenchmarkResult:
    """Measure artifacts side by side: size, accuracy, latency and throughput per backend.

    Every artifact runs on each requested backend that accepts its format (``cpu``,
    ``gpu`` and ``edgetpu`` run ``.tflite``; ``onnxruntime`` runs ``.onnx``; ``keras``
    runs Keras/SavedModel); an artifact no requested backend accepts runs on its natural
    one. ``onnxruntime`` named with no ``.onnx`` among the artifacts runs the ONNX export
    of each Keras artifact (``backend_details["converted"]`` says so); a named backend that
    runs none of the artifacts gives rows ``"skipped: <why>"``. Latency follows LiteRT's
    benchmark_model: the first call is timed alone, warm-up runs follow, then at least
    ``runs`` calls and ``min_seconds``. A backend missing here gives a row
    ``"unavailable: <reason>"``; a failure gives a row ``"error: <reason>"``; neither stops
    the other rows.

    TensorFlow fixes its thread pools once per process, when it starts. When a ``keras``
    row may come, the pools are pinned to the first of ``threads`` before any artifact is
    loaded (if TensorFlow has not started yet); a ``keras`` row at a thread count TensorFlow
    does not run is ``"unavailable: ..."``, never labelled with a count that did not happen.

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
        backend_options: Extra runner options per requested backend, e.g.
            ``{"cpu": {"use_xnnpack": False}, "edgetpu": {"device": "usb:0"}}``. An option
            the backend does not take, or options for a backend not requested, are refused.
        report_dir: Also write JSON, CSV, Markdown and PNG reports into this folder.
        overwrite: Replace report files already in ``report_dir``; without it their
            presence is an error raised before anything is timed.
        progress: Draw a progress bar on stderr.

    Returns:
        The frozen result, rows in artifact x backend x threads x batch order.

    Raises:
        InvalidInputError: Unknown backend, or threads/batch/runs below 1, no artifacts,
            a backend option that backend does not take.
        OutputExistsError: ``report_dir`` holds report files and ``overwrite`` is False.
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
    _check_options(plan)
    named = _named(artifacts)
    if report_dir is not None:
        from tfcompress.report.writers import check_report_dir

        # A bad report folder, or one holding a report without overwrite, fails now, not
        # after minutes of timing.
        check_report_dir(Path(report_dir), overwrite=overwrite)
    metric_name, score = resolve_metric(metric)
    environment = capture_environment()
    if may_run_on_keras(list(named.values()), plan.backends):
        # Loading a Keras model starts TensorFlow, which fixes its thread pools for the
        # process: pin them now or never (a no-op if TensorFlow has started already).
        pin_tensorflow_threads(plan.threads[0])
    # Every artifact is loaded, measured and matched with the data before anything is timed:
    # a missing or corrupt file is bad input (one error, nothing measured), not a report row.
    loaded = {name: _load(source) for name, source in named.items()}
    routes = plan_routes({name: model for name, (model, _) in loaded.items()}, plan.backends)
    # The data is read once the first model is known: its input rank tells a batch of a
    # batched tf.data.Dataset or generator from one sample (a generator can be read once).
    first_model = next(iter(loaded.values()))[0]
    raw = _read_data(data, first_model) if data is not None else None
    prepared = {name: _prepare(name, source, *loaded[name], raw) for name, source in named.items()}
    rows: list[BenchmarkRow] = []
    samples = 0
    total = len(named) * len(plan.backends) * len(plan.threads) * len(plan.batch_sizes)
    with tqdm(total=total, desc="benchmark", unit="row", disable=not progress) as bar:
        for name, artifact in prepared.items():
            new_rows, counted = _artifact_rows(name, artifact, routes[name], plan, score)
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
        notes=(
            *analysis.int8_notes(rows, environment),
            *analysis.recipe_notes(rows),
            *_init_notes(prepared),
        ),
    )
    return result.save(report_dir, overwrite=overwrite) if report_dir is not None else result


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


def _check_options(plan: _Plan) -> None:
    """Refuse, before anything is loaded, backend options that no row would honour."""
    for backend, options in plan.options.items():
        if backend not in plan.backends:
            raise InvalidInputError(
                f"backend_options for {backend!r}, which is not among the requested backends "
                f"({', '.join(plan.backends)}); add it to the backends or drop its options."
            )
        if "threads" in options:
            raise InvalidInputError(
                f"backend_options[{backend!r}] sets threads; pass threads=(...) to benchmark "
                "instead, which labels every row with the thread count it ran."
            )
        check_backend_options(backend, options)


@dataclass(frozen=True)
class _Artifact:
    model: Any
    size: SizeInfo
    dataset: Dataset
    load_ms: float | None  # share of init before the runner; None: unknown (loaded Keras)
    converted: dict[str, Any] = field(default_factory=dict)  # into its rows' backend_details


def _load(source: Any) -> tuple[Any, float | None]:
    """The loaded model, and the part of loading that belongs to every row's ``init_ms``.

    A row's init runs from the artifact's bytes to a ready runner. For ``.tflite``/``.onnx``
    bytes and SavedModel directories the runner does all of that itself (timed per row), so
    this part is 0: reading the file and tfcompress's safety checks (structural validation,
    the crash probe) are not the runtime's cost. A Keras file is deserialized here, before
    any runner exists, so that time is the Keras rows' init. A Keras model passed in memory
    was loaded by the caller: its load time is unknown (None), not 0.

    Example:
        >>> _load("cnn.keras")  # doctest: +SKIP
        (<Functional name=cnn, built=True>, 84.2)
    """
    start = time.perf_counter()
    model = resolve_model(source)
    load_ms = (time.perf_counter() - start) * 1000.0
    if flavour_of(model) is None:
        return model, 0.0
    return model, None if model is source else load_ms


def _read_data(data: DataLike, model: Any) -> Dataset:
    """Read ``data`` into memory, telling batches from samples by the model's input rank.

    Example:
        >>> batched = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)  # doctest: +SKIP
        >>> len(_read_data(batched, model)) == len(x)  # doctest: +SKIP
        True
    """
    return load_data(data, sample_rank=len(input_spec(model).sample_shape))


def _prepare(
    name: str, source: Any, model: Any, load_ms: float | None, raw: Dataset | None
) -> _Artifact:
    path = Path(source) if isinstance(source, str | os.PathLike) else None
    return _Artifact(model, measure_size(model, path=path), _fit_data(raw, model, name), load_ms)


def _init_notes(prepared: Mapping[str, _Artifact]) -> list[str]:
    """Say why ``init_ms`` is empty for artifacts passed as loaded Keras models."""
    unknown = [name for name, artifact in prepared.items() if artifact.load_ms is None]
    if not unknown:
        return []
    return [
        f"init_ms is empty for {', '.join(unknown)}: passed as loaded Keras model(s), so the "
        "load time is unknown; pass the file path to have it measured."
    ]


def _artifact_rows(
    name: str, artifact: _Artifact, routes: Sequence[Route], plan: _Plan, score: Any
) -> tuple[list[BenchmarkRow], int]:
    rows: list[BenchmarkRow] = []
    samples = 0
    for route in routes:
        if route.skipped is not None:  # a named backend that does not run this artifact
            rows.append(BenchmarkRow(name, route.backend, None, None, route.skipped, artifact.size))
            continue
        runs = artifact  # the artifact as given, or its conversion for this route only
        if route.convert is not None:
            try:
                runs = _converted(name, artifact, route.convert)
            except ROW_ERRORS as error:
                logger.debug("%s: %s failed: %s", name, route.convert, error)
                rows.append(
                    BenchmarkRow(name, route.backend, None, None, _status(error), artifact.size)
                )
                continue
        backend_rows, counted = _backend_rows(name, runs, route.backend, plan, score)
        rows.extend(backend_rows)
        samples = max(samples, counted)
    return rows, samples


def _converted(name: str, artifact: _Artifact, conversion: str) -> _Artifact:
    """The artifact's ONNX export, made once per artifact, to run on ``onnxruntime``.

    Its rows keep the artifact's name and size (the artifact the user gave) and say in
    ``backend_details["converted"]`` what actually ran. The export is a transform called
    from measurement, on purpose: a user who names ``onnxruntime`` for a Keras model
    expects it measured there, not a missing row.
    """
    from tfcompress.targets.onnx import export_onnx

    logger.info("%s: exporting to ONNX for onnxruntime (%s)", name, conversion)
    start = time.perf_counter()
    onnx_model = export_onnx(artifact.model)  # in memory: nothing is written
    details = {
        "converted": conversion,
        "conversion_ms": round((time.perf_counter() - start) * 1000.0, 1),  # not in init_ms
        "converted_bytes": len(onnx_model.content),
    }
    # Its init_ms is the ONNX Runtime session built from the exported bytes, as for an .onnx
    # file: loading the Keras file and exporting it are not the deployed model's cost.
    return replace(artifact, model=onnx_model, load_ms=0.0, converted=details)


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
    artifact: _Artifact,
    backend: str,
    plan: _Plan,
    score: Any,
) -> tuple[list[BenchmarkRow], int]:
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
                row = _timed_row(runner, dataset, batch, base, init_ms, accuracy, plan)
                if row.ok:  # this row's own memory: what the process gained since its runner
                    row = replace(row, rss_growth_mb=growth_mb(rss_before, current_rss_mb()))
                rows.append(row)
    if artifact.converted:  # every row of a converted artifact says what actually ran
        rows = [replace(r, details={**r.details, **artifact.converted}) for r in rows]
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
    init_ms: float | None,
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
        process_peak_rss_mb=peak_rss_mb(),
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
