"""``tfcompress.benchmark``: size, accuracy, latency and throughput of artifacts on backends."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Unpack

from tqdm.auto import tqdm

from tfcompress._compat.keras import flavour_of
from tfcompress._config_fields import config_or_options
from tfcompress.bench import analysis
from tfcompress.bench.artifacts import converted_artifact, prepare_artifact
from tfcompress.bench.config import BenchmarkConfig, BenchmarkOptions
from tfcompress.bench.environment import capture_environment
from tfcompress.bench.inputs import check_input_shapes, scalar_notes
from tfcompress.bench.result import BenchmarkResult, BenchmarkRow, Device
from tfcompress.bench.rows import ROW_ERRORS, Artifact, backend_rows, row_status
from tfcompress.bench.scoring import plan_scoring
from tfcompress.data import DataLike, load_data, validate_for_signature
from tfcompress.data.sources import describe_source
from tfcompress.errors import InvalidInputError, RuntimeRefusedError
from tfcompress.models.feeding import feed_layout
from tfcompress.models.loading import model_name, resolve_model
from tfcompress.models.probe import sharing_zygote
from tfcompress.models.signature import model_signature
from tfcompress.runtime.keras import pin_tensorflow_threads
from tfcompress.runtime.routing import Route, may_run_on_keras, plan_routes

logger = logging.getLogger(__name__)


def benchmark(
    artifacts: Any,
    *,
    config: BenchmarkConfig | None = None,
    data: DataLike | None = None,
    report_dir: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    progress: bool = False,
    on: Any = None,
    local: bool = False,
    device: str | None = None,
    **options: Unpack[BenchmarkOptions],
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

    Each native runtime (LiteRT, ONNX Runtime, the Edge TPU delegate) runs in a worker
    process per runner, as LiteRT's own benchmark tool runs one model per process: a native
    crash there (an abort, a segfault) becomes an ``error:`` row naming the signal, a
    measurement that runs past ``timeout`` an ``error:`` row saying it was stopped, and the
    other rows are measured. Keras models and SavedModels run on TensorFlow in this process.

    The model's signature decides how it is fed (:mod:`tfcompress.models.feeding`): a
    scalar input gets one value per call, a ``(layers, N, units)`` state its batch in the
    middle, and a model whose signature fixes the batch (``(1, 40)``) runs each batch as
    whole calls of its own size (an asked batch rounded up to the next multiple: a batch of
    1 on a file fixed at 8 is one call of 8 samples), which the row's ``backend_details``
    say (``static_batch``, ``calls``, ``batch_asked``).

    TensorFlow fixes its thread pools once per process, when it starts. When a ``keras``
    row may come, the pools are pinned to the first of ``threads`` before any artifact is
    loaded (if TensorFlow has not started yet); a ``keras`` row at a thread count TensorFlow
    does not run is ``"unavailable: ..."``, never labelled with a count that did not happen.

    What to measure and how is a :class:`~tfcompress.bench.config.BenchmarkConfig`
    (``config=``); the keyword options (``**options``) only build the
    same config, and are refused next to ``config=``. The data, the report folder and the
    machines that measure (``on``/``local``/``device``) stay keywords: they say where the
    samples come from and where the numbers go, not what is measured, so one config
    measures the same thing here and on a device. ``result.config`` records the config.

    Args:
        artifacts: Paths, loaded models or ``.tflite`` bytes; a sequence or a mapping of
            display name to artifact.
        config: What to measure and how; None: built from ``**options``.
        data: Samples for latency inputs and, with labels, accuracy (see
            :func:`tfcompress.data.load_data`); a dict or ``.npz`` with one array per input
            name for models with several inputs. Without it every input gets seeded random
            values of its dtype (see :func:`tfcompress.bench.inputs.random_inputs`), so any
            model gets latency rows.
        **options: :class:`~tfcompress.bench.config.BenchmarkConfig`'s fields by name (see
            it for each); an unknown one is refused, naming the valid ones.
        report_dir: Also write JSON, CSV, Markdown and PNG reports into this folder.
        overwrite: Replace report files already in ``report_dir``; without it their
            presence is an error raised before anything is timed.
        progress: Draw a progress bar on stderr.
        on: Measure on the workers of a Dask scheduler instead of here: its address
            (``tcp://HOST:8786``; ``tls://`` takes its certificates from Dask's
            configuration) or a connected ``distributed.Client`` (one made with
            ``security=`` for TLS). Each worker is a device (``dask worker ADDRESS --name
            pi5`` in ``pip install 'tfcompress[device]'``); every row says which
            (``row.device``) and ``result.devices`` holds each one's environment, read there
            (:mod:`tfcompress.bench.devices`). ``.tflite`` and ``.onnx`` artifacts only.
        local: With ``on``, also measure here, as one more device named ``"local"``.
        device: With ``on``, measure on this worker only (its name, ``--name pi5``); None:
            on every worker. ``compress`` and ``select`` time one device this way.

    Returns:
        The frozen result, rows in artifact x backend x threads x batch order.

    Raises:
        InvalidInputError: What :class:`~tfcompress.bench.config.BenchmarkConfig` refuses
            (an unknown backend, threads/batch/runs below 1, a backend option that backend
            does not take, a timeout not in (0, a week]), a keyword option next to
            ``config=``, no artifacts, a batch dimension or value for an input the models
            do not have.
        OutputExistsError: ``report_dir`` holds report files and ``overwrite`` is False.
        MissingDependencyError: ``report_dir`` given without matplotlib for the plots.

    Example:
        >>> result = tfcompress.benchmark(
        ...     ["cnn.tflite", "cnn_int8.tflite"], data="test.npz", threads=(1, 2)
        ... )  # doctest: +SKIP
        >>> print(result)  # doctest: +SKIP
        >>> same = tfcompress.benchmark(
        ...     ["cnn.tflite"], config=BenchmarkConfig(threads=(1, 2)), data="test.npz"
        ... )  # doctest: +SKIP
    """
    config = config_or_options(
        config,
        BenchmarkConfig,
        options,
        BenchmarkConfig.from_options,
        holds="what to measure and how",
        example="BenchmarkConfig(backends=..., threads=...)",
        put_it="dataclasses.replace(config, threads=...)",
    )
    from tfcompress._limits import CHILD_TIMEOUT

    # The config measured with; without a timeout, the one child-process limit read now.
    plan = replace(config, timeout=CHILD_TIMEOUT.given(config.timeout))
    metric, output, reference = config.metric, config.output, config.reference
    if local and on is None:
        raise InvalidInputError(
            "local=True (--local) adds this machine beside the devices of on= (--on); give both."
        )
    if device is not None and on is None:
        raise InvalidInputError("device= names a worker of on='s scheduler (--on); give on= too.")
    named = _named(artifacts)
    if report_dir is not None:
        from tfcompress.report.writers import check_report_dir

        # A bad report folder, or one holding a report without overwrite, fails now, not
        # after minutes of timing.
        check_report_dir(Path(report_dir), overwrite=overwrite)
    environment = capture_environment()
    if may_run_on_keras(list(named.values()), plan.backends):
        # Loading a Keras model starts TensorFlow, which fixes its thread pools for the
        # process: pin them now or never (a no-op if TensorFlow has started already).
        pin_tensorflow_threads(plan.threads[0])
    # Every artifact is loaded, measured and matched with the data before anything is timed:
    # a missing or corrupt file is bad input (one error, nothing measured), not a report row.
    # Their probes fork from the zygote the measurement workers are forked from next.
    with sharing_zygote() if plan.isolate else contextlib.nullcontext():
        loaded, refused = _load_all(named, config.safe_mode)
    named = {name: source for name, source in named.items() if name in loaded}
    routes = plan_routes({name: model for name, (model, _) in loaded.items()}, plan.backends)
    # The data is read once the first model is known: its input rank tells a batch of a
    # batched tf.data.Dataset or generator from one sample (a generator can be read once).
    first_name, (first_model, _) = next(iter(loaded.items()))
    # The data is matched to the first artifact; every other one is fed under its own input
    # names and scored on the output that is the first one's (models.matching).
    signature = model_signature(first_model)
    layout = feed_layout(signature, batch_dims=plan.input_dims(signature), name=first_name)
    values = plan.input_values
    _check_names(plan.batch_dims, values, loaded)
    rank = len(layout.inputs[0].sample_shape)
    raw = load_data(data, sample_rank=rank) if data is not None else None
    shapes = plan.input_shapes
    if shapes and raw is not None:
        raise InvalidInputError(
            "input_shapes sets the shapes of random inputs; with data the shapes come from the "
            "data: drop one of them."
        )
    check_input_shapes(shapes, plan.batch_sizes, layout)
    matched = None
    if raw is not None:
        what = describe_source(data, "benchmark data")
        own = {k: v for k, v in values.items() if k in signature.input_names}
        matched = validate_for_signature(raw, signature, what=what, layout=layout, values=own)
    scoring, scoring_notes = plan_scoring(metric, output, signature, matched)
    prepared = {
        name: prepare_artifact(name, source, *loaded[name], matched, signature, plan, scoring)
        for name, source in named.items()
    }
    total = len(named) * len(plan.backends) * len(plan.threads) * len(plan.batch_sizes)
    devices: tuple[Device, ...] = ()
    device_notes: list[str] = []
    with tqdm(total=total, desc="benchmark", unit="row", disable=not progress) as bar:
        if on is None:
            rows, samples = _measure_here(prepared, routes, plan, bar)
        else:  # on the workers of a Dask scheduler, each a device (and here, with local)
            from tfcompress.bench.devices import measure_on_devices

            here = (lambda: _measure_here(prepared, routes, plan, bar)) if local else None
            rows, samples, devices, device_notes = measure_on_devices(
                on,
                prepared,
                routes,
                plan,
                here=here,
                environment=environment,
                on_row=bar.update,
                on_devices=lambda count: _rows_per_device(bar, total, count),
                device=device,
            )
    rows = [*rows, *_refused_rows(refused, plan)]
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
            "backend_options": plan.backend_options,
        },
        metric=scoring.metric if scoring else metric if isinstance(metric, str) else "accuracy",
        samples=samples,
        reference=chosen,
        notes=(
            *(device_notes if devices else analysis.int8_notes(rows, environment)),
            *(() if devices else analysis.recipe_notes(rows)),
            *_init_notes(prepared),
            *_feeding_notes(prepared, values, from_data=raw is not None),
            *analysis.isolation_notes(rows),
            *(() if devices else analysis.latency_notes(rows)),
            *scoring_notes,
        ),
        devices=devices,
        config=config,
    )
    return result.save(report_dir, overwrite=overwrite) if report_dir is not None else result


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
    return "tflite" if isinstance(item, bytes | bytearray) else model_name(item)


