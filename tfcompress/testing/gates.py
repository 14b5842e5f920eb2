"""The single-output accuracy gate: one classifier output, one metric, over :func:`check_gate`.

:func:`check_accuracy_drop` and :func:`assert_accuracy_drop` are thin wrappers: they refuse
a model with several inputs or outputs and a metric that cannot score a classifier, then run
:func:`~tfcompress.testing.output_gates.check_gate` with that one metric and return its
:class:`~tfcompress.testing.report.GateReport`, the report every gate returns. A metric
function (``metric=fn``) is judged like a named metric
(:func:`~tfcompress.bench.task_metrics.function_metric`). :func:`judge_outputs` judges
outputs the caller has already computed.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import numpy as np

from tfcompress.bench.metrics import MetricLike, get_metric, resolve_metric
from tfcompress.errors import InvalidInputError
from tfcompress.testing.judge import Check, judge_outputs_by_name
from tfcompress.testing.output_gates import GateError, check_gate, load_pair
from tfcompress.testing.report import GateReport
from tfcompress.testing.settings import GateSettings, refuse_with_settings

if TYPE_CHECKING:
    from tfcompress.bench.metric_def import MetricDef
    from tfcompress.models.signature import ModelSignature

logger = logging.getLogger(__name__)

__all__ = [
    "AccuracyGateError",
    "assert_accuracy_drop",
    "check_accuracy_drop",
    "judge_outputs",
]

_OUTPUT = "output"  # the name judge_outputs gives the one output it is handed


class AccuracyGateError(GateError):
    """An accuracy gate failed: :attr:`report` holds every verdict."""


class AccuracyGateOptions(TypedDict, total=False):
    """The :class:`GateSettings` fields the single-output gates take as keywords."""

    max_drop: float
    metric: MetricLike
    backend: str
    mode: str
    confidence: float
    interval: str


def judge_outputs(
    labels: np.ndarray,
    reference_outputs: np.ndarray,
    candidate_outputs: np.ndarray,
    *,
    settings: GateSettings,
    reference: str = "reference",
    candidate: str = "candidate",
    reference_backend: str = "",
    backend: str = "",
) -> GateReport:
    """Judge a candidate from both models' outputs on the same labelled samples.

    Use this when you ran the models yourself (integer class labels, one output row per
    sample); :func:`check_accuracy_drop` runs them for you. ``settings`` holds the
    threshold, the metric, mode and interval; the names and backends label the report, whose
    one output is ``"output"``. It does not raise when the gate fails.

    Raises:
        InvalidInputError: Outputs of different shapes or not one row per label.

    Example:
        >>> report = judge_outputs(y, ref_probs, q_probs, settings=GateSettings())  # doctest: +SKIP
        >>> report.passed, report.drop  # doctest: +SKIP
        (True, 0.002)
    """
    labels = np.asarray(labels).reshape(-1)
    ref_out, cand_out = np.asarray(reference_outputs), np.asarray(candidate_outputs)
    if ref_out.ndim == 0 or len(ref_out) != len(labels):
        raise InvalidInputError(
            f"{len(labels)} labels but outputs for {ref_out.shape[:1]} samples; pass one output "
            "row per labelled sample."
        )
    return judge_outputs_by_name(
        {_OUTPUT: labels},
        {_OUTPUT: ref_out},
        {_OUTPUT: cand_out},
        checks=[Check(_OUTPUT, _metric(settings), settings.max_drop)],
        settings=settings,
        reference=reference,
        candidate=candidate,
        reference_backend=reference_backend,
        backend=backend,
    )


def check_accuracy_drop(
    reference: Any,
    candidate: Any,
    data: Any,
    *,
    threads: int = 1,
    settings: GateSettings | None = None,
    **options: Unpack[AccuracyGateOptions],
) -> GateReport:
    """Score both models on ``data`` and judge the drop, without raising when it fails.

    For a classifier with one input and one output: :func:`check_gate` with one metric. The
    metric is checked against the output before anything is judged: accuracy of a box
    regression or of a segmentation mask is refused, as is a model with several inputs or
    outputs; gate those with :func:`~tfcompress.testing.output_gates.check_gate`, which
    judges every output with the metric it needs (and works without labels).

    Args:
        reference: The model the candidate must match (Keras model, ``.tflite`` or a path).
        candidate: The deployed artifact (usually a ``.tflite``: bytes, path or model).
        data: Labelled samples (arrays, ``(x, y)``, ``.npz``, folder... see ``load_data``).
        threads: CPU threads for LiteRT.
        settings: Ready-made settings; then ``options`` must keep their defaults (one
            changed next to ``settings=`` is refused, never ignored).
        **options: :class:`AccuracyGateOptions`, the fields of :class:`GateSettings` they
            build: ``max_drop`` (a fraction, 0.01 = one accuracy point), ``metric``
            (``"top1"``, ``"topK"`` or ``callable(labels, outputs) -> float``), ``backend``
            (of a ``.tflite`` candidate; a Keras candidate runs on Keras), ``mode``
            (``"strict"``, ``"tolerant"`` or ``"proven"``), ``confidence``, ``interval``.

    Returns:
        The report (one verdict); ``report.drop``, ``report.per_class`` read it.

    Raises:
        InvalidInputError: Bad options, different output shapes, a model with several
            inputs or outputs, or a metric that means nothing for the output (the message
            names ``check_gate``).
        InvalidDataError: Data without labels or not fitting the models.
        UnsupportedModelError: A delegate backend asked for a candidate that is not a
            ``.tflite`` (a Keras candidate runs on Keras, an ``.onnx`` on ONNX Runtime).
        BackendUnavailableError: The backend cannot run here (no GPU, no Edge TPU...).

    Example:
        >>> report = check_accuracy_drop(model, "model_int8.tflite", "test.npz")  # doctest: +SKIP
        >>> report.passed, report.drop  # doctest: +SKIP
        (True, 0.0008)
    """
    from tfcompress.models import model_name, model_signature

    unknown = sorted(set(options) - set(AccuracyGateOptions.__annotations__))
    if unknown:
        raise TypeError(f"check_accuracy_drop() got an unexpected keyword argument {unknown[0]!r}")
    if settings is None:
        settings = GateSettings(**options)
    else:
        refuse_with_settings(**options)
    ref, cand = load_pair(reference, candidate, settings.backend)
    signature = model_signature(ref)
    _refuse_several_tensors(signature, model_name(ref))
    output = signature.output_names[0]
    try:
        report = check_gate(
            ref,
            cand,
            data,
            checks=[Check(output, _metric(settings), settings.max_drop)],
            settings=settings,
            threads=threads,
        )
    except InvalidInputError as error:
        if "means nothing" not in str(error) and "needs class scores" not in str(error):
            raise
        raise InvalidInputError(
            f"{str(error).rstrip('.')}; check_accuracy_drop scores classifiers only: gate "
            "this output with tfcompress.testing.check_gate, which takes that metric."
        ) from error
    logger.debug("%s", report.headline())
    return report


def assert_accuracy_drop(
    reference: Any,
    candidate: Any,
    data: Any,
    *,
    threads: int = 1,
    **options: Unpack[AccuracyGateOptions],
) -> GateReport:
    """Fail (raise) when ``candidate`` lost more than ``max_drop`` against ``reference``.

    Modes: ``"strict"`` fails when the measured drop exceeds ``max_drop``; ``"tolerant"`` only
    when the drop is significantly above it (interval lower bound > ``max_drop``), for noisy
    CI on small test sets; ``"proven"`` passes only when the interval's upper bound is within
    ``max_drop``, for release pipelines.

    It takes the arguments of :func:`check_accuracy_drop` but ``settings`` and returns the
    report of a passing gate.

    Raises:
        AccuracyGateError: The gate failed (a :class:`~tfcompress.errors.GateFailedError` and
            an ``AssertionError``); its message holds the table, per-class changes and advice.
        InvalidInputError: See :func:`check_accuracy_drop`.
        BackendUnavailableError: The backend cannot run here.

    Example:
        >>> q = tfcompress.quantize(model, recipe="int8", representative_data=x)  # doctest: +SKIP
        >>> assert_accuracy_drop(model, q.model, (x_test, y_test), max_drop=0.01)  # doctest: +SKIP
    """
    report = check_accuracy_drop(reference, candidate, data, threads=threads, **options)
    if not report.passed:
        raise AccuracyGateError(report)
    return report


def _metric(settings: GateSettings) -> str | MetricDef:
    """The settings' metric as a check takes it: a name, or a metric function's definition."""
    from tfcompress.bench.task_metrics import function_metric

    if callable(settings.metric):
        return function_metric(settings.metric)
    resolve_metric(settings.metric)  # top1 / topK only, as this gate always took
    return get_metric(settings.metric_name).name


def _refuse_several_tensors(signature: ModelSignature, name: str) -> None:
    if len(signature.outputs) == 1 and len(signature.inputs) == 1:
        return
    inputs, outputs = len(signature.inputs), len(signature.outputs)
    raise InvalidInputError(
        f"check_accuracy_drop gates a single-input, single-output classifier, but {name!r} has "
        f"{inputs} input{'s' * (inputs != 1)} and {outputs} output{'s' * (outputs != 1)} "
        f"({', '.join(signature.output_names)}); use tfcompress.testing.check_gate, which "
        "judges each output by name, with or without labels."
    )
