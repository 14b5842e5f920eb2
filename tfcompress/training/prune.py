"""Magnitude pruning (unstructured or M:N) with tfmot, verified on the exported ``.tflite``."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Unpack

from tfcompress._compat.tfmot import tfmot
from tfcompress.data import DataLike
from tfcompress.errors import InvalidDataError
from tfcompress.models.loading import ModelLike
from tfcompress.testing.settings import GateSettings
from tfcompress.training.configs import PruneConfig, parse_structure
from tfcompress.training.coverage import prunable_layers
from tfcompress.training.gating import GateLike
from tfcompress.training.qat import ExportedOptions, build_config, export_preserved
from tfcompress.training.result import TrainingResult
from tfcompress.training.setup import Setup, run_technique, tune_wrapped

logger = logging.getLogger(__name__)

MIN_STEPS = 10  # fewer optimizer steps cannot ramp sparsity up and let accuracy recover


class PruneOptions(ExportedOptions, total=False):
    """:func:`prune`'s keyword options: :class:`PruneConfig`'s fields (a test keeps them equal)."""

    target_sparsity: float | None
    schedule: str | None
    structure: str | None


def prune(
    model: ModelLike,
    *,
    train_data: DataLike,
    eval_data: DataLike | None = None,
    config: PruneConfig | None = None,
    safe_mode: bool = True,
    gate: GateLike | None = None,
    gate_settings: GateSettings | None = None,
    isolate: bool = True,
    **options: Unpack[PruneOptions],
) -> TrainingResult:
    """Prune the smallest weights while fine-tuning, strip the wrappers and export.

    Sparsity is measured on the exported ``.tflite`` (``result.weights``), per kernel. Zeros
    are stored like any other value, so the raw file does not shrink; its gzip size does.

    Args:
        model: As in :func:`~tfcompress.training.qat.qat`, as are the arguments below.
        train_data: Samples to fine-tune on.
        eval_data: Samples to score on (None: 20% of ``train_data`` held out).
        config: The options as one :class:`~tfcompress.training.configs.PruneConfig`, which
            describes each (``target_sparsity``, ``schedule``, ``structure``, ``then``...).
        safe_mode: See :func:`tfcompress.models.load_model`.
        gate: Checks to judge the exported ``.tflite`` by.
        gate_settings: The gate's mode, confidence and interval.
        isolate: Fine-tune in a child process (the default).
        **options: The options as keywords (:class:`PruneOptions`), as in ``qat``.

    Returns:
        The pruned model with sparsity per exported kernel, raw and gzip sizes next to the
        dense model at the same precision, and accuracies. ``result.config`` is what ran
        (``schedule`` included), so ``prune(model, config=result.config, ...)`` replays it.

    Raises:
        InvalidInputError: As :func:`~tfcompress.training.qat.qat` (the config's checks:
            sparsity outside (0, 1), a structure other than M:N...), or no layer to prune.
        InvalidDataError: As ``qat``, or too few training samples for the schedule.
        UnsupportedModelError, NativeCrashError, ConversionError: As ``qat``.

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
    config = build_config(PruneConfig, config, options, PruneOptions)

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
        coverage = prunable_layers(setup.legacy, m_by_n=m_by_n, skip=frozenset(config.skip_layers))
        sparsity = target_sparsity_of(config.target_sparsity, m_by_n)
        sparse = tfmot().sparsity.keras
        frequency = max(1, min(100, steps // 10))
        if ran == "polynomial":  # resolve_schedule never gives it with a structure
            end = frequency * max(1, int(0.7 * steps) // frequency)
            plan = sparse.PolynomialDecay(0.0, sparsity, 0, end, frequency=frequency)
        else:
            plan = sparse.ConstantSparsity(sparsity, 0, frequency=frequency)
        logger.info("pruning to %.0f%% over %d steps", sparsity * 100, steps)

        def wrap(layer: Any) -> Any:
            return sparse.prune_low_magnitude(layer, pruning_schedule=plan, sparsity_m_by_n=m_by_n)

        trained = tune_wrapped(setup, config, coverage, "pruned", wrap, sparse.strip_pruning,
                               callbacks=[sparse.UpdatePruningStep()])  # fmt: skip
        qat_config = config.preserving_qat(min(config.learning_rate, 1e-4))
        # What ran, not what was asked: the record must replay the run.
        structure = None if m_by_n is None else f"{m_by_n[0]}:{m_by_n[1]}"
        result = export_preserved(
            setup, trained, config, qat_config, coverage, m_by_n=m_by_n,
            target_sparsity=sparsity, schedule=ran, structure=structure,
        )  # fmt: skip
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