def _check_names(
    batch_dims: Mapping[str, int],
    values: Mapping[str, float],
    loaded: Mapping[str, tuple[Any, float | None]],
) -> None:
    """Refuse a batch dimension or a value for an input none of the artifacts has."""
    names = {n for model, _ in loaded.values() for n in model_signature(model).input_names}
    for flag, given in (
        ("--batch-dim (batch_dims=)", batch_dims),
        ("--input-value (input_values=)", values),
    ):
        unknown = [key for key in given if key not in names]
        if unknown:
            raise InvalidInputError(
                f"{flag} names input {unknown[0]!r}, which none of the artifacts has; their "
                f"inputs are {', '.join(sorted(names))}."
            )


def _feeding_notes(
    prepared: Mapping[str, Artifact], values: Mapping[str, float], *, from_data: bool
) -> list[str]:
    """Say how artifacts that are not "batch first, batch free" were fed."""
    notes = []
    for name, artifact in prepared.items():
        layout = artifact.layout
        if layout is None:
            continue
        if layout.static_batch is not None:
            notes.append(
                f"{name}: its signature fixes the batch at {layout.static_batch}, so each "
                f"batch ran as calls of {layout.static_batch} sample(s), a smaller or uneven batch "
                "rounded up to whole calls (backend_details: static_batch, calls, batch_asked); "
                "latency is per batch, ms/sample and samples/s count every sample of each call"
            )
        moved = [t for t in layout.inputs if t.batch_axis not in (0, None)]
        if moved:
            listed = ", ".join(f"{t.name} {t.format_shape()}" for t in moved)
            notes.append(f"{name}: batched in another dimension than the first: {listed}")
        said = scalar_notes(layout, artifact.dataset, values, from_data=from_data)
        notes += [f"{name}: {note}" for note in said]
    return notes


