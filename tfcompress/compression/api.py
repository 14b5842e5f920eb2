"""``tfcompress.compress``: the smallest (or fastest) artifact that passes the gate."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Any, Unpack

from tfcompress._config_fields import config_or_options
from tfcompress.compression.advice import advise
from tfcompress.compression.candidates import Rung, plan_ladder
from tfcompress.compression.config import CompressConfig, CompressOptions
from tfcompress.compression.handlers import get_handler
from tfcompress.compression.result import CompressionResult
from tfcompress.compression.search import SearchState, layer_of
from tfcompress.errors import (
    BackendUnavailableError,
    ConversionError,
    InvalidInputError,
    UnsupportedModelError,
)
from tfcompress.targets.base import Target, get_target


def compress(
    model: Any,
    *,
    representative_data: Any,
    eval_data: Any,
    config: CompressConfig | None = None,
    train_data: Any = None,
    safe_mode: bool = True,
    progress: bool = False,
    on: Any = None,
    device: str | None = None,
    **options: Unpack[CompressOptions],
) -> CompressionResult:
    """Find the smallest (or fastest) artifact that passes the accuracy gate, and prove it.

    Candidates are tried cheapest first (:func:`~tfcompress.compression.candidates.plan_ladder`
    lists them; docs/compress.md says what each tries). The search stops when nothing left can
    beat the best passing artifact (:mod:`tfcompress.compression.search`), when
    ``time_budget`` runs out (checked between attempts), or on Ctrl-C, and returns the best
    passing artifact so far. Nothing larger than the float32 file (a ``.tflite`` input: the
    file given) is chosen, nor anything slower than ``max_slowdown`` times its latency, timed
    in the same run on the target's latency backend unless ``measure_latency=False``. A Keras
    file is loaded, run and converted in the converter's child (TensorFlow starts once).

    Fine-tuning rungs run in a child process (:mod:`tfcompress.training.isolation`): a native
    crash is recorded as that attempt's error and the search goes on. A fine-tuned artifact
    worse than plain PTQ of the same model (measured in its own run) and no smaller is
    dropped, and the other fine-tuning rungs, which share its data, are skipped.

    Every artifact is judged by :func:`tfcompress.check_gate` against ``model`` on
    ``eval_data`` (the same check as ``tfcompress gate`` and the pytest plugin).

    What the search is asked for is one
    :class:`~tfcompress.compression.config.CompressConfig`: pass it as ``config=``, or pass
    its options as keywords (``**options``), which build the same config
    (:meth:`CompressConfig.from_options`). Not both: a keyword next to ``config=`` is
    refused. ``result.config`` is the config that ran.

    Args:
        model: The float Keras model or SavedModel (or its path).
        representative_data: Calibration samples (any source :func:`tfcompress.load_data` reads).
        eval_data: Samples the gate judges on; with labels, task metrics (accuracy...), without,
            a label-free fidelity metric chosen as :func:`tfcompress.check_gate` chooses.
        config: Everything the search is asked for (target, objective, gate, budgets,
            batches, seed). None: built from the keyword options below.
        train_data: Fine-tuning samples; enables QAT, pruning and clustering.
        safe_mode: See :func:`tfcompress.load_model` (paths only).
        progress: Print "attempt k of n" and the best so far on stderr.
        on: Time the attempts on a device instead of here: a Dask scheduler's address
            (``tcp://HOST:8786``) or a connected ``distributed.Client``, whose worker runs
            in the device install (docs/devices.md). Where to measure, not what to make: it
            is no part of ``config`` (``result.device`` and each attempt's ``device`` say
            where the latencies came from). Needs timing (``objective="latency"`` or
            ``measure_latency=True``).
        device: With ``on``, the worker's name (``dask worker ... --name pi5``); None: the
            only worker (several and none named is refused: one search ranks on one device).
        **options: :class:`~tfcompress.compression.config.CompressConfig`'s fields by
            name (``target``, ``objective``, ``time_budget``, ``threads``, ``seed``...: see
            it for each), and the gate's thresholds as :func:`tfcompress.check_gate` takes
            them (``max_drop`` a fraction in [0, 1], default 0.01 for accuracy-like metrics;
            ``min_snr`` in dB; ``min_cosine``, ``max_abs``, ``min_agreement``). An unknown
            one is refused, naming the valid ones.

    Returns:
        The chosen artifact with every attempt; ``result.passed`` is False when none passed
        (``result.advice`` says what to try next).

    Raises:
        InvalidInputError: A keyword next to ``config=``; what the config refuses (a gate
            outside [0, 1], an unknown target or objective, options the gate refuses);
            ``on`` without timing, an unreachable scheduler, no such device; a
            ``.tflite`` as the model, ``batch_size`` without ``train_data``,
            ``static_batch`` with it; all before any conversion.
        InvalidDataError: Data that does not fit the model, a task metric without labels.
        BackendUnavailableError: A latency objective or ``measure_latency`` on a machine
            whose target backend cannot run here (``target="gpu"`` without a GPU goes on:
            gated on the CPU, ranked by size, and a finding says so).
        UnsupportedModelError: ``target="edgetpu"`` for a model with no fully-integer form.

    Example:
        >>> result = compress(model, representative_data=calib, eval_data=test,
        ...     max_drop=0.01)  # doctest: +SKIP
        >>> result.chosen.name, result.save("model.tflite")  # doctest: +SKIP
        >>> config = CompressConfig(target="edgetpu", thresholds={"max_drop": 0.02})
        >>> compress(model, config=config, representative_data=calib, eval_data=test)
        ... # doctest: +SKIP
    """
    config = config_or_options(
        config,
        CompressConfig,
        options,
        CompressConfig.from_options,
        holds="the search",
        example="CompressConfig(...)",
        put_it="dataclasses.replace(config, ...)",
    )
    check_on(config, on is not None, device)  # before connecting
    where = None
    if on is not None:  # connected and its worker picked before any conversion
        from tfcompress.bench.device_latency import LatencyDevice

        where = LatencyDevice.open(on, device)
    try:
        return _search(
            model,
            config,
            representative_data=representative_data,
            eval_data=eval_data,
            train_data=train_data,
            safe_mode=safe_mode,
            progress=progress,
            where=where,
        )
    finally:
        if where is not None:
            where.close()


def check_on(config: CompressConfig, on: bool, device: str | None) -> None:
    """Refuse a ``device`` without ``on``, and ``on`` where ``config`` times nothing.

    Raises:
        InvalidInputError: Either, before any connection is made.
    """
    if device is not None and not on:
        raise InvalidInputError("device (--device) names a worker of on (--on): give on (--on).")
    if on and not _Plan(config, get_target(config.target)).measure:
        raise InvalidInputError(
            "on (--on) times the attempts on a device, but measure_latency=False "
            "(--no-measure-latency) times nothing: drop one."
        )


def check_gate_first(reference: Any, eval_set: Any, *, config: Any) -> None:
    """Refuse, before the first attempt, a gate that cannot run on this data.

    The reference runs once on ``eval_set`` and the gate's checks are planned on its outputs
    and the data's labels (:func:`tfcompress.testing.judge.plan_checks`): ``--max-drop``
    where no output has labels is refused now, naming the threshold that fits each output
    (``--min-agreement`` for class scores, ``--min-snr`` for others), not after a conversion.

    Raises:
        InvalidInputError: What the gate would refuse on every attempt.
        InvalidDataError: A task metric on an output without labels.
    """
    from tfcompress.bench.paired import run_model
    from tfcompress.models import model_name, model_signature
    from tfcompress.testing.judge import plan_checks

    run = run_model(
        reference,
        eval_set,
        model_signature(reference),
        name=model_name(reference),
        threads=config.threads,
        batch_dims=config.batch_dims,
    )
    labels = eval_set.y if isinstance(eval_set.y, dict) else None
    plan_checks(labels, run.outputs, checks=config.checks, settings=config.settings)


def _search(
    model: Any,
    config: CompressConfig,
    *,
    representative_data: Any,
    eval_data: Any,
    train_data: Any,
    safe_mode: bool,
    progress: bool,
    where: Any = None,
) -> CompressionResult:
    """The search ``config`` asks for (see :func:`compress`)."""
    from tfcompress.bench.paired import read_for_reference
    from tfcompress.models import OnnxModel, TFLiteModel, model_name, resolve_model
    from tfcompress.models.loading import open_model
    from tfcompress.models.quantized import refuse_quantized
    from tfcompress.quantization.converter import warm_converter
    from tfcompress.quantization.engines.prepare import prepare_float_tflite

    device = get_target(config.target)
    static_batch, seed = config.static_batch, config.seed
    _check_batches(config, training=train_data is not None)
    warm_converter(model)  # its child imports TensorFlow while the model is checked here
    if isinstance(model, str | os.PathLike):  # a Keras file: loaded and run in that child
        model = open_model(model, safe_mode=safe_mode)
    reference = resolve_model(model, safe_mode=safe_mode)
    refuse_quantized(reference)  # said first, with what can still be done with it
    if isinstance(reference, OnnxModel):  # its ladder is .tflite files made by TensorFlow
        asked = config.thresholds.items() or {"max_drop": 0.01}.items()  # the user's own gate
        gate = " ".join(f"--{name.replace('_', '-')} {value:g}" for name, value in asked)
        raise InvalidInputError(
            f"compress searches .tflite files made from a Keras model, a SavedModel or a float "
            f".tflite; {model_name(reference)} is an ONNX model: quantize it with ONNX Runtime and "
            "gate it in one command: `tfcompress quantize MODEL.onnx --format onnx --recipe int8 "
            f"--data CALIB.npz --eval TEST.npz {gate} --out MODEL_int8.onnx` (the gate "
            "fails with exit 1)."
        )
    tflite = isinstance(reference, TFLiteModel)
    if tflite:  # what LiteRT Quantizer cannot take (several subgraphs), refused now
        prepare_float_tflite(reference.content, source=reference.name)
        if static_batch is not None:  # LiteRT Quantizer keeps the .tflite's shapes
            raise InvalidInputError(
                "static_batch re-traces a Keras model, but a .tflite keeps its own shapes: "
                "drop static_batch (--static-batch), or pass the source Keras model or "
                "SavedModel."
            )
    # Read once in the model's layout (--batch-dim, --input-value); every step takes them so.
    feeding = {"batch_dims": config.batch_dims, "input_values": config.input_values}
    eval_set = read_for_reference(eval_data, reference, "eval data", **feeding)
    check_gate_first(reference, eval_set, config=config)  # before any conversion
    calibration = read_for_reference(
        representative_data, reference, "representative data", **feeding
    )
    train = (
        None
        if train_data is None
        else read_for_reference(train_data, reference, "train data", **feeding)
    )
    started = time.monotonic()
    # The float32 baseline is made as the target makes files (the GPU: at a static batch).
    file_batch = static_batch
    if file_batch is None and device.rules.batch_is_default:
        file_batch = device.rules.static_batch
    float32, plan = None, _Plan(config, device, remote=where is not None)
    elsewhere = device.latency_backend not in ("cpu", plan.settings.backend)
    if plan.measure and not plan.remote and elsewhere:
        float32 = _float32(reference, calibration, seed, file_batch)
        plan.probe_timing(float32)  # a backend not here: untimed, said (or refused if asked)
    if plan.needed - {"cpu"}:
        float32 = float32 or _float32(reference, calibration, seed, file_batch)
        plan.probe(float32)  # fails now, not after the ladder, or falls back (said)
    state = SearchState(
        reference=reference,
        eval_set=eval_set,
        representative=calibration,
        train_data=train,
        checks=config.checks,
        settings=plan.settings,
        objective=plan.objective,
        target=config.target,
        threads=config.threads,
        measure=plan.measure,
        seed=seed,
        progress=progress,
        deadline=None if config.time_budget is None else started + config.time_budget,
        started=started,
        float32=float32,
        make_float32=lambda: _float32(reference, calibration, seed, file_batch),
        static_batch=static_batch,
        batch_size=config.batch_size,
        freeze_batchnorm=config.freeze_batchnorm,
        where=where,
        max_slowdown=config.slowdown_limit,
        baseline=reference.content if tflite else None,
        baseline_name="the input .tflite" if tflite else "float32",
    )
    ladder = plan_ladder(
        objective=plan.objective, target=config.target, calibration_available=len(calibration),
        training=train is not None, tflite=tflite, static_batch=static_batch,
    )  # fmt: skip
    ladder = _batch_first_rungs(ladder, calibration, state)
    state.planned = len(ladder)
    interrupted = False
    try:
        _climb(state, ladder)
    except KeyboardInterrupt:  # Ctrl-C: the best passing artifact so far is the answer
        interrupted = True
        state.stop_reason = f"interrupted (Ctrl-C) after {len(state.attempts)} attempt(s)"
    if (
        device.rules.integer_only
        and state.attempts
        and all(a.status == "error" for a in state.attempts if a.technique == "ptq")
    ):
        raise UnsupportedModelError(
            f"no fully-integer artifact can be made for {device.display_name}: "
            f"{state.attempts[0].why}"
        )
    state.reference_bytes()  # stopped before any conversion: the baseline is still reported
    result = _result(state, interrupted, time.monotonic() - started, train is not None)
    return replace(result, config=config, findings=(*plan.findings, *result.findings))


class _Plan:
    """How the search ranks, gates and times on this machine, for the target asked.

    The objective is the one named, else the target's own (``Target.default_objective``:
    latency on the GPU). A target with a ``fallback_backend`` (the GPU) goes on where its
    backends cannot run here: gated on the fallback, ranked by size, and a finding says so;
    an objective or timing the user named on such a machine is refused instead.
    """

    def __init__(self, config: CompressConfig, device: Target, *, remote: bool = False) -> None:
        self.config, self.device, self.remote = config, device, remote
        self.objective = config.objective or device.default_objective or "size"
        self.measure = config.measure
        self.settings = config.settings
        self.findings: list[str] = []
        if not self.measure:
            self.findings.append(
                "not timed (measure_latency=False, --no-measure-latency): how fast the artifact "
                "runs against float32 is unknown, and no slowdown was checked"
            )
        if config.objective is None and self.objective == "latency":
            self.findings.append(
                f"ranked by latency on the {device.latency_backend} backend (median per "
                f"sample), {device.display_name}'s own objective; objective='size' ranks by "
                "size"
            )

    @property
    def needed(self) -> set[str]:
        """The backends the search runs here: the gate's, and the latency's when it times here.

        With ``on=`` the latency backend runs on the device, which answers for itself.
        """
        timed = self.measure and not self.remote
        return {self.settings.backend} | ({self.device.latency_backend} if timed else set())

    def probe(self, float32: bytes) -> None:
        """Check each backend on the float32 file; fall back where the target allows it.

        Raises:
            BackendUnavailableError: A backend cannot run here and the target has no
                fallback, or the user named the latency objective or timing (what cannot be
                measured here is not replaced by something else).
        """
        for backend in sorted(self.needed - {"cpu"}):
            try:
                _probe_backend(float32, backend)
            except BackendUnavailableError as error:
                fallback = self.device.fallback_backend
                if fallback is None or self.timing_named:
                    raise
                self._fall_back(fallback, str(error))
                return

    @property
    def timing_named(self) -> bool:
        """The user asked for timing: the latency objective, measure_latency, max_slowdown, on=."""
        config = self.config
        named = config.objective == "latency" or config.measure_latency is True
        return named or config.max_slowdown is not None or self.remote

    def probe_timing(self, float32: bytes) -> None:
        """Check the latency backend alone (the gate runs elsewhere); untimed where it cannot run.

        Raises:
            BackendUnavailableError: It cannot run here and the user asked for timing.
        """
        backend = self.device.latency_backend
        try:
            _probe_backend(float32, backend)
        except BackendUnavailableError as error:
            if self.timing_named:
                raise
            self.measure = False
            self.findings.append(
                f"not timed: {self.device.display_name}'s latency backend {backend!r} cannot "
                f"run here ({str(error).split(';')[0]}), so no slowdown against float32 was "
                "checked; measure the artifact where it runs (tfcompress benchmark)"
            )

    def _fall_back(self, fallback: str, why: str) -> None:
        self.findings = [
            f"ranked by size, not latency: {why.split(';')[0]}. Gated on the {fallback} "
            f"backend instead of {self.device.latency_backend}, and each artifact's "
            f"{self.device.name} check ran statically; on a machine where "
            f"{self.device.display_name} runs, compress ranks by its latency"
        ]
        self.objective, self.measure = "size", False
        self.settings = replace(self.settings, backend=fallback)
        self.findings.append(
            f"not timed: the {self.device.latency_backend} backend does not run here, so no "
            "slowdown against float32 was checked"
        )


def _climb(state: SearchState, ladder: Any) -> None:
    """Try the rungs in order until the stop rule, the budget or the ladder's end."""
    state.pending = list(ladder)
    state.run_rung = lambda rung: get_handler(rung.technique).run(state, rung)
    while state.pending:
        live = [r for r in state.pending if state.beaten(r) is None]
        if not live:
            best = state.best
            why = "; ".join(filter(None, (*state.skipped, *map(state.beaten, state.pending))))
            state.stop_reason = f"{best.name if best else 'nothing'} cannot be beaten: {why}"
            return
        rung = live[0]
        for dropped in state.pending[: state.pending.index(rung)]:  # say why, once
            state.skipped.append(str(state.beaten(dropped)))
            state.say(f"  skipping {dropped.name}: {state.skipped[-1]}")
        state.pending = state.pending[state.pending.index(rung) + 1 :]
        if state.out_of_time():
            state.stop_reason = (
                f"time budget ran out before {rung.name} "
                f"({len(state.attempts)} attempt(s) in {time.monotonic() - state.started:.0f}s)"
            )
            return
        state.run_rung(rung)
    if not state.stop_reason and state.skipped:
        state.stop_reason = "every candidate of the ladder was tried or bounded: " + "; ".join(
            state.skipped
        )
    state.stop_reason = state.stop_reason or "every candidate of the ladder was tried"


