"""Accuracy-drop gates: fail when a compressed artifact lost more accuracy than allowed.

Both models are scored on the same samples, the candidate through the runtime it is deployed
with, and the drop is judged with paired statistics (see :mod:`tfcompress.testing.stats`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tfcompress.bench.metrics import MetricLike, correct_top_k, get_metric, resolve_metric
from tfcompress.errors import GateFailedError, InvalidInputError
from tfcompress.testing.result import ClassChange, GateResult
from tfcompress.testing.settings import DEFAULT_BACKEND, DEFAULT_MAX_DROP, GateSettings
from tfcompress.testing.stats import PairedDifference, paired_difference, paired_metric_difference

if TYPE_CHECKING:
    from tfcompress.models.signature import ModelSignature

logger = logging.getLogger(__name__)

__all__ = [
    "AccuracyGateError",
    "assert_accuracy_drop",
    "check_accuracy_drop",
    "judge_outputs",
]

_TOLERANCE = 1e-12  # drops are ratios of counts; keep 0.01 == 1/100 from failing on rounding


class AccuracyGateError(GateFailedError):
    """An accuracy gate failed; :attr:`result` holds the full :class:`GateResult`."""

    def __init__(self, result: GateResult) -> None:
        super().__init__(result.explain())
        self.result = result


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
) -> GateResult:
    """Judge a candidate from both models' outputs on the same labelled samples.

    Use this when you ran the models yourself; :func:`check_accuracy_drop` runs them for you.

    Args:
        labels: Integer class per sample.
        reference_outputs: Reference outputs, one row per sample.
        candidate_outputs: Candidate outputs, same shape and sample order.
        settings: Threshold, metric, mode and interval.
        reference: Reference display name.
        candidate: Candidate display name.
        reference_backend: Where the reference ran (for the report).
        backend: Where the candidate ran.

    Returns:
        The verdict; it does not raise when the gate fails.

    Raises:
        InvalidInputError: Outputs of different shapes or not one row per label.

    Example:
        >>> result = judge_outputs(y, ref_probs, q_probs, settings=GateSettings())  # doctest: +SKIP
        >>> result.passed  # doctest: +SKIP
        True
    """
    labels = np.asarray(labels).reshape(-1)
    ref_out, cand_out = np.asarray(reference_outputs), np.asarray(candidate_outputs)
    if ref_out.shape != cand_out.shape:
        raise InvalidInputError(
            f"the reference outputs shape {ref_out.shape[1:]} but the candidate outputs "
            f"{cand_out.shape[1:]} (over {ref_out.shape[:1]} vs {cand_out.shape[:1]} samples); "
            "gate a compressed variant of the same model on the same samples."
        )
    if ref_out.ndim == 0 or len(ref_out) != len(labels):
        raise InvalidInputError(
            f"{len(labels)} labels but outputs for {ref_out.shape[:1]} samples; pass one output "
            "row per labelled sample."
        )
    method = settings.interval_method
    stats = {
        "confidence": settings.confidence,
        "resamples": settings.resamples,
        "seed": settings.seed,
    }
    k = settings.top_k
    if k is not None:
        ref_ok, cand_ok = correct_top_k(labels, ref_out, k), correct_top_k(labels, cand_out, k)
        difference = paired_difference(ref_ok, cand_ok, method=method, **stats)
        per_class = _per_class(
            labels, lambda m: float(ref_ok[m].mean()), lambda m: float(cand_ok[m].mean())
        )
    else:
        ref_score = _scorer(settings.metric, labels, ref_out)
        cand_score = _scorer(settings.metric, labels, cand_out)
        difference = paired_metric_difference(ref_score, cand_score, len(labels), **stats)
        per_class = _per_class(labels, ref_score, cand_score)
    passed = _passes(settings.mode, difference, settings.max_drop)
    return GateResult(
        reference, candidate, reference_backend, backend, settings, difference, per_class, passed
    )


def check_accuracy_drop(
    reference: Any,
    candidate: Any,
    data: Any,
    *,
    max_drop: float = DEFAULT_MAX_DROP,
    metric: MetricLike = "top1",
    backend: str = DEFAULT_BACKEND,
    mode: str = "strict",
    confidence: float = 0.95,
    interval: str = "auto",
    threads: int = 1,
    settings: GateSettings | None = None,
) -> GateResult:
    """Score both models on ``data`` and judge the drop, without raising when it fails.

    For a classifier with one input and one output. The metric is checked against the
    output before anything is scored: accuracy of a box regression or of a segmentation
    mask is refused, as is a model with several inputs or outputs; gate those with
    :func:`~tfcompress.testing.output_gates.check_gate`, which judges every output with the
    metric it needs (and works without labels).

    Args:
        reference: The model the candidate must match (Keras model, ``.tflite`` or a path).
        candidate: The deployed artifact (usually a ``.tflite``: bytes, path or model).
        data: Labelled samples (arrays, ``(x, y)``, ``.npz``, folder... see ``load_data``).
        max_drop: Allowed drop as a fraction in [0, 1] (0.01 = one accuracy point).
        metric: ``"top1"``, ``"topK"`` or ``callable(labels, outputs) -> float``.
        backend: Runtime for a ``.tflite`` candidate (a Keras candidate runs on Keras).
        mode: ``"strict"``, ``"tolerant"`` or ``"proven"`` (see :class:`GateSettings`).
        confidence: Two-sided level of the interval.
        interval: ``"auto"``, ``"mcnemar"`` or ``"bootstrap"``.
        threads: CPU threads for LiteRT.
        settings: Ready-made settings; when given, the options above are ignored.

    Returns:
        The verdict.

    Raises:
        InvalidInputError: Bad options, different output shapes, a model with several
            inputs or outputs, or a metric that means nothing for the output (the message
            names ``check_gate``).
        InvalidDataError: Data without labels or not fitting the models.
        UnsupportedModelError: A delegate backend asked for a candidate that is not a
            ``.tflite`` (a Keras candidate runs on Keras, an ``.onnx`` on ONNX Runtime).
        BackendUnavailableError: The backend cannot run here (no GPU, no Edge TPU...).

    Example:
        >>> result = check_accuracy_drop(model, "model_int8.tflite", "test.npz")  # doctest: +SKIP
    """
    from tfcompress.bench.paired import run_model
    from tfcompress.data import Dataset, load_data, validate_for_model
    from tfcompress.models import model_name, model_signature
    from tfcompress.testing.output_gates import display_names, load_pair

    if settings is None:
        settings = GateSettings(
            max_drop=max_drop,
            metric=metric,
            mode=mode,
            backend=backend,
            confidence=confidence,
            interval=interval,
        )
    ref, cand = load_pair(reference, candidate, settings.backend)
    signature = model_signature(ref)
    _refuse_several_tensors(signature, model_name(ref))
    spec, output = signature.inputs[0], signature.output_names[0]
    raw = load_data(data, sample_rank=len(spec.sample_shape))
    what = "gate data"
    if raw.y is None:
        validate_for_model(raw, spec, require_labels=True, what=what)  # raises: no labels
    samples = Dataset({spec.name: validate_for_model(Dataset(raw.x), spec, what=what).x})
    names = display_names(model_name(ref), model_name(cand))
    ref_run = run_model(ref, samples, signature, name=names[0], threads=threads)
    ref_out = ref_run.outputs[output]
    # Refuse a metric that means nothing for this output (accuracy of a box or a mask)
    # before scoring it, on the labels as given (not yet turned into class ids).
    _check_metric_fits(settings, _one_label_array(raw.y), ref_out, output)
    labels = validate_for_model(raw, spec, require_labels=True, what=what).y
    cand_run = run_model(
        cand, samples, signature, name=names[1], backend=settings.backend, threads=threads
    )
    result = judge_outputs(
        labels,
        ref_out,
        cand_run.outputs[output],
        settings=settings,
        reference=names[0],
        candidate=names[1],
        reference_backend=ref_run.backend,
        backend=cand_run.backend,
    )
    logger.debug("%s", result)
    return result


def assert_accuracy_drop(
    reference: Any,
    candidate: Any,
    data: Any,
    *,
    max_drop: float = DEFAULT_MAX_DROP,
    metric: MetricLike = "top1",
    backend: str = DEFAULT_BACKEND,
    mode: str = "strict",
    confidence: float = 0.95,
    interval: str = "auto",
    threads: int = 1,
) -> GateResult:
    """Fail (raise) when ``candidate`` lost more than ``max_drop`` against ``reference``.

    Modes: ``"strict"`` fails when the measured drop exceeds ``max_drop``; ``"tolerant"`` only
    when the drop is significantly above it (interval lower bound > ``max_drop``), for noisy
    CI on small test sets; ``"proven"`` passes only when the interval's upper bound is within
    ``max_drop``, for release pipelines.

    Args:
        reference: The model the candidate must match (Keras model, ``.tflite`` or a path).
        candidate: The deployed artifact, run through ``backend``.
        data: Labelled samples.
        max_drop: Allowed drop as a fraction in [0, 1] (0.01 = one accuracy point).
        metric: ``"top1"``, ``"topK"`` or ``callable(labels, outputs) -> float``.
        backend: Runtime for a ``.tflite`` candidate.
        mode: ``"strict"``, ``"tolerant"`` or ``"proven"``.
        confidence: Two-sided level of the interval.
        interval: ``"auto"``, ``"mcnemar"`` or ``"bootstrap"``.
        threads: CPU threads for LiteRT.

    Returns:
        The verdict of a passing gate.

    Raises:
        AccuracyGateError: The gate failed (a :class:`~tfcompress.errors.GateFailedError` and
            an ``AssertionError``); its message holds the table, per-class changes and advice.
        InvalidInputError: See :func:`check_accuracy_drop`.
        BackendUnavailableError: The backend cannot run here.

    Example:
        >>> q = tfcompress.quantize(model, recipe="int8", representative_data=x)  # doctest: +SKIP
        >>> assert_accuracy_drop(model, q.model, (x_test, y_test), max_drop=0.01)  # doctest: +SKIP
    """
    result = check_accuracy_drop(
        reference,
        candidate,
        data,
        max_drop=max_drop,
        metric=metric,
        backend=backend,
        mode=mode,
        confidence=confidence,
        interval=interval,
        threads=threads,
    )
    if not result.passed:
        raise AccuracyGateError(result)
    return result


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


def _one_label_array(labels: Any) -> Any:
    """The labels as given; None for labels of several outputs (refused later, as before)."""
    if isinstance(labels, dict):
        return next(iter(labels.values())) if len(labels) == 1 else None
    return labels


def _check_metric_fits(
    settings: GateSettings, labels: Any, outputs: np.ndarray, output: str
) -> None:
    """Refuse a named metric that cannot score ``outputs`` against ``labels``.

    A callable metric is the user's own and is not checked.

    Raises:
        InvalidInputError: The metric means nothing for this output (accuracy of a box
            regression or of a segmentation mask); the message names ``check_gate``.
        InvalidDataError: Labels that do not fit the output (class ids out of range...).
    """
    if callable(settings.metric) or labels is None:
        return
    definition = get_metric(settings.metric_name).for_reference(outputs)
    try:
        definition.validate(labels, outputs, output=output)
    except InvalidInputError as error:
        raise InvalidInputError(
            f"{str(error).rstrip('.')}; check_accuracy_drop scores classifiers only: gate "
            "this output with tfcompress.testing.check_gate, which takes that metric."
        ) from error


def _passes(mode: str, difference: PairedDifference, max_drop: float) -> bool:
    bound = {"strict": difference.drop, "tolerant": difference.ci_low, "proven": difference.ci_high}
    return bound[mode] <= max_drop + _TOLERANCE


def _scorer(
    metric: MetricLike, labels: np.ndarray, outputs: np.ndarray
) -> Callable[[np.ndarray], float]:
    score = resolve_metric(metric)[1]

    def on(indices: np.ndarray) -> float:
        return float(score(labels[indices], outputs[indices]))

    return on


def _per_class(
    labels: np.ndarray,
    reference_score: Callable[[np.ndarray], float],
    candidate_score: Callable[[np.ndarray], float],
) -> tuple[ClassChange, ...]:
    changes = []
    for label in np.unique(labels):
        mask = np.flatnonzero(labels == label)
        changes.append(
            ClassChange(int(label), int(mask.size), reference_score(mask), candidate_score(mask))
        )
    return tuple(sorted(changes, key=lambda c: (c.change, c.label)))