def _load_all(
    named: Mapping[str, Any], safe_mode: bool
) -> tuple[dict[str, tuple[Any, float | None]], dict[str, RuntimeRefusedError]]:
    """Every artifact loaded; those their runtime crashed on, hung on or refused, apart.

    A missing or corrupt file stops the command (bad input); a valid file its runtime cannot
    run gives its error rows, or alone the command's one error line.
    """
    loaded: dict[str, tuple[Any, float | None]] = {}
    refused: dict[str, RuntimeRefusedError] = {}
    for name, source in named.items():
        try:
            loaded[name] = _load(source, safe_mode)
        except RuntimeRefusedError as error:
            refused[name] = error
    if not loaded:
        raise next(iter(refused.values()))
    return loaded, refused


def _refused_rows(
    refused: Mapping[str, RuntimeRefusedError], plan: BenchmarkConfig
) -> list[BenchmarkRow]:
    """One ``error: ...`` row per backend for each artifact its runtime could not run."""
    return [
        BenchmarkRow(name, backend, None, None, row_status(error))
        for name, error in refused.items()
        for backend in plan.backends
    ]


def _load(source: Any, safe_mode: bool = True) -> tuple[Any, float | None]:
    """The loaded model, and the part of loading that belongs to every row's ``init_ms``.

    A row's init runs from the artifact's bytes to a ready runner. For ``.tflite``/``.onnx``
    bytes and SavedModel directories the runner does all of that itself (timed per row), so
    this part is 0: reading the file and tfcompress's safety checks (structural validation,
    the crash probe) are not the runtime's cost. A Keras file is deserialized here, before
    any runner exists, so that time is the Keras rows' init. A Keras model passed in memory
    was loaded by the caller: its load time is unknown (None), not 0.
    """
    start = time.perf_counter()
    model = resolve_model(source, safe_mode=safe_mode)
    load_ms = (time.perf_counter() - start) * 1000.0
    if flavour_of(model) is None:
        return model, 0.0
    return model, None if model is source else load_ms