def _batch_first_rungs(ladder: Any, calibration: Any, state: SearchState) -> tuple[Rung, ...]:
    """The ladder without the post-training methods for a model fed otherwise than batch first.

    They score batch-first samples (quantize refuses them named on such a model); the rung
    is left out and the stop reason says why.
    """
    layout = getattr(calibration, "layout", None)
    if layout is None or layout.batch_first:
        return tuple(ladder)
    kept = tuple(r for r in ladder if not r.recipe.get("methods"))
    left = [r.name for r in ladder if r not in kept]
    if left:
        why = (
            f"{', '.join(left)} left out: the post-training methods score batch-first samples "
            f"and this model is fed otherwise ({'; '.join(layout.explain())})"
        )
        state.skipped.append(why)
        state.say(f"  {why}")
    return kept


def _check_batches(config: CompressConfig, *, training: bool) -> None:
    """Refuse batches the search could not honour with (or without) training data.

    Raises:
        InvalidInputError: ``static_batch`` with training data (the fine-tuned artifacts keep
            the model's own batch), or ``batch_size`` without it.
    """
    if config.static_batch is not None and training:
        raise InvalidInputError(
            "static_batch fixes the batch of the post-training artifacts, but the fine-tuned "
            "ones keep the model's own batch: drop train_data (--train) or static_batch "
            "(--static-batch)."
        )
    if config.batch_size is not None and not training:
        raise InvalidInputError(
            "batch_size is the fine-tuning batch of the QAT, pruning and clustering rungs: "
            "pass train_data (--train), or drop it (static_batch, --static-batch, fixes the "
            "artifacts' batch)."
        )


