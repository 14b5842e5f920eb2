"""The optional gate of QAT, pruning and clustering: the export judged against the float model.

The same check as ``tfcompress gate``, the pytest plugin and ``tfcompress quantize --max-drop``
(:func:`tfcompress.testing.judge_outputs_by_name`), on outputs training computes anyway: the
original float model's and the exported ``.tflite``'s on the validation data, with the labels
of each output that has some. The checks are rehearsed on the data before any training (the
reference judged against itself), so an option that cannot apply (``max_drop`` without labels
to score a task metric, ``mse`` without a threshold) fails in seconds, not after fine-tuning.
Importing this module imports no TensorFlow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tfcompress.errors import InvalidInputError
from tfcompress.testing.judge import Check, judge_outputs_by_name
from tfcompress.testing.report import GateReport
from tfcompress.testing.settings import GateSettings
from tfcompress.training.tasks import Labels

GateLike = Check | Sequence[Check]


@dataclass(frozen=True)
class TrainingGate:
    """What to check on the export, and how (mode, confidence, interval).

    Attributes:
        checks: One or more checks (see :func:`tfcompress.testing.build_checks`).
        settings: The gate's settings.
    """

    checks: tuple[Check, ...]
    settings: GateSettings


def plan_gate(gate: GateLike | None, settings: GateSettings | None) -> TrainingGate | None:
    """Check the ``gate=`` and ``gate_settings=`` options of ``qat``/``prune``/``cluster``.

    Args:
        gate: A :class:`~tfcompress.testing.Check` or a sequence of them, e.g.
            ``build_checks(max_drop=0.01)``; None: no gate.
        settings: Mode, confidence, interval... (default :class:`GateSettings`); only with
            ``gate``.

    Raises:
        InvalidInputError: ``settings`` without ``gate``, an empty ``gate``, or something
            other than checks and settings.
    """
    if gate is None:
        if settings is not None:
            raise InvalidInputError(
                "gate_settings sets how the gate judges; pass the checks too, e.g. "
                "gate=tfcompress.testing.build_checks(max_drop=0.01)."
            )
        return None
    checks = (gate,) if isinstance(gate, Check) else tuple(gate)
    if not checks:
        raise InvalidInputError(
            "gate=[] checks nothing; pass [Check()] to judge every output with the metric "
            "chosen for it and its default threshold, or None for no gate."
        )
    wrong = [check for check in checks if not isinstance(check, Check)]
    if wrong:
        raise InvalidInputError(
            f"gate takes tfcompress.testing.Check objects, got {type(wrong[0]).__name__}; "
            "build them with tfcompress.testing.build_checks(max_drop=0.01, ...)."
        )
    if settings is None:
        settings = GateSettings()
    elif not isinstance(settings, GateSettings):
        raise InvalidInputError(
            f"gate_settings must be a tfcompress.testing.GateSettings, got "
            f"{type(settings).__name__}."
        )
    return TrainingGate(checks, settings)


def judge_export(
    gate: TrainingGate,
    names: Sequence[str],
    labels: Sequence[Labels | None],
    reference: Sequence[np.ndarray],
    candidate: Sequence[np.ndarray],
    *,
    reference_name: str,
    candidate_name: str,
    backend: str,
) -> GateReport:
    """Judge the candidate's outputs against the reference's, output by output.

    Raises:
        InvalidInputError: A check that cannot apply to these outputs (see
            :func:`~tfcompress.testing.judge_outputs_by_name`).
        InvalidDataError: A task metric on an output without labels, labels that do not fit.
    """
    given = {
        name: label.values for name, label in zip(names, labels, strict=True) if label is not None
    }
    return judge_outputs_by_name(
        given,
        dict(zip(names, reference, strict=True)),
        dict(zip(names, candidate, strict=True)),
        checks=gate.checks,
        settings=gate.settings,
        reference=reference_name,
        candidate=candidate_name,
        reference_backend="keras",
        backend=backend,
    )


def rehearse_gate(
    gate: TrainingGate,
    names: Sequence[str],
    labels: Sequence[Labels | None],
    reference: Sequence[np.ndarray],
) -> None:
    """Plan the gate on the validation data before training: raise what judging would raise.

    The reference is judged against itself, with one bootstrap resample (the numbers are
    thrown away; only the errors matter), so every check meets an output, a metric that fits
    it, labels where it needs them and a threshold.

    Raises:
        InvalidInputError: See :func:`judge_export`.
        InvalidDataError: See :func:`judge_export`.
    """
    quick = dataclasses.replace(gate, settings=dataclasses.replace(gate.settings, resamples=1))
    judge_export(
        quick,
        names,
        labels,
        reference,
        reference,
        reference_name="reference",
        candidate_name="reference",
        backend="keras",
    )