def _init_notes(prepared: Mapping[str, Artifact]) -> list[str]:
    """Say why ``init_ms`` is empty for artifacts passed as loaded Keras models."""
    unknown = [name for name, artifact in prepared.items() if artifact.load_ms is None]
    if not unknown:
        return []
    return [
        f"init_ms is empty for {', '.join(unknown)}: passed as loaded Keras model(s), so the "
        "load time is unknown; pass the file path to have it measured."
    ]


def _measure_here(
    prepared: Mapping[str, Artifact],
    routes: Mapping[str, Sequence[Route]],
    plan: BenchmarkConfig,
    bar: Any,
) -> tuple[list[BenchmarkRow], int]:
    """Every artifact's rows, measured on this machine."""
    rows: list[BenchmarkRow] = []
    samples = 0
    for name, artifact in prepared.items():
        for route in routes[name]:
            status = route.skipped  # a named backend that does not run this artifact
            runs = artifact  # the artifact as given, or its conversion for this route only
            if status is None and route.convert is not None:
                try:
                    runs = converted_artifact(name, artifact, route.convert)
                except ROW_ERRORS as error:
                    logger.debug("%s: %s failed: %s", name, route.convert, error)
                    status = row_status(error)
            if status is not None:
                rows.append(BenchmarkRow(name, route.backend, None, None, status, artifact.size))
                continue
            measured, counted = backend_rows(name, runs, route.backend, plan)
            rows.extend(measured)
            samples = max(samples, counted)
        bar.update(len(plan.backends) * len(plan.threads) * len(plan.batch_sizes))
    return rows, samples


def _rows_per_device(bar: Any, rows: int, devices: int) -> None:
    """The progress bar's total once the devices are known: each measures every row."""
    bar.total = rows * devices
    bar.refresh()
