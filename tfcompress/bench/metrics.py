"""Metrics over model outputs: a registry of named task and fidelity metrics.

Two kinds (see :class:`MetricDef`):

* **task** metrics compare each model's outputs to labels: ``accuracy`` (alias ``top1``),
  ``topK`` (e.g. ``top5``), ``binary_accuracy`` (``binary_accuracy@T`` for a fixed cut),
  ``mse``, ``mae``, ``rmse`` and ``miou``. A gate judges their drop, the worsening from
  reference to candidate in the metric's direction (positive = the candidate is worse).
* **fidelity** metrics need no labels and compare the candidate's outputs to the
  reference's: ``snr`` (dB), ``cosine``, ``max_abs`` and ``agreement``.

Every metric scores any subset of samples from per-sample statistics that add up (counts,
sums of squares, the diagonal and marginals of a confusion matrix), so scoring a bootstrap
resample is a sum over rows. :func:`resolve_metric` keeps its contract (top-k names or a
callable) for existing callers; :func:`get_metric` and :func:`choose_metric` are the
registry. Pure numpy.

Example:
    >>> get_metric("mse").score(np.array([[1.0], [2.0]]), np.array([[1.0], [4.0]]))
    2.0
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfcompress.bench.fidelity import (
    DEFAULT_MIN_AGREEMENT,
    DEFAULT_MIN_COSINE,
    DEFAULT_MIN_SNR_DB,
    FIDELITY_METRICS,
    Prepared,
    binary_threshold,
    class_predictions,
    class_scores,
    describe_shape,
)
from tfcompress.errors import InvalidDataError, InvalidInputError

__all__ = [
    "DEFAULT_MIN_AGREEMENT",
    "DEFAULT_MIN_COSINE",
    "DEFAULT_MIN_SNR_DB",
    "METRIC_NAMES",
    "Metric",
    "MetricDef",
    "MetricLike",
    "choose_metric",
    "correct_top_k",
    "get_metric",
    "resolve_metric",
]

Metric = Callable[[np.ndarray, np.ndarray], float]  # (labels, outputs) -> score
MetricLike = str | Metric

METRIC_NAMES = (
    "accuracy",
    "topK",
    "binary_accuracy",
    "mse",
    "mae",
    "rmse",
    "miou",
    "snr",
    "cosine",
    "max_abs",
    "agreement",
)
_PROBABILITY_TOLERANCE = 0.05  # int8 softmax rows sum to 1 within a few 1/256 steps


def correct_top_k(labels: np.ndarray, outputs: np.ndarray, k: int = 1) -> np.ndarray:
    """Per-sample booleans: is the label among the ``k`` highest outputs?

    A single-unit output is read as a binary probability/logit (positive class when > 0.5
    for probabilities in [0, 1], > 0 otherwise).

    Example:
        >>> correct_top_k(np.array([1, 0]), np.array([[0.1, 0.9], [0.2, 0.8]]))
        array([ True, False])
    """
    outputs = outputs.reshape(len(outputs), -1)
    if outputs.shape[1] == 1:
        threshold = 0.5 if outputs.min() >= 0 and outputs.max() <= 1 else 0.0
        return (outputs[:, 0] > threshold).astype(np.int64) == labels
    if k == 1:
        return outputs.argmax(axis=1) == labels
    top = np.argpartition(-outputs, kth=min(k, outputs.shape[1]) - 1, axis=1)[:, :k]
    return (top == labels[:, np.newaxis]).any(axis=1)


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
    name = str(metric).lower()
    if name in {"accuracy", "top1", "top-1"}:
        return "accuracy", lambda labels, outputs: float(correct_top_k(labels, outputs).mean())
    match = re.fullmatch(r"top-?(\d+)", name)
    if match and int(match.group(1)) >= 1:
        k = int(match.group(1))
        return f"top{k}", lambda labels, outputs: float(correct_top_k(labels, outputs, k).mean())
    raise InvalidInputError(
        f"unknown metric {metric!r}; use 'accuracy' (top-1), 'topK' such as 'top5', or a "
        "callable(labels, outputs) -> float."
    )


@dataclass(frozen=True)
class MetricDef:
    """A named metric: what it compares, which way is better, how to show it, how to score.

    Task metrics take ``(labels, outputs)``; fidelity metrics take
    ``(reference_outputs, candidate_outputs)``. Below, *target* is whichever comes first.

    Attributes:
        name: Canonical name (``"accuracy"``, ``"top5"``, ``"snr"``...).
        kind: ``"task"`` (needs labels; a gate judges the drop reference -> candidate) or
            ``"fidelity"`` (no labels; a gate judges the value itself).
        direction: ``"higher"`` or ``"lower"`` is better.
        unit: ``"fraction"`` (shown in %, changes in points), ``"dB"`` or ``"number"``.
        description: One sentence for people, including any threshold used.
        threshold_name: The gate threshold that applies: ``"max_drop"`` for every task
            metric, else ``"min_snr"``, ``"min_cosine"``, ``"max_abs"``, ``"min_agreement"``.
        default_threshold: Threshold when none is given; None where no unit-free default
            exists (``mse``, ``mae``, ``rmse``, ``max_abs``). Fraction task metrics take
            the gate's ``max_drop`` instead, so this is None for them too.
        interval: Default interval: ``"mcnemar"`` (per-sample correctness),
            ``"bootstrap"``, ``"clopper-pearson"`` (agreement) or ``"none"`` (``max_abs``).
        prepare: ``(target, outputs, output_name) -> (target, outputs)``: validates (raises
            :class:`~tfcompress.errors.InvalidDataError` / ``InvalidInputError``) and
            normalises.
        per_sample: Prepared ``(target, outputs) -> (N, k)`` per-sample statistics.
        aggregate: Rows of ``per_sample`` for a subset -> the metric on that subset.
        correctness: Prepared ``(target, outputs) ->`` per-sample booleans, or None where
            the metric is not per-sample correctness (then McNemar does not apply).
        binder: ``reference_outputs -> MetricDef`` fixing anything read from the outputs
            (the cut of single-unit outputs), so both models are scored alike.

    Example:
        >>> acc = get_metric("top1")
        >>> acc.name, acc.kind, acc.direction, acc.unit
        ('accuracy', 'task', 'higher', 'fraction')
    """

    name: str
    kind: str
    direction: str
    unit: str
    description: str
    threshold_name: str
    default_threshold: float | None
    interval: str
    prepare: Callable[[np.ndarray, np.ndarray, str], Prepared] = field(repr=False, compare=False)
    per_sample: Callable[[np.ndarray, np.ndarray], np.ndarray] = field(repr=False, compare=False)
    aggregate: Callable[[np.ndarray], float] = field(repr=False, compare=False)
    correctness: Callable[[np.ndarray, np.ndarray], np.ndarray | None] | None = field(
        default=None, repr=False, compare=False
    )
    binder: Callable[[np.ndarray], MetricDef] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def higher_is_better(self) -> bool:
        """True when a larger value is better (accuracy, snr), False for errors (mse)."""
        return self.direction == "higher"

    def validate(self, target: Any, outputs: Any, *, output: str = "output") -> Prepared:
        """Check ``target`` against ``outputs`` for this metric and normalise both.

        Args:
            target: Labels (task metric) or reference outputs (fidelity metric).
            outputs: The scored model's outputs, sample axis first.
            output: Output name for messages.

        Returns:
            ``(target, outputs)`` as :attr:`per_sample` expects them.

        Raises:
            InvalidDataError: Labels of the wrong shape, class ids out of range, masks that
                are not whole numbers, NaN/Inf labels or reference outputs.
            InvalidInputError: The metric means nothing for this output (the message names
                one that fits).

        Example:
            >>> get_metric("accuracy").validate(np.array([[0, 1], [1, 0]]), np.eye(2))[0]
            array([1, 0])
        """
        return self.prepare(np.asarray(target), np.asarray(outputs), output)

    def measure(
        self, target: Any, outputs: Any, *, output: str = "output"
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Validate once; per-sample statistics and per-sample correctness (None if n/a).

        Example:
            >>> stats, ok = get_metric("accuracy").measure([1, 0], [[0.2, 0.8], [0.3, 0.7]])
            >>> ok
            array([ True, False])
        """
        ready = self.validate(target, outputs, output=output)
        correct = self.correctness(*ready) if self.correctness is not None else None
        return self.per_sample(*ready), correct

    def scorer(
        self, target: Any, outputs: Any, *, output: str = "output"
    ) -> Callable[[np.ndarray], float]:
        """A function of sample indices -> the metric on those samples (computed once).

        Example:
            >>> on = get_metric("mae").scorer([[0.0], [1.0]], [[1.0], [1.0]])
            >>> on(np.array([0])), on(np.array([0, 1]))
            (1.0, 0.5)
        """
        stats = self.measure(target, outputs, output=output)[0]
        return lambda indices: float(self.aggregate(stats[np.asarray(indices)]))

    def score(self, target: Any, outputs: Any, *, output: str = "output") -> float:
        """The metric on all samples.

        Example:
            >>> get_metric("snr").score([[1.0, 1.0]], [[1.0, 1.0]])
            inf
        """
        stats = self.measure(target, outputs, output=output)[0]
        return float(self.aggregate(stats))

    def for_reference(self, reference_outputs: Any) -> MetricDef:
        """This metric with anything read from outputs (a binary cut) fixed from the reference.

        Example:
            >>> get_metric("binary_accuracy").for_reference(np.array([[-2.0], [3.0]])).description
            'binary accuracy: an output above 0 counts as positive (the reference outputs logits)'
        """
        return self if self.binder is None else self.binder(np.asarray(reference_outputs))

    def check_threshold(self, value: Any, *, source: str | None = None) -> float:
        """A threshold for this metric as a float, refused when out of range.

        Ranges: ``max_drop`` in [0, 1] for fraction metrics and >= 0 otherwise; ``min_cosine``
        in [-1, 1]; ``min_agreement`` in [0, 1]; ``max_abs`` >= 0; ``min_snr`` any finite dB.

        Args:
            value: A number or numeric string.
            source: Where it came from, for the message (default: the threshold's name).

        Returns:
            The threshold.

        Raises:
            InvalidInputError: Not a finite number, or out of range.

        Example:
            >>> get_metric("cosine").check_threshold("0.995")
            0.995
        """
        source = source or self.threshold_name
        number = _finite_number(value, source)
        name = self.threshold_name
        if (name == "max_drop" and self.unit == "fraction") or name == "min_agreement":
            low, high = 0.0, 1.0
        elif name == "min_cosine":
            low, high = -1.0, 1.0
        elif name == "min_snr":
            return number
        else:
            low, high = 0.0, math.inf
        if not low <= number <= high:
            hint = f" (did you mean {number / 100:g}?)" if high == 1.0 < number <= 100 else ""
            span = f"in [{low:g}, {high:g}]" if high < math.inf else f">= {low:g}"
            unit = {"fraction": "a fraction, 0.01 = one point", "dB": "dB"}.get(self.unit)
            what = f"{self.name} {name}" + (f" ({unit})" if unit else f" (in {self.name} units)")
            raise InvalidInputError(f"{source} for {what} must be {span}, got {value!r}{hint}.")
        return number

    def format_value(self, value: float | None) -> str:
        """A score or fidelity value in this metric's unit: ``95.56%``, ``23.10 dB``, ``0.0123``.

        Example:
            >>> get_metric("snr").format_value(math.inf)
            '+inf dB'
        """
        if value is None:
            return ""
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return f"{value:+} dB" if self.unit == "dB" else f"{value:+}"
        if self.unit == "fraction":
            return f"{value:.2%}"
        if self.unit == "dB":
            return f"{value:.2f} dB"
        return f"{value:.6g}"

    def format_change(self, value: float | None, *, signed: bool = True) -> str:
        """A drop or change: ``+1.25 pt`` (fraction), ``+0.5 dB``, ``+0.0031`` (number).

        Example:
            >>> get_metric("accuracy").format_change(0.0125)
            '+1.25 pt'
        """
        if value is None:
            return ""
        sign = "+" if signed else ""
        if not math.isfinite(value):
            return f"{value:{sign}}"
        if self.unit == "fraction":
            return f"{value * 100:{sign}.2f} pt"
        if self.unit == "dB":
            return f"{value:{sign}.2f} dB"
        return f"{value:{sign}.6g}"

    def format_threshold(self, value: float) -> str:
        """The threshold as shown next to its name: ``1.00 pt``, ``20.00 dB``, ``99.00%``.

        Example:
            >>> get_metric("accuracy").format_threshold(0.01)
            '1.00 pt'
        """
        if self.kind == "task":
            return self.format_change(value, signed=False)
        return self.format_value(value)


