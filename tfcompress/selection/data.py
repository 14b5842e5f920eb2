"""The selection's data: images with integer class labels, read and checked once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tfcompress.errors import InvalidDataError
from tfcompress.selection.store import fingerprint


@dataclass(frozen=True, eq=False)
class SelectionData:
    """Training and validation images (N, H, W, C) float32 and their class labels (N,) int64."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    num_classes: int
    train_fingerprint: str
    val_fingerprint: str

    @property
    def channels(self) -> int:
        """Channels of every image (kept when resizing)."""
        return int(self.x_train.shape[-1])


def read_selection_data(train_data: Any, eval_data: Any) -> SelectionData:
    """Read both sources with :func:`tfcompress.data.load_data` and check them.

    Returns:
        The arrays, the class count (largest label + 1 over both sets) and fingerprints.

    Raises:
        InvalidDataError: A source without labels, labels that are not class indices,
            images that are not (N, H, W[, C]), NaN/Inf, or channel counts that differ.
    """
    x_train, y_train = _images(train_data, "train_data")
    x_val, y_val = _images(eval_data, "eval_data")
    if x_train.shape[-1] != x_val.shape[-1]:
        raise InvalidDataError(
            f"train_data images have {x_train.shape[-1]} channel(s) but eval_data images "
            f"{x_val.shape[-1]}; give both sets the same channels."
        )
    num_classes = int(max(y_train.max(), y_val.max())) + 1
    if num_classes < 2:
        raise InvalidDataError(
            "the labels hold a single class; model selection needs at least two classes."
        )
    return SelectionData(
        x_train,
        y_train,
        x_val,
        y_val,
        num_classes,
        fingerprint(x_train, y_train),
        fingerprint(x_val, y_val),
    )


def _images(source: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    from tfcompress.data import load_data

    dataset = load_data(source)
    if isinstance(dataset.x, dict) or isinstance(dataset.y, dict):
        raise InvalidDataError(
            f"{what}: model selection takes one image array and one label array; give "
            "(x, y) or an .npz with x and y."
        )
    if dataset.y is None:
        raise InvalidDataError(
            f"{what} has no labels; selection trains classifiers: give (x, y) or an .npz "
            "with x and y (class indices 0..N-1)."
        )
    x = np.asarray(dataset.x)
    if x.ndim == 3:
        x = x[..., np.newaxis]  # (N, H, W) grey images
    if x.ndim != 4 or not np.issubdtype(x.dtype, np.number):
        raise InvalidDataError(
            f"{what}: images must be a numeric array (N, H, W) or (N, H, W, C), got "
            f"{x.dtype} {x.shape}."
        )
    x = x.astype(np.float32, copy=False)
    if len(x) == 0 or not np.isfinite(x).all():
        raise InvalidDataError(f"{what}: images are empty or hold NaN/Inf; clean the data.")
    y = _labels(np.asarray(dataset.y), len(x), what)
    return x, y


def _labels(y: np.ndarray, count: int, what: str) -> np.ndarray:
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    whole = np.issubdtype(y.dtype, np.integer) or (
        np.issubdtype(y.dtype, np.floating) and np.isfinite(y).all() and (y == np.round(y)).all()
    )
    if y.ndim != 1 or not whole or (y.size and y.min() < 0):
        raise InvalidDataError(
            f"{what}: labels must be class indices (N,) of whole numbers >= 0, got "
            f"{y.dtype} {y.shape}; convert one-hot labels with argmax(axis=1)."
        )
    if len(y) != count:
        raise InvalidDataError(
            f"{what}: {count} images but {len(y)} labels; give one label per image."
        )
    return y.astype(np.int64)
