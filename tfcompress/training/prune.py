"""Magnitude pruning (unstructured or M:N) with tfmot, verified on the exported ``.tflite``."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from typing import Any

from tfcompress._compat.tfmot import tf_keras, tfmot
from tfcompress.data import DataLike
from tfcompress.errors import InvalidDataError, InvalidInputError
from tfcompress.models.loading import ModelLike
from tfcompress.testing.settings import GateSettings
from tfcompress.training.configs import (
    CONFIG_DEFAULT,
    PruneConfig,
    layer_names,
    parse_structure,
)
from tfcompress.training.configs import SCHEDULES as SCHEDULES  # read here by tests
from tfcompress.training.coverage import prunable_layers
from tfcompress.training.export import finish
from tfcompress.training.gating import GateLike
from tfcompress.training.qat import then_int8
from tfcompress.training.result import TrainingResult
from tfcompress.training.setup import Setup, fine_tune, run_technique

logger = logging.getLogger(__name__)

MIN_STEPS = 10  # fewer optimizer steps cannot ramp sparsity up and let accuracy recover


def prune(
    model: ModelLike,
    *,
    train_data: DataLike,
    eval_data: DataLike | None = None,
    config: PruneConfig | None = None,
    target_sparsity: float | None = CONFIG_DEFAULT,
    schedule: str | None = CONFIG_DEFAULT,
    structure: str | None = CONFIG_DEFAULT,
    epochs: int = CONFIG_DEFAULT,
    learning_rate: float = CONFIG_DEFAULT,
    batch_size: int = CONFIG_DEFAULT,
    then: str | None = CONFIG_DEFAULT,
    qat_epochs: int = CONFIG_DEFAULT,
    skip_layers: Iterable[str] = CONFIG_DEFAULT,
    seed: int = CONFIG_DEFAULT,
    freeze_batchnorm: bool = CONFIG_DEFAULT,
    safe_mode: bool = True,
    gate: GateLike | None = None,
    gate_settings: GateSettings | None = None,
    isolate: bool = True,
) -> TrainingResult:
    """Prune the smallest weights while fine-tuning, strip the wrappers and export.

    Sparsity is measured on the exported ``.tflite`` (``result.weights``), per kernel. Zeros
    are stored like any other value, so the raw file does not shrink; its gzip size does.

    Args:
        model: As in :func:`~tfcompress.training.qat.qat` (so are the data and gate options).
        train_data: Samples to fine-tune on.
        eval_data: Samples to score on (None: 20% of ``train_data`` held out).
        config: Every option below from ``target_sparsity`` to ``freeze_batchnorm`` as one
            :class:`~tfcompress.training.configs.PruneConfig` (what ``result.config`` and a
            compress report record). Those keyword options are a shorthand that builds the
            same config; one given with ``config`` must agree with it. Default: PruneConfig().
        target_sparsity: Share of each pruned kernel set to zero, in (0, 1); default 0.75.
            With ``structure`` it must equal M/N (or be left out).
        schedule: ``"polynomial"`` (sparsity ramps up over the first ~70% of the steps)
            or ``"constant"`` (target sparsity from the first step). Default (None):
            polynomial, or constant with ``structure``. An M:N structure always runs the
            constant schedule (tfmot applies the whole M:N mask at every pruning step, so
            there is nothing to ramp): ``"polynomial"`` with a structure runs constant, says
            so in ``result.warnings`` and is recorded as ``"constant"``.
        structure: ``"M:N"`` (e.g. ``"2:4"``): M zeros in every N consecutive weights along the
            input-channel axis, the pattern sparse kernels can exploit. Conv2D/Dense only.
        epochs: Fine-tuning epochs while pruning (default 2).
        learning_rate: Adam learning rate (default 5e-4).
        batch_size: Samples per step (default 32).
        then: Export precision: None (float32, the default), ``"float16"``, ``"dynamic"`` or
            ``"int8"``. ``"int8"`` runs pruning-preserving QAT for ``qat_epochs`` (0:
            post-training int8).
        qat_epochs: Epochs of pruning-preserving QAT when ``then="int8"`` (default 1).
        skip_layers: Names of layers to leave dense (e.g. a small first convolution).
        seed: Seed of training and calibration sampling (default 0).
        freeze_batchnorm: Keep BatchNormalization in inference mode (default True).
        safe_mode: See :func:`tfcompress.models.load_model`.
        gate: Checks to judge the exported ``.tflite`` by.
        gate_settings: The gate's mode, confidence and interval.
        isolate: Fine-tune in a child process (the default); False fine-tunes here, uncontained.

    Returns:
        The pruned model with sparsity per exported kernel, raw and gzip sizes next to the
        dense model at the same precision, and accuracies. ``result.config`` is what ran
        (``schedule`` included), so ``prune(model, config=result.config, ...)`` replays it.

    Raises:
        InvalidInputError: A bad option (the config's check: sparsity outside (0, 1), an
            unknown schedule, a structure other than M:N, an unknown ``then``...), an option
            that contradicts ``config``, no layer to prune, or a ``gate`` that cannot apply
            to the model's outputs (all raised before training).
        InvalidDataError: Too few training samples for the schedule, or data that does not
            match the model; a ``gate`` task metric on an output without eval labels.
        UnsupportedModelError: Subclassed model or unknown custom layers.

    Example:
        >>> result = tfcompress.prune(model, train_data=train, eval_data=val, then="int8")
        >>> result.sparsity, result.gzip_bytes / result.float_gzip_bytes  # doctest: +SKIP
        (0.75, 0.11)
        >>> from tfcompress.testing import build_checks
        >>> gated = tfcompress.prune(model, train_data=train, eval_data=val,
        ...                          gate=build_checks(max_drop=0.01))  # doctest: +SKIP
        >>> gated.passed, gated.gate.headline()  # doctest: +SKIP
        (False, 'gate FAILED (strict): 1 of 1 check on 1 output failed: ...')
    """
    config = PruneConfig.build(
        config,
        target_sparsity=target_sparsity,
        schedule=schedule,
        structure=structure,
        epochs=epochs,
        learning_rate=learning_rate,
        batch_size=batch_size,
        then=then,
        qat_epochs=qat_epochs,
        skip_layers=layer_names(skip_layers),
        seed=seed,
        freeze_batchnorm=freeze_batchnorm,
    )

    def work(setup: Setup) -> TrainingResult:
        m_by_n = parse_structure(config.structure)
        ran, schedule_warning = resolve_schedule(config.schedule, m_by_n)
        steps = config.steps(len(setup.train))
        if steps < MIN_STEPS:
            raise InvalidDataError(
                f"{len(setup.train)} training samples make {steps} optimizer steps at batch "
                f"size {config.batch_size} over {config.epochs} epoch(s); the pruning schedule "
                f"needs at least {MIN_STEPS}: give more samples or epochs, or a smaller batch size."
            )
        skip = frozenset(config.skip_layers)
        coverage = prunable_layers(setup.legacy, m_by_n=m_by_n, skip=skip)
        pruned_names = {row.layer for row in coverage if row.status == "pruned"}
        if not pruned_names:
            raise InvalidInputError(
                f"no layer of {setup.name!r} can be pruned ({_reasons(coverage)}); pruning "
                "would change nothing."
            )
        sparsity = target_sparsity_of(config.target_sparsity, m_by_n)
        stripped, seconds, losses = _prune(setup, config, pruned_names, sparsity, ran, m_by_n)
        qat_config = config.preserving_qat(min(config.learning_rate, 1e-4))
        tuned, coverage, more, more_losses = then_int8(
            setup, stripped, config, qat_config, coverage
        )
        # What ran, not what was asked: the record must replay the run.
        ran_config = dataclasses.replace(
            config,
            target_sparsity=sparsity,
            schedule=ran,
            structure=None if m_by_n is None else f"{m_by_n[0]}:{m_by_n[1]}",
            qat_epochs=config.qat_epochs if config.then == "int8" else 0,
            skip_layers=tuple(sorted(skip)),
        )
        result = finish(setup, tuned, config=ran_config, recipe=config.then or "float32",
                        coverage=coverage, train_seconds=seconds + more,
                        losses=losses + more_losses, m_by_n=m_by_n)  # fmt: skip
        if schedule_warning is None:
            return result
        return dataclasses.replace(result, warnings=(schedule_warning, *result.warnings))

    return run_technique(model, config, work, train_data=train_data, eval_data=eval_data,
                         safe_mode=safe_mode, gate=gate, gate_settings=gate_settings,
                         isolate=isolate)  # fmt: skip


def resolve_schedule(
    schedule: str | None, m_by_n: tuple[int, int] | None
) -> tuple[str, str | None]:
    """The pruning schedule that will run, and a warning when it is not the one asked for.

    tfmot applies an M:N mask whole at every pruning step: a structure always runs the
    constant schedule. ``None`` asks for the natural schedule (polynomial unstructured,
    constant with a structure).
    """
    if m_by_n is None:
        return schedule or "polynomial", None
    if schedule == "polynomial":
        # Accepted rather than refused because `tfcompress prune` passes "polynomial" as its
        # default; the warning and the record say what ran instead.
        message = (
            f"schedule='polynomial' does not apply to structure {m_by_n[0]}:{m_by_n[1]}: "
            "tfmot applies the whole M:N mask at every pruning step, so the constant "
            "schedule ran (recorded as schedule='constant')."
        )
        logger.warning("%s", message)
        return "constant", message
    return "constant", None


def target_sparsity_of(target: float | None, m_by_n: tuple[int, int] | None) -> float:
    """The sparsity that runs: ``target`` (checked by :class:`PruneConfig`), else 0.75, or M/N."""
    if target is None:
        return 0.75 if m_by_n is None else m_by_n[0] / m_by_n[1]
    return float(target)


def _prune(
    setup: Setup,
    config: PruneConfig,
    names: set[str],
    sparsity: float,
    schedule: str,
    m_by_n: tuple[int, int] | None,
) -> tuple[Any, float, tuple[float, ...]]:
    sparse = tfmot().sparsity.keras
    steps = config.steps(len(setup.train))
    frequency = max(1, min(100, steps // 10))
    if schedule == "polynomial":  # resolve_schedule never gives it with a structure
        end = frequency * max(1, int(0.7 * steps) // frequency)
        plan = sparse.PolynomialDecay(0.0, sparsity, 0, end, frequency=frequency)
    else:
        plan = sparse.ConstantSparsity(sparsity, 0, frequency=frequency)
    logger.info("pruning %d layer(s) to %.0f%% over %d steps", len(names), sparsity * 100, steps)

    def wrap(layer: Any) -> Any:
        if layer.name not in names:
            return layer
        return sparse.prune_low_magnitude(layer, pruning_schedule=plan, sparsity_m_by_n=m_by_n)

    wrapped = tf_keras().models.clone_model(setup.legacy, clone_function=wrap)
    seconds, losses = fine_tune(wrapped, setup, config, callbacks=[sparse.UpdatePruningStep()])
    return sparse.strip_pruning(wrapped), seconds, losses


def _reasons(coverage: list[Any]) -> str:
    return "; ".join(f"{row.layer}: {row.reason}" for row in coverage) or "it has no weights"