def get_metric(name: str | MetricDef) -> MetricDef:
    """The :class:`MetricDef` of a metric name (case-insensitive; aliases allowed).

    Names: ``accuracy`` (``top1``, ``top-1``), ``topK`` (``top5``, ``top-3``...),
    ``binary_accuracy`` (cut 0.5 when the reference outputs lie in [0, 1], probabilities,
    else 0.0, logits; ``binary_accuracy@T`` cuts at ``T``), ``mse``, ``mae``, ``rmse``,
    ``miou`` (``mean_iou``), ``snr`` (``sqnr``), ``cosine``, ``max_abs``, ``agreement``.

    Args:
        name: A metric name, or a :class:`MetricDef` (returned as is).

    Returns:
        The definition.

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
    if key in _FIXED:
        return _FIXED[key]()
    top = re.fullmatch(r"top-?(\d+)", key)
    if top and int(top.group(1)) >= 1:
        return _top_k(int(top.group(1)))
    cut = re.fullmatch(r"binary_accuracy@(.+)", key)
    if cut:
        return _binary_accuracy(_finite_number(cut.group(1), f"threshold of {name!r}"))
    raise InvalidInputError(
        f"unknown metric {name!r}; choose one of {', '.join(METRIC_NAMES)} (topK: any k such "
        "as top5; binary_accuracy@T cuts at T)."
    )


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
    every ``(N, C)`` output counts as class scores.

    Args:
        output_shape: The output's shape, sample axis first (its size may be None).
        labels: The output's labels, or None when there are none.
        output: Output name for the reason and messages.
        reference_outputs: The reference's outputs, to tell probabilities from other vectors.

    Returns:
        ``(metric, reason)``, the reason one sentence for the user.

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
    per_out, classes = shape[1:], _class_count(shape)
    what = f"output {output!r} (shape {describe_shape(shape)})"
    if labels is None:
        if classes is not None and classes > 1:
            if reference_outputs is None or _probability_rows(reference_outputs):
                return get_metric("agreement"), (
                    f"no labels for {what}: fidelity to the reference, top-1 agreement"
                )
            return get_metric("snr"), (
                f"no labels for {what}: fidelity to the reference, snr (the rows are not "
                "probabilities; for logits pass --metric agreement)"
            )
        return get_metric("snr"), f"no labels for {what}: fidelity to the reference, snr"
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
            f"cannot choose a metric for {what} with labels of shape "
            f"{describe_shape(array.shape)}; pass --metric (one of {', '.join(METRIC_NAMES)})."
        )
    if chosen[0] == "mse":
        # A regression error has no threshold that means the same for every output (it is in
        # the output's unit), so the default is fidelity to the reference, which has one.
        return get_metric("snr"), (
            f"{what}: {chosen[1].removesuffix(': mse').removesuffix(', mse')} (regression "
            "targets, whose error has no unit-free threshold): fidelity to the reference, snr; "
            "gate on the labels with --metric mse --max-drop X"
        )
    return get_metric(chosen[0]), f"{what}: {chosen[1]}"


def _top_k(k: int, cut: float | None = None) -> MetricDef:
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
        return _top_k(k, binary_threshold(scores)) if scores is not None else _top_k(k, cut)

    what = "top-1 accuracy" if k == 1 else f"top-{k} accuracy"
    return MetricDef(
        name,
        "task",
        "higher",
        "fraction",
        f"{what}: share of samples whose label is among the {k} highest outputs"
        + (" (one-unit outputs: cut as binary_accuracy)" if k == 1 else ""),
        "max_drop",
        None,
        "mcnemar",
        prepare,
        lambda ids, scores: correct(ids, scores)[:, np.newaxis].astype(np.float64),
        _mean_of_first,
        correct,
        bind if cut is None else None,
    )


def _binary_accuracy(cut: float | None = None, *, bound: bool = False) -> MetricDef:
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
    return MetricDef(
        name,
        "task",
        "higher",
        "fraction",
        description,
        "max_drop",
        None,
        "mcnemar",
        prepare,
        per_sample,
        _ratio_of_sums,
        correct,
        (lambda ref: _binary_accuracy(binary_threshold(ref), bound=True)) if cut is None else None,
    )


def _regression(name: str) -> MetricDef:
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
    return MetricDef(
        name,
        "task",
        "lower",
        "number",
        f"{words} error against labels of the output's shape, over all elements",
        "max_drop",
        None,
        "bootstrap",
        prepare,
        per_sample,
        aggregate,
    )


def _miou(cut: float | None = None) -> MetricDef:
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

    return MetricDef(
        "miou",
        "task",
        "higher",
        "fraction",
        "mean intersection over union of class masks, over the classes present in the labels "
        "or predictions of the samples scored (outputs (N, ..., C): argmax; one channel: cut "
        "at 0.5 for probabilities, 0 for logits)",
        "max_drop",
        None,
        "bootstrap",
        prepare,
        per_sample,
        aggregate,
        None,
        (lambda ref: _miou(binary_threshold(ref))) if cut is None else None,
    )


_FIXED: dict[str, Callable[[], MetricDef]] = {
    "accuracy": lambda: _top_k(1),
    "binary_accuracy": _binary_accuracy,
    "mse": lambda: _regression("mse"),
    "mae": lambda: _regression("mae"),
    "rmse": lambda: _regression("rmse"),
    "miou": _miou,
    **FIDELITY_METRICS,
}
_ALIASES = {
    "top1": "accuracy",
    "top-1": "accuracy",
    "mean_iou": "miou",
    "sqnr": "snr",
    "cosine_similarity": "cosine",
    "top1_agreement": "agreement",
}


def _mean_of_first(rows: np.ndarray) -> float:
    return float(rows[:, 0].mean())


def _ratio_of_sums(rows: np.ndarray) -> float:
    return float(rows[:, 0].sum() / rows[:, 1].sum())


def _class_count(shape: tuple[int | None, ...]) -> int | None:
    if len(shape) == 1:
        return 1
    if len(shape) >= 2 and all(size == 1 for size in shape[1:-1]) and shape[-1] is not None:
        return int(shape[-1])
    return None


def _probability_rows(reference: Any) -> bool:
    scores = class_scores(np.asarray(reference))
    if scores is None or scores.dtype.kind not in "biuf" or not np.isfinite(scores).all():
        return False
    sums = scores.sum(axis=1)
    return bool(scores.min() >= 0.0 and np.abs(sums - 1.0).max() <= _PROBABILITY_TOLERANCE)


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
        chosen = choose_metric(outputs.shape, labels)[0].name if labels is not None else None
    except InvalidInputError:
        chosen = None
    if chosen is None or chosen == current:
        return f"pass a --metric that fits (one of {', '.join(METRIC_NAMES)})"
    if chosen == "snr":  # labels that are regression targets
        return "use --metric mse (or mae, rmse) with --max-drop, or --metric snr"
    return f"use --metric {chosen}"


def _finite_number(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise InvalidInputError(f"{what} must be a number, got {value!r}.")
    try:
        number = float(value)
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"{what} must be a number, got {value!r}.") from error
    if not math.isfinite(number):
        raise InvalidInputError(f"{what} must be a finite number, got {value!r}.")
    return number
