"""Metrics over model outputs: the registry of named task and fidelity metrics.

Two kinds (see :class:`~tfcompress.bench.metric_def.MetricDef`):

* **task** metrics compare each model's outputs to labels: ``accuracy`` (alias ``top1``),
  ``topK`` (e.g. ``top5``), ``binary_accuracy`` (``binary_accuracy@T`` for a fixed cut),
  ``mse``, ``mae``, ``rmse`` and ``miou`` (registered in :mod:`tfcompress.bench.task_metrics`).
  A gate judges their drop, the worsening from reference to candidate in the metric's
  direction (positive = the candidate is worse).
* **fidelity** metrics need no labels and compare the candidate's outputs to the
  reference's: ``snr`` (dB), ``cosine``, ``max_abs`` and ``agreement`` (defined in
  :mod:`tfcompress.bench.fidelity`, each with its gate threshold).

Every metric scores any subset of samples from per-sample statistics that add up (counts,
sums of squares, the diagonal and marginals of a confusion matrix), so scoring a bootstrap
resample is a sum over rows. A metric is a factory registered with ``@register_metric`` in
any module of ``bench/`` (:data:`~tfcompress.bench.metric_def.METRICS`); this module maps
names and aliases to definitions (:func:`get_metric`, :func:`choose_metric`). Pure numpy.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tfcompress.bench.fidelity import class_count, class_scores, describe_shape
from tfcompress.bench.metric_def import METRICS, MetricDef
from tfcompress.bench.task_metrics import binary_accuracy_metric, metric_for_labels, top_k_metric
from tfcompress.bench.thresholds import finite_number
from tfcompress.errors import InvalidInputError

Metric = Callable[[np.ndarray, np.ndarray], float]  # (labels, outputs) -> score
MetricLike = str | Metric

_PROBABILITY_TOLERANCE = 0.05  # int8 softmax rows sum to 1 within a few 1/256 steps
_ALIASES = {
    "top1": "accuracy",
    "top-1": "accuracy",
    "mean_iou": "miou",
    "sqnr": "snr",
    "cosine_similarity": "cosine",
    "top1_agreement": "agreement",
}


def resolve_metric(metric: MetricLike) -> tuple[str, Metric]:
    """Turn ``"accuracy"``/``"top1"``, ``"top5"`` (any k) or a callable into (name, function).

    Only top-k names and callables, as before the registry: :class:`GateSettings` and the
    single-output gate rely on it. Use :func:`get_metric` for every named metric.

    Raises:
        InvalidInputError: An unknown metric name.

    Example:
        >>> resolve_metric("top5")[0]
        'top5'
    """
    if callable(metric):
        return getattr(metric, "__name__", "custom"), metric
    match = re.fullmatch(r"accuracy|top-?(\d+)", str(metric).lower())
    if match and int(match.group(1) or 1) >= 1:
        definition = top_k_metric(int(match.group(1) or 1))
        return definition.name, definition.score
    raise InvalidInputError(
        f"unknown metric {metric!r}; use 'accuracy' (top-1), topN for the top-N accuracy "
        "('top5', 'top3'...), or a callable(labels, outputs) -> float."
    )


def get_metric(name: str | MetricDef) -> MetricDef:
    """The :class:`MetricDef` of a metric name (case-insensitive; aliases allowed).

    Names: ``accuracy`` (``top1``, ``top-1``), ``topK`` (``top5``, ``top-3``...),
    ``binary_accuracy`` (cut 0.5 when the reference outputs lie in [0, 1], probabilities,
    else 0.0, logits; ``binary_accuracy@T`` cuts at ``T``), ``mse``, ``mae``, ``rmse``,
    ``miou`` (``mean_iou``), ``snr`` (``sqnr``), ``cosine``, ``max_abs``, ``agreement``. A
    :class:`MetricDef` is returned as is.

    Raises:
        InvalidInputError: An unknown name; the message lists the valid ones.

    Example:
        >>> get_metric("TOP5").name, get_metric("sqnr").name
        ('top5', 'snr')
    """
    if isinstance(name, MetricDef):
        return name
    if not isinstance(name, str):
        raise InvalidInputError(f"a metric is a name such as 'accuracy', got {name!r}.")
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    top = re.fullmatch(r"top-?(\d+)", key)
    if top and int(top.group(1)) >= 1:
        return top_k_metric(int(top.group(1)))
    cut = re.fullmatch(r"binary_accuracy@(.+)", key)
    if cut:
        return binary_accuracy_metric(finite_number(cut.group(1), f"threshold of {name!r}"))
    return METRICS.get(key if key in METRICS else name).factory()


def choose_metric(
    output_shape: Sequence[int | None],
    labels: Any | None,
    *,
    output: str = "output",
    reference_outputs: Any | None = None,
) -> tuple[MetricDef, str]:
    """The metric to gate an output on when the user names none, and why (one sentence).

    With labels (per-sample output shape ``S``, per-sample label shape ``L``):

    * class scores ``S = (C,)``, ``C > 1``: class ids (``L`` is ``()`` or ``(1,)``) or
      one-hot rows -> ``accuracy``; multi-hot 0/1 rows -> ``binary_accuracy``; other real
      labels of the output's shape -> ``mse``;
    * one unit per sample (``S`` is ``()`` or ``(1,)``): 0/1 labels -> ``binary_accuracy``,
      other numbers -> ``mse``;
    * masks ``S = (H, W, C)`` (or ``(L, C)``) with whole-number labels ``(H, W)`` or
      ``(H, W, 1)`` -> ``miou`` (single-channel outputs with 0/1 masks too); real labels of
      the output's shape -> ``mse``.

    Without labels: ``agreement`` for class scores ``(N, C)`` whose reference rows are
    probabilities (non-negative, summing to 1); other outputs (boxes, masks, audio,
    embeddings, logits) -> ``snr``. Without ``reference_outputs`` the shape alone decides:
    every ``(N, C)`` output counts as class scores. ``output`` names the output in the
    reason, one sentence for the user, returned with the metric.

    Raises:
        InvalidInputError: Labels that fit no metric by default; the message asks for
            ``--metric``.
        InvalidDataError: Labels that are not numbers, or not one per sample.

    Example:
        >>> metric, reason = choose_metric((None, 16000, 1), None, output="wave")
        >>> metric.name
        'snr'
        >>> reason
        "no labels for output 'wave' (shape (N, 16000, 1)): fidelity to the reference, snr"
    """
    shape = tuple(output_shape)
    if not shape:
        raise InvalidInputError(f"the shape of output {output!r} needs a sample axis, got ().")
    what = f"output {output!r} (shape {describe_shape(shape)})"
    if labels is None:
        classes = class_count(shape)
        if classes is not None and classes > 1:
            if reference_outputs is None or _probability_rows(reference_outputs):
                return get_metric("agreement"), (
                    f"no labels for {what}: fidelity to the reference, top-1 agreement"
                )
            return get_metric("snr"), (
                f"no labels for {what}: fidelity to the reference, snr (the rows are not "
                "probabilities; if they are class logits, pass --metric agreement)"
            )
        return get_metric("snr"), f"no labels for {what}: fidelity to the reference, snr"
    name, why = metric_for_labels(shape, labels, output=output)
    if name == "mse":
        # A regression error has no threshold that means the same for every output (it is in
        # the output's unit), so the default is fidelity to the reference, which has one.
        return get_metric("snr"), (
            f"{what}: {why.removesuffix(': mse').removesuffix(', mse')} (regression "
            "targets, whose error has no unit-free threshold): fidelity to the reference, snr; "
            "gate on the labels with --metric mse --max-drop X"
        )
    return get_metric(name), f"{what}: {why}"


def _probability_rows(reference: Any) -> bool:
    scores = class_scores(np.asarray(reference))
    if scores is None or scores.dtype.kind not in "biuf" or not np.isfinite(scores).all():
        return False
    sums = scores.sum(axis=1)
    return bool(scores.min() >= 0.0 and np.abs(sums - 1.0).max() <= _PROBABILITY_TOLERANCE)


def metric_names() -> tuple[str, ...]:
    """Names :func:`get_metric` takes: ``accuracy``, ``top5`` (any ``topN``), the registered.

    The registered metrics judged on their drop, then those with a threshold of their own,
    each group in registration order. Every name is a real one (``top5`` stands beside
    ``top3``, ``top10``...: the unknown-metric message says so).

    Example:
        >>> metric_names()[:3]
        ('accuracy', 'top5', 'binary_accuracy')
    """
    names = sorted(METRICS, key=lambda n: METRICS.get(n).threshold is not None)
    return ("accuracy", "top5", *(n for n in names if n != "accuracy"))


def task_metric_names() -> tuple[str, ...]:
    """The task metrics (judged against labels, on their drop), ``top5`` included.

    Example:
        >>> task_metric_names()
        ('accuracy', 'top5', 'binary_accuracy', 'mse', 'mae', 'rmse', 'miou')
    """
    return tuple(n for n in metric_names() if get_metric(n).kind == "task")
