"""What each output of a model is trained on: labels (with the loss they call for) or itself.

Fine-tuning follows each output. With labels, the labels' shape and values choose the loss:
class indices (or one-hot rows) for a ``(N, C)`` or per-pixel ``(N, H, W, C)`` output ->
sparse categorical cross-entropy; soft class distributions for a softmax output ->
categorical cross-entropy; 0/1 labels for a single-unit output -> binary cross-entropy;
anything else of the output's shape -> mean squared error. An output without labels is
**self-distilled**: the float model's own outputs, computed once on the training inputs
before any transform, are its targets (cross-entropy against the float probabilities for a
softmax output, mean squared error otherwise).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tfcompress.errors import InvalidDataError

INDICES, BINARY, SOFT, REGRESSION = "indices", "binary", "soft", "regression"

SPARSE_CE = "sparse_categorical_crossentropy"
CATEGORICAL_CE = "categorical_crossentropy"
BINARY_CE = "binary_crossentropy"
MSE = "mse"
DISTILLED = "self-distillation"

_LOSS_OF_KIND = {INDICES: SPARSE_CE, BINARY: BINARY_CE, SOFT: CATEGORICAL_CE, REGRESSION: MSE}
_SUM_TOLERANCE = 1e-3  # softmax rows sum to 1 within float error


@dataclass(frozen=True)
class OutputTask:
    """The loss one output is fine-tuned with, and where its targets come from.

    Attributes:
        output: The output's name (Keras output layer name).
        loss: ``sparse_categorical_crossentropy``, ``categorical_crossentropy``,
            ``binary_crossentropy`` or ``mse``.
        distilled: Whether the targets are the float model's own outputs (no labels).
        from_logits: Whether the output holds logits rather than probabilities (cross-entropy
            losses only).
    """

    output: str
    loss: str
    distilled: bool = False
    from_logits: bool = False

    @property
    def description(self) -> str:
        """The loss as reported: ``mse``, ``categorical_crossentropy (self-distillation)``..."""
        notes = [DISTILLED] if self.distilled else []
        if self.from_logits:
            notes.append("from logits")
        return f"{self.loss} ({', '.join(notes)})" if notes else self.loss

    def keras_loss(self, keras2: Any) -> Any:
        """The tf-keras loss object for this output."""
        losses = keras2.losses
        if self.loss == SPARSE_CE:
            return losses.SparseCategoricalCrossentropy(from_logits=self.from_logits)
        if self.loss == CATEGORICAL_CE:
            return losses.CategoricalCrossentropy(from_logits=self.from_logits)
        if self.loss == BINARY_CE:
            return losses.BinaryCrossentropy(from_logits=self.from_logits)
        return losses.MeanSquaredError()


@dataclass(frozen=True)
class Labels:
    """Labels of one output, checked and shaped for its loss and metric.

    Attributes:
        kind: ``indices`` (class ids, shape of the output without its class axis), ``binary``
            (0/1, the output's shape), ``soft`` (class distributions, the output's shape) or
            ``regression`` (float targets, the output's shape).
        values: The labels (int64 for ``indices``, float32 otherwise).
    """

    kind: str
    values: np.ndarray


def is_distribution(outputs: np.ndarray) -> bool:
    """Whether ``outputs`` hold probability distributions over their last axis (softmax)."""
    if outputs.ndim < 2 or outputs.shape[-1] < 2 or outputs.size == 0:
        return False
    if outputs.min() < 0 or outputs.max() > 1:
        return False
    return _sums_to_one(outputs)


def in_unit_range(outputs: np.ndarray) -> bool:
    """Whether every value lies in [0, 1] (probabilities rather than logits)."""
    return bool(outputs.size) and bool(outputs.min() >= 0 and outputs.max() <= 1)


def read_labels(
    labels: np.ndarray, sample_shape: tuple[int, ...], *, output: str, what: str
) -> Labels:
    """Decide what labels of one output are (class ids, 0/1, distributions or targets).

    Raises:
        InvalidDataError: Non-numeric or non-finite labels, class ids out of range, or a
            shape that fits neither class ids nor targets of the output's shape.
    """
    where = f"{what} labels for output {output!r}"
    if labels.dtype.kind not in "fiub":
        raise InvalidDataError(f"{where} have dtype {labels.dtype}; give numbers.")
    values = labels.astype(np.float64) if labels.dtype.kind == "b" else labels
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        raise InvalidDataError(f"{where} hold NaN or Inf values; clean or drop them.")
    shape = tuple(int(d) for d in sample_shape)
    count = len(values)
    given = tuple(values.shape[1:])
    classes = shape[-1] if shape else 1
    if classes > 1 and given in {shape[:-1], (*shape[:-1], 1)}:
        return Labels(INDICES, _class_ids(values.reshape((count, *shape[:-1])), classes, where))
    if given == shape or (shape == (1,) and given == ()):
        values = values.reshape((count, *shape))
        if np.all((values == 0) | (values == 1)):
            if classes == 1:
                return Labels(BINARY, values.astype(np.float32))
            if np.all(values.sum(axis=-1) == 1):  # one-hot rows: class ids
                return Labels(INDICES, values.argmax(axis=-1).astype(np.int64))
        if classes > 1 and values.min() >= 0 and _sums_to_one(values):
            return Labels(SOFT, values.astype(np.float32))
        return Labels(REGRESSION, values.astype(np.float32))
    ids = f"class ids of shape {_shape(shape[:-1])} or " if classes > 1 else ""
    raise InvalidDataError(
        f"{where} have shape {_shape(given)} but the output is {_shape(shape)}; give {ids}"
        f"targets of shape {_shape(shape)} per sample."
    )


def plan_tasks(
    names: Sequence[str],
    float_outputs: Sequence[np.ndarray],
    labels: Sequence[Labels | None],
) -> tuple[tuple[OutputTask, ...], list[np.ndarray]]:
    """The loss and the training targets of every output.

    Args:
        names: Output names, in output order.
        float_outputs: The float model's outputs on the training inputs (the targets of
            outputs without labels).
        labels: Each output's labels (see :func:`read_labels`), None where there are none.
    """
    tasks: list[OutputTask] = []
    targets: list[np.ndarray] = []
    for name, outputs, given in zip(names, float_outputs, labels, strict=True):
        if given is None:
            softmax = is_distribution(outputs)
            tasks.append(OutputTask(name, CATEGORICAL_CE if softmax else MSE, distilled=True))
            targets.append(outputs.astype(np.float32))
            continue
        logits = given.kind != REGRESSION and not _probabilities(given.kind, outputs)
        tasks.append(OutputTask(name, _LOSS_OF_KIND[given.kind], from_logits=logits))
        targets.append(given.values)
    return tuple(tasks), targets


def _probabilities(kind: str, outputs: np.ndarray) -> bool:
    return in_unit_range(outputs) if kind == BINARY else is_distribution(outputs)


def _class_ids(values: np.ndarray, classes: int, where: str) -> np.ndarray:
    if values.dtype.kind == "f" and not np.all(np.mod(values, 1) == 0):
        raise InvalidDataError(
            f"{where} hold fractions where class ids are expected; give whole class indices."
        )
    if values.size:
        low, high = float(values.min()), float(values.max())
        if low < 0 or high >= classes:
            raise InvalidDataError(
                f"{where} range from {low:g} to {high:g} but the output has {classes} classes "
                f"(ids 0 to {classes - 1}); check that the data belongs to this model."
            )
    return values.astype(np.int64)


def _sums_to_one(values: np.ndarray) -> bool:
    return bool(np.allclose(values.sum(axis=-1), 1.0, atol=_SUM_TOLERANCE))


def _shape(shape: tuple[int, ...]) -> str:
    return f"({', '.join(str(d) for d in shape)}{',' if len(shape) == 1 else ''})"
