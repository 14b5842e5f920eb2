"""Task metrics: a model's outputs scored against labels, and the label checks they share.

``accuracy`` and ``topK`` (:func:`top_k_metric`), ``binary_accuracy``
(:func:`binary_accuracy_metric`), ``mse``, ``mae`` and ``rmse`` (:func:`regression_metric`) and
``miou`` (:func:`miou_metric`), each a :class:`~tfcompress.bench.metric_def.MetricDef` whose
``prepare`` validates the labels against the outputs and, when they do not fit, names the metric
that does (:func:`metric_for_labels`), registered by name (``@register_metric``; judged on
their drop, ``max_drop``), and a user's metric function as one (:func:`function_metric`).
:func:`~tfcompress.bench.metrics.get_metric` is the way in. Pure numpy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tfcompress.bench.fidelity import (
    binary_threshold,
    class_count,
    class_predictions,
    class_scores,
    describe_shape,
    mean_of_first,
)
from tfcompress.bench.metric_def import MetricDef, Prepared, register_metric
from tfcompress.errors import InvalidDataError, InvalidInputError


def correct_top_k(labels: np.ndarray, outputs: np.ndarray, k: int = 1) -> np.ndarray:
    """Per-sample booleans: is the label among the ``k`` highest of ``(N, C)`` scores?"""
    if k == 1:
        return outputs.argmax(axis=1) == labels
    top = np.argpartition(-outputs, kth=min(k, outputs.shape[1]) - 1, axis=1)[:, :k]
    return (top == labels[:, np.newaxis]).any(axis=1)


def metric_for_labels(
    output_shape: Sequence[int | None], labels: Any, *, output: str = "output"
) -> tuple[str, str]:
    """The task metric that labels fit, and why: the labelled half of ``choose_metric``.

    See :func:`~tfcompress.bench.metrics.choose_metric` for the rules; this names the metric
    the labels point to, ``mse`` for regression targets (which ``choose_metric`` turns into
    ``snr``), and the reason after ``output 'x' (shape ...): ``.

    Raises:
        InvalidInputError: A shape without a sample axis, or labels that fit no metric by
            default (the message asks for ``--metric``).
        InvalidDataError: Labels that are not numbers, or not one per sample.
    """
    shape = tuple(output_shape)
    if not shape:
        raise InvalidInputError(f"the shape of output {output!r} needs a sample axis, got ().")
    per_out, classes = shape[1:], class_count(shape)
    array = _labels(labels, shape[0], output)
    per_label = array.shape[1:]
    whole = _whole(array)
    binary = whole and _binary(array)
    chosen: tuple[str, str] | None = None
    if classes is not None and classes > 1:
        if per_label in ((), (1,)) and whole:
            chosen = "accuracy", "labels are class ids: accuracy (top-1)"
        elif per_label in ((classes,), per_out):
            rows = array.reshape(len(array), -1)
            if binary and (rows.sum(axis=1) == 1).all():
                chosen = "accuracy", "labels are one-hot: accuracy (top-1)"
            elif binary:
                chosen = "binary_accuracy", "labels are multi-hot 0/1 rows: binary_accuracy"
            else:
                chosen = "mse", "labels are real numbers of the output's shape: mse"
    elif classes is not None:  # one unit per sample
        if per_label in ((), (1,)):
            chosen = (
                ("binary_accuracy", "labels are 0/1 for one unit: binary_accuracy")
                if binary
                else ("mse", "labels are numbers for one unit: regression, mse")
            )
    elif len(per_out) >= 2:
        spatial = per_out[:-1]
        mask = per_label in (spatial, (*spatial, 1)) and whole and (per_out[-1] > 1 or binary)
        if mask or (per_label == per_out and binary and (len(per_out) == 2 or per_out[-1] == 1)):
            chosen = "miou", "labels are whole-number class masks: mean IoU (miou)"
        elif per_label == per_out:
            chosen = "mse", "labels are numbers of the output's shape: mse"
    if chosen is None:
        raise InvalidInputError(
            f"cannot choose a metric for output {output!r} (shape {describe_shape(shape)}) with "
            f"labels of shape {describe_shape(array.shape)}; pass --metric (one of "
            f"{', '.join(_metric_names())})."
        )
    return chosen


def top_k_metric(k: int, cut: float | None = None) -> MetricDef:
    """``accuracy`` (``k == 1``) or ``topK``: is the label among the ``k`` highest outputs?"""
    name = "accuracy" if k == 1 else f"top{k}"

    def prepare(labels: np.ndarray, outputs: np.ndarray, output: str) -> Prepared:
        scores = class_scores(outputs) if outputs.dtype.kind in "biuf" else None
        if scores is None:
            raise InvalidInputError(
                f"{name} needs class scores of shape (N, C), but output {output!r} has shape "
                f"{describe_shape(outputs.shape)}; {_suggest(outputs, labels, name)}."
            )
        classes = scores.shape[1]
        if classes == 1 and k > 1:
            raise InvalidInputError(
                f"{name} means nothing for output {output!r} (one unit per sample); use "
                "--metric binary_accuracy."
            )
        if 1 < classes <= k:
            better = "accuracy" if classes == 2 else f"accuracy or top{classes - 1}"
            raise InvalidInputError(
                f"{name} on output {output!r} with {classes} classes is always right; use "
                f"--metric {better}."
            )
        return _class_ids(labels, outputs, scores, output, name), scores

    def correct(ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        if scores.shape[1] == 1:
            threshold = cut if cut is not None else binary_threshold(scores)
            return class_predictions(scores, threshold) == ids
        return correct_top_k(ids, scores, k)

    def bind(reference: np.ndarray) -> MetricDef:
        scores = class_scores(reference)
        return (
            top_k_metric(k, binary_threshold(scores))
            if scores is not None
            else top_k_metric(k, cut)
        )

    what = "top-1 accuracy" if k == 1 else f"top-{k} accuracy"
    return _task(
        name,
        "higher",
        "fraction",
        f"{what}: share of samples whose label is among the {k} highest outputs"
        + (" (one-unit outputs: cut as binary_accuracy)" if k == 1 else ""),
        "mcnemar",
        prepare,
        lambda ids, scores: correct(ids, scores)[:, np.newaxis].astype(np.float64),
        mean_of_first,
        correct,
        bind if cut is None else None,
    )


@register_metric("accuracy")
def accuracy_metric() -> MetricDef:
    """``accuracy``: top-1, :func:`top_k_metric` with ``k=1``."""
    return top_k_metric(1)


@register_metric("binary_accuracy")
def binary_accuracy_metric(cut: float | None = None, *, bound: bool = False) -> MetricDef:
    """``binary_accuracy``: share of 0/1 labels the outputs, cut at a threshold, get right.

    Args:
        cut: The threshold; None reads it from the reference's outputs (0.5 for
            probabilities, 0 for logits).
        bound: The cut was read from the reference, so the name stays ``binary_accuracy``
            (else a given cut names it ``binary_accuracy@T``).
    """
    name = "binary_accuracy" if cut is None or bound else f"binary_accuracy@{cut:g}"

    def prepare(labels: np.ndarray, outputs: np.ndarray, output: str) -> Prepared:
        _check_numeric(outputs, output)
        target = _same_shape(_labels(labels, len(outputs), output), outputs, output, name)
        if not _binary(target):
            raise InvalidInputError(
                f"{name} needs 0/1 labels, but those of output {output!r} hold e.g. "
                f"{_example(target, ~np.isin(target, (0, 1)))}; "
                f"{_suggest(outputs, labels, name)}."
            )
        return target.astype(bool), outputs

    def hits(labels: np.ndarray, outputs: np.ndarray) -> np.ndarray:
        threshold = cut if cut is not None else binary_threshold(outputs)
        return ((outputs > threshold) == labels).reshape(len(outputs), -1)

    def per_sample(labels: np.ndarray, outputs: np.ndarray) -> np.ndarray:
        matrix = hits(labels, outputs)
        return np.stack([matrix.sum(axis=1), np.full(len(matrix), matrix.shape[1])], axis=1)

    def correct(labels: np.ndarray, outputs: np.ndarray) -> np.ndarray | None:
        matrix = hits(labels, outputs)
        return matrix[:, 0] if matrix.shape[1] == 1 else None

    if cut is None:
        description = (
            "binary accuracy: an output above 0.5 counts as positive when the reference "
            "outputs lie in [0, 1] (probabilities), above 0 otherwise (logits)"
        )
    else:
        kind = "probabilities" if cut == 0.5 else "logits" if cut == 0.0 else "a set cut"
        description = (
            f"binary accuracy: an output above {cut:g} counts as positive (the reference "
            f"outputs {kind})"
        )
    return _task(
        name,
        "higher",
        "fraction",
        description,
        "mcnemar",
        prepare,
        per_sample,
        _ratio_of_sums,
        correct,
        (lambda ref: binary_accuracy_metric(binary_threshold(ref), bound=True))
        if cut is None
        else None,
    )


def regression_metric(name: str) -> MetricDef:
    """``mse``, ``mae`` or ``rmse`` against labels of the output's shape, over all elements."""

    def prepare(labels: np.ndarray, outputs: np.ndarray, output: str) -> Prepared:
        _check_numeric(outputs, output)
        target = _same_shape(_labels(labels, len(outputs), output), outputs, output, name)
        n = len(outputs)
        return target.astype(np.float64).reshape(n, -1), outputs.astype(np.float64).reshape(n, -1)

    def per_sample(labels: np.ndarray, outputs: np.ndarray) -> np.ndarray:
        error = outputs - labels
        total = np.abs(error).sum(axis=1) if name == "mae" else (error**2).sum(axis=1)
        return np.stack([total, np.full(len(error), error.shape[1], dtype=np.float64)], axis=1)

    aggregate = (lambda rows: math.sqrt(_ratio_of_sums(rows))) if name == "rmse" else _ratio_of_sums
    words = {"mse": "mean squared", "mae": "mean absolute", "rmse": "root mean squared"}[name]
    return _task(
        name,
        "lower",
        "number",
        f"{words} error against labels of the output's shape, over all elements",
        "bootstrap",
        prepare,
        per_sample,
        aggregate,
    )