def _float32(reference: Any, calibration: Any, seed: int, static_batch: int | None) -> bytes:
    from tfcompress.quantization.ptq import quantize

    try:
        return quantize(
            reference,
            recipe="float32",
            representative_data=calibration,
            seed=seed,
            static_batch=static_batch,
        ).model_content
    except ConversionError as error:
        raise UnsupportedModelError(f"the model does not convert to .tflite: {error}") from error


def _probe_backend(content: bytes, backend: str) -> None:
    """Fail now, with the backend's own reason, when the target cannot run here."""
    from tfcompress.models import TFLiteModel
    from tfcompress.runtime import create_runner

    runner = create_runner(TFLiteModel(content, label="float32", verified=True), backend=backend)
    runner.close()


def _result(
    state: SearchState, interrupted: bool, seconds: float, training: bool
) -> CompressionResult:
    from tfcompress.compression.latency import host_time_finding, int8_finding
    from tfcompress.training.sparsity import gzip_size

    best = state.best
    findings: list[str] = []
    where = state.where
    judged = state.measure and state.judges_latency
    if judged and (
        finding := int8_finding(
            state.attempts,
            backend=state.latency_backend,
            threads=state.threads,
            device=None if where is None else where.name,
            environment=None if where is None else where.environment,
        )
    ):
        findings.append(finding)
    if where is not None and state.measure:
        findings.append(
            f"latencies measured on device {where.name} ({where.address}, a worker of the Dask "
            f"scheduler {where.scheduler}), not here"
        )
    if state.measure and state.baseline_ms is not None and not judged:
        findings.append(host_time_finding(state))
    elif state.measure and state.baseline_ms is not None:
        from tfcompress.quantization.methods.slow_ops import NOISE_WORDS, ms

        slow = [a for a in state.attempts if (a.gate or {}).get("passed") and state.too_slow(a)]
        findings.append(
            f"every attempt timed on {state.latency_backend} with {state.threads} thread(s) "
            f"(median per sample); {state.baseline_name} {ms(state.baseline_ms)} ms; "
            f"nothing slower than {state.max_slowdown:g}x it ({NOISE_WORDS}) is returned"
            + (f": {', '.join(a.name for a in slow)} passed the gate but ran slower" * bool(slow))
        )
    if best is not None and state.objective == "latency":
        findings.append(
            f"{best.name} wins: the fastest passing artifact ({best.latency_ms:.3f} ms)"
        )
    keys = ("output", "metric", "threshold")
    checks = [{key: getattr(check, key) for key in keys} for check in state.checks]
    gate = {"checks": checks, **state.settings.to_dict()}
    result = CompressionResult(
        chosen=best,
        model_content=None if best is None else state.contents[best.index],
        attempts=tuple(state.attempts),
        objective=state.objective,
        target=state.target,
        float32_bytes=len(state.float32 or b""),
        float32_gzip_bytes=gzip_size(state.float32 or b""),
        baseline_bytes=len(state.baseline_bytes() or b""),
        gate=gate,
        stop_reason=state.stop_reason,
        interrupted=interrupted,
        sensitive_layers=tuple(layer_of(s) for s in state.sensitive),
        findings=tuple(findings),
        seconds=seconds,
        threads=state.threads,
        device=None if where is None else where.to_dict(),
        float32_latency_ms=state.baseline_ms,
        baseline=state.baseline_name,
        latency_backend=state.latency_backend if state.measure else None,
        max_slowdown=state.max_slowdown if judged else None,
    )
    if best is None:
        result = replace(result, advice=advise(result, training=training))
    return result
