"""Check data against a model's input signature before it reaches a converter or runtime."""

from __future__ import annotations

import logging

import numpy as np

from tfcompress.data.dataset import Dataset
from tfcompress.errors import InvalidDataError
from tfcompress.models.signature import InputSpec

logger = logging.getLogger(__name__)


def validate_for_model(
    dataset: Dataset,
    spec: InputSpec,
    *,
    require_labels: bool = False,
    num_classes: int | None = None,
    what: str = "data",
) -> Dataset:
    """Return ``dataset`` in the model's dtype and shape, or explain precisely why it won't fit.

    Integer samples are cast to the model's float dtype, as Keras does. A missing trailing
    channel axis of size 1 (``(N, 28, 28)`` for a ``(N, 28, 28, 1)`` model) is added.
    One-hot labels become class indices.

    Args:
        dataset: The data to check.
        spec: The model's input.
        require_labels: Fail when ``dataset`` has no labels.
        num_classes: When given, labels must lie in ``[0, num_classes)``.
        what: How to call the data in messages ("calibration data", "--eval data"...).

    Returns:
        A dataset safe to feed the model.

    Raises:
        InvalidDataError: Empty data, wrong shape or dtype, NaN/Inf, or bad/missing labels.

    Example:
        >>> spec = InputSpec(shape=(None, 2), dtype="float32")
        >>> validate_for_model(Dataset(np.ones((3, 2), np.int64)), spec).x.dtype
        dtype('float32')
    """
    x = dataset.x
    expected = spec.describe()
    if len(dataset) == 0:
        raise InvalidDataError(f"{what} is empty; the model expects samples of shape {expected}.")
    if x.dtype.kind not in "fiu":
        raise InvalidDataError(
            f"{what} has dtype {x.dtype}; the model expects {spec.dtype} numbers of shape "
            f"{expected}."
        )
    x = _fit_shape(x, spec, what)
    if x.dtype.kind == "f":
        finite = np.isfinite(x)
        if not finite.all():
            bad = int(x.shape[0] - finite.reshape(len(x), -1).all(axis=1).sum())
            raise InvalidDataError(
                f"{what} holds NaN or Inf values in {bad} of {len(x)} samples; clean or drop them."
            )
    x = x.astype(spec.dtype, copy=False)
    y = _check_labels(dataset.y, len(x), require_labels, num_classes, what)
    return Dataset(x, y)


def _fit_shape(x: np.ndarray, spec: InputSpec, what: str) -> np.ndarray:
    sample = spec.sample_shape
    if _matches(x.shape[1:], sample):
        return x
    if len(sample) == x.ndim and sample[-1] == 1 and _matches(x.shape[1:], sample[:-1]):
        logger.info("adding a channel axis: %s -> %s", x.shape, (*x.shape, 1))
        return x[..., np.newaxis]
    raise InvalidDataError(
        f"{what} has shape {tuple(x.shape)} but the model expects {spec.describe()}; reshape "
        "the samples (batch dimension first)."
    )


def _matches(actual: tuple[int, ...], expected: tuple[int | None, ...]) -> bool:
    return len(actual) == len(expected) and all(
        e is None or a == e for a, e in zip(actual, expected, strict=True)
    )


def _check_labels(
    y: np.ndarray | None, count: int, required: bool, num_classes: int | None, what: str
) -> np.ndarray | None:
    if y is None:
        if required:
            raise InvalidDataError(
                f"{what} has no labels; accuracy needs them: save them as 'y' in the .npz "
                "or pass (x, y)."
            )
        return None
    if y.ndim == 2 and y.shape[1] > 1:
        y = y.argmax(axis=1)  # one-hot
    y = y.reshape(-1) if y.ndim == 2 else y
    if y.ndim != 1 or len(y) != count:
        raise InvalidDataError(
            f"{what} has {count} samples but labels of shape {tuple(y.shape)}; give one class "
            "index (or one-hot row) per sample."
        )
    if y.dtype.kind not in "fiu" or (y.dtype.kind == "f" and not np.all(np.mod(y, 1) == 0)):
        raise InvalidDataError(f"{what} labels must be integer class indices, got {y.dtype}.")
    y = y.astype(np.int64)
    if y.min() < 0:
        raise InvalidDataError(f"{what} labels include {int(y.min())}; class indices start at 0.")
    if num_classes is not None and y.max() >= num_classes:
        raise InvalidDataError(
            f"{what} labels go up to {int(y.max())} but the model has {num_classes} outputs; "
            "check that the data belongs to this model."
        )
    return y