@register_metric("mse")
def mse_metric() -> MetricDef:
    """``mse``: :func:`regression_metric`'s mean squared error."""
    return regression_metric("mse")


@register_metric("mae")
def mae_metric() -> MetricDef:
    """``mae``: :func:`regression_metric`'s mean absolute error."""
    return regression_metric("mae")


@register_metric("rmse")
def rmse_metric() -> MetricDef:
    """``rmse``: :func:`regression_metric`'s root mean squared error."""
    return regression_metric("rmse")


@register_metric("miou")
def miou_metric(cut: float | None = None) -> MetricDef:
    """``miou``: mean intersection over union of class masks (argmax, or a cut for one channel)."""

    def prepare(labels: np.ndarray, outputs: np.ndarray, output: str) -> Prepared:
        _check_numeric(outputs, output)
        n, per_out = len(outputs), outputs.shape[1:]
        array = _labels(labels, n, output)
        per_label = array.shape[1:]
        expected = f"(N, {', '.join(map(str, per_out[:-1]))}) whole-number class masks"
        if len(per_out) < 2:
            raise InvalidInputError(
                f"miou needs masks, outputs (N, H, W, C), but output {output!r} has shape "
                f"{describe_shape(outputs.shape)}; {_suggest(outputs, labels, 'miou')}."
            )
        if len(per_out) >= 3 or per_label == per_out[:-1]:
            channels, spatial = per_out[-1], per_out[:-1]
            if per_label in (spatial, (*spatial, 1)):
                ids = array.reshape(n, -1)
            elif per_label == per_out and _binary(array) and (array.sum(axis=-1) == 1).all():
                ids = array.argmax(axis=-1).reshape(n, -1)  # one-hot masks
            else:
                raise InvalidDataError(
                    f"miou on output {output!r} {describe_shape(outputs.shape)} expects labels "
                    f"{expected} (or one-hot), got {describe_shape(array.shape)}."
                )
            scores = outputs.reshape(n, -1, channels)
        elif per_label == per_out:  # (N, H, W) single-channel masks without a channel axis
            ids, scores = array.reshape(n, -1), outputs.reshape(n, -1, 1)
        else:
            raise InvalidDataError(
                f"miou on output {output!r} {describe_shape(outputs.shape)} expects labels "
                f"{expected}, got {describe_shape(array.shape)}."
            )
        if not _whole(ids):
            raise InvalidDataError(
                f"the masks of output {output!r} must hold whole class ids, got e.g. "
                f"{_example(ids, ids != np.round(ids))}."
            )
        return _in_range(ids, max(scores.shape[2], 2), output), scores

    def per_sample(ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        n, _, channels = scores.shape
        classes = max(channels, 2)
        if channels == 1:
            threshold = cut if cut is not None else binary_threshold(scores)
            predicted = (scores[..., 0] > threshold).astype(np.int64)
        else:
            predicted = scores.argmax(axis=-1)
        offset = (np.arange(n) * classes)[:, np.newaxis]
        size = n * classes

        def count(values: np.ndarray) -> np.ndarray:
            return np.bincount(values, minlength=size).reshape(n, classes)

        hit = count((ids + offset)[ids == predicted])
        return np.concatenate(
            [hit, count((ids + offset).ravel()), count((predicted + offset).ravel())], axis=1
        )

    def aggregate(rows: np.ndarray) -> float:
        hit, truth, predicted = np.split(rows.sum(axis=0).astype(np.float64), 3)
        union = truth + predicted - hit
        present = union > 0
        return float((hit[present] / union[present]).mean()) if present.any() else math.nan

    return _task(
        "miou",
        "higher",
        "fraction",
        "mean intersection over union of class masks, over the classes present in the labels "
        "or predictions of the samples scored (outputs (N, ..., C): argmax; one channel: cut "
        "at 0.5 for probabilities, 0 for logits)",
        "bootstrap",
        prepare,
        per_sample,
        aggregate,
        None,
        (lambda ref: miou_metric(binary_threshold(ref))) if cut is None else None,
    )


def function_metric(function: Callable[[np.ndarray, np.ndarray], float]) -> MetricDef:
    """``function(labels, outputs) -> float`` as a task metric (higher is better, a fraction).

    What ``metric=fn`` of the gates, the plugin, evaluate and benchmark becomes. The gates
    judge it on its drop with a bootstrap interval, so they need it on random subsets of the
    samples and per class: its per-sample rows are indices into the arrays it was prepared
    with.
    """
    name = getattr(function, "__name__", "") or "metric"
    if name == "<lambda>":
        name = "metric"
    # Each model's (labels, outputs) are kept once; a per-sample row is (which, index), so
    # any subset of rows still knows which arrays it indexes.
    prepared: list[Prepared] = []

    def prepare(labels: np.ndarray, outputs: np.ndarray, output: str) -> Prepared:
        labels, outputs = np.asarray(labels), np.asarray(outputs)
        if labels.ndim == 0 or outputs.ndim == 0 or len(labels) != len(outputs):
            raise InvalidDataError(
                f"{name} on output {output!r}: {labels.shape[:1]} labels for "
                f"{outputs.shape[:1]} outputs; pass one output row per labelled sample."
            )
        return labels, outputs

    def per_sample(labels: np.ndarray, outputs: np.ndarray) -> np.ndarray:
        prepared.append((labels, outputs))
        which = np.full(len(labels), len(prepared) - 1)
        return np.stack([which, np.arange(len(labels))], axis=1)

    def aggregate(rows: np.ndarray) -> float:
        labels, outputs = prepared[int(rows[0, 0])]
        indices = rows[:, 1]
        return float(function(labels[indices], outputs[indices]))

    return _task(
        name,
        "higher",
        "fraction",
        f"{name}: the metric function given, scored on both models against the labels",
        "bootstrap",
        prepare,
        per_sample,
        aggregate,
    )


def _task(
    name: str, direction: str, unit: str, description: str, interval: str, *how: Any
) -> MetricDef:
    """A task metric: judged on its drop (``max_drop``), so no threshold of its own."""
    return MetricDef(name, "task", direction, unit, description, "max_drop", None, interval, *how)


def _ratio_of_sums(rows: np.ndarray) -> float:
    return float(rows[:, 0].sum() / rows[:, 1].sum())


def _labels(labels: Any, samples: int | None, output: str) -> np.ndarray:
    array = np.asarray(labels)
    if array.dtype.kind not in "biuf":
        raise InvalidDataError(f"the labels of output {output!r} are {array.dtype}, not numbers.")
    if array.ndim == 0 or (samples is not None and len(array) != samples):
        count = 0 if array.ndim == 0 else len(array)
        raise InvalidDataError(
            f"{count} labels for {samples} samples of output {output!r}; pass one label per "
            "sample, in the same order."
        )
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise InvalidDataError(f"the labels of output {output!r} hold NaN or Inf.")
    return array


def _whole(array: np.ndarray) -> bool:
    return array.dtype.kind in "biu" or bool((array == np.round(array)).all())


def _binary(array: np.ndarray) -> bool:
    return bool(np.isin(array, (0, 1)).all())


def _example(array: np.ndarray, bad: np.ndarray) -> str:
    return f"{array[bad].flat[0].item()!r}" if bad.any() else "?"


def _check_numeric(outputs: np.ndarray, output: str) -> None:
    if outputs.dtype.kind not in "biuf" or outputs.ndim == 0 or len(outputs) == 0:
        raise InvalidDataError(
            f"the outputs of {output!r} must be numbers with a sample axis, got "
            f"{outputs.dtype} {outputs.shape}."
        )


def _same_shape(labels: np.ndarray, outputs: np.ndarray, output: str, name: str) -> np.ndarray:
    if labels.shape == outputs.shape:
        return labels
    if labels.shape[1:] in ((), (1,)) and outputs.shape[1:] in ((), (1,)):
        return labels.reshape(outputs.shape)
    raise InvalidDataError(
        f"{name} on output {output!r} expects labels of the output's shape "
        f"{describe_shape(outputs.shape)}, got {describe_shape(labels.shape)}; "
        f"{_suggest(outputs, labels, name)}."
    )


def _class_ids(
    labels: np.ndarray, outputs: np.ndarray, scores: np.ndarray, output: str, name: str
) -> np.ndarray:
    n, classes = scores.shape
    array = _labels(labels, n, output)
    per_label = array.shape[1:]
    if per_label in ((), (1,)):
        ids = array.reshape(n)
    elif per_label in ((classes,), outputs.shape[1:]) and classes > 1:
        if not _binary(array):
            raise InvalidInputError(
                f"the labels of output {output!r} are real numbers of its shape, a regression "
                f"target, not classes; {_suggest(outputs, array, name)}."
            )
        rows = array.reshape(n, classes)
        if not (rows.sum(axis=1) == 1).all():
            raise InvalidInputError(
                f"the labels of output {output!r} are multi-hot 0/1 rows (multi-label), not one "
                "class per sample; use --metric binary_accuracy."
            )
        ids = rows.argmax(axis=1)
    else:
        raise InvalidDataError(
            f"{name} on output {output!r} {describe_shape(outputs.shape)} expects labels of "
            f"shape (N,) (class ids) or (N, {classes}) (one-hot), got "
            f"{describe_shape(array.shape)}."
        )
    if not _whole(ids):
        if classes == 1:
            raise InvalidInputError(
                f"the labels of output {output!r} are real numbers, a regression target, not "
                f"classes; {_suggest(outputs, array, name)}."
            )
        raise InvalidDataError(
            f"the class labels of output {output!r} must be whole numbers, got e.g. "
            f"{_example(ids, ids != np.round(ids))}."
        )
    return _in_range(ids, max(classes, 2), output)


def _in_range(ids: np.ndarray, classes: int, output: str) -> np.ndarray:
    bad = (ids < 0) | (ids >= classes)
    if bad.any():
        raise InvalidDataError(
            f"output {output!r} has {classes} classes (ids 0..{classes - 1}) but its labels hold "
            f"{_example(ids, bad)}; check that the data belongs to this model."
        )
    return ids.astype(np.int64)


def _suggest(outputs: np.ndarray, labels: Any, current: str) -> str:
    try:
        chosen = metric_for_labels(outputs.shape, labels)[0] if labels is not None else None
    except InvalidInputError:
        chosen = None
    if chosen == "mse":  # labels that are regression targets
        return "use --metric mse (or mae, rmse) with --max-drop, or --metric snr"
    if chosen is None or chosen == current:
        return f"pass a --metric that fits (one of {', '.join(_metric_names())})"
    return f"use --metric {chosen}"


def _metric_names() -> tuple[str, ...]:
    # The registry (bench/metrics.py) imports this module, so it is read when a message needs it.
    from tfcompress.bench.metrics import metric_names

    return metric_names()
