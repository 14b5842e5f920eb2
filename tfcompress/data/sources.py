"""Read every supported data source into a :class:`Dataset` (no model knowledge here)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tfcompress.data.dataset import Dataset
from tfcompress.errors import InvalidDataError

DataLike = Any  # Dataset | array | (x, y) | .npz/.npy path | image folder | tf.data | iterable


def load_data(
    source: DataLike,
    *,
    sample_rank: int | None = None,
    max_samples: int | None = None,
    image_size: tuple[int, int] | None = None,
    channels: int | None = None,
    rescale: float = 1.0 / 255.0,
) -> Dataset:
    """Read ``source`` into memory.

    Args:
        source: A :class:`Dataset`; a numpy array ``x``; a tuple ``(x, y)``; a ``.npz``
            file (arrays ``x`` and optionally ``y``) or ``.npy`` file (``x``); a folder of
            images with one subfolder per class; a ``tf.data.Dataset``; or an iterable or
            generator function yielding ``x``, ``(x, y)``, ``[x]`` or ``{"x": ..., "y": ...}``,
            each a single sample or a batch.
        sample_rank: Rank of one sample (e.g. 3 for 28x28x1); tells a batch from a sample.
        max_samples: Stop reading a stream (tf.data, iterable, generator) after this many
            samples, as endless generators need; arrays and files are read whole.
        image_size: ``(height, width)`` to resize folder images to.
        channels: Channels to decode folder images with (1 or 3).
        rescale: Factor applied to folder image pixels (default maps 0..255 to 0..1).

    Returns:
        The samples and labels (labels None when the source has none).

    Raises:
        InvalidDataError: The source cannot be read or holds no usable arrays.

    Example:
        >>> load_data((np.zeros((2, 3), np.float32), np.array([0, 1]))).y
        array([0, 1])
    """
    if isinstance(source, Dataset):
        dataset = source
    elif isinstance(source, str | os.PathLike):
        dataset = _from_path(Path(source), image_size, channels, rescale)
    elif isinstance(source, np.ndarray):
        dataset = Dataset(source)
    elif isinstance(source, tuple) and len(source) == 2 and _is_array_like(source[0]):
        dataset = Dataset(np.asarray(source[0]), _optional_array(source[1]))
    elif type(source).__module__.startswith("tensorflow") and hasattr(source, "as_numpy_iterator"):
        dataset = _from_elements(source.as_numpy_iterator(), sample_rank, max_samples)
    elif callable(source):
        dataset = _from_elements(source(), sample_rank, max_samples)
    elif isinstance(source, Iterable) and not isinstance(source, str | bytes | Mapping):
        dataset = _from_elements(source, sample_rank, max_samples)
    else:
        raise InvalidDataError(
            f"cannot read data from a {type(source).__name__}; pass arrays, (x, y), a .npz/.npy "
            "file, an image folder, a tf.data.Dataset or a generator."
        )
    return dataset


def _from_path(
    path: Path, image_size: tuple[int, int] | None, channels: int | None, rescale: float
) -> Dataset:
    if not path.exists():
        raise InvalidDataError(f"{path}: no such data file or folder.")
    if path.is_dir():
        from tfcompress.data.images import load_image_folder

        return load_image_folder(path, image_size=image_size, channels=channels, rescale=rescale)
    suffix = path.suffix.lower()
    try:
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                if "x" not in archive.files:
                    raise InvalidDataError(
                        f"{path}: no array named 'x' (found {sorted(archive.files)}); save it "
                        "with np.savez(path, x=samples, y=labels)."
                    )
                return Dataset(archive["x"], archive["y"] if "y" in archive.files else None)
        if suffix == ".npy":
            return Dataset(np.load(path, allow_pickle=False))
    except (OSError, ValueError, EOFError) as error:
        raise InvalidDataError(
            f"{path}: not a readable {suffix} file ({error}); save it with numpy."
        ) from error
    raise InvalidDataError(
        f"{path}: unsupported data file; use a .npz (arrays x and y), a .npy or an image folder."
    )


def _from_elements(elements: Iterable[Any], sample_rank: int | None, limit: int | None) -> Dataset:
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    count = 0
    for element in elements if limit is None else itertools.islice(elements, limit):
        x, y = _split_element(element)
        batched = sample_rank is not None and x.ndim == sample_rank + 1
        xs.append(x if batched else x[np.newaxis])
        if y is not None:
            ys.append(np.atleast_1d(y) if batched else np.asarray(y)[np.newaxis])
        count += len(xs[-1])
        if limit is not None and count >= limit:
            break
    if not xs:
        raise InvalidDataError("the data source yielded no samples; give it at least one.")
    if ys and len(ys) != len(xs):
        raise InvalidDataError("some elements carry labels and some do not; label all or none.")
    try:
        return Dataset(np.concatenate(xs), np.concatenate(ys) if ys else None)
    except ValueError as error:
        raise InvalidDataError(f"elements have different shapes ({error}).") from error


def _split_element(element: Any) -> tuple[np.ndarray, np.ndarray | None]:
    if isinstance(element, Mapping):
        if "x" not in element:
            raise InvalidDataError(f"dict elements need a key 'x' (got {sorted(element)}).")
        return np.asarray(element["x"]), _optional_array(element.get("y"))
    if isinstance(element, tuple | list):
        if len(element) == 1:
            return np.asarray(element[0]), None
        if len(element) == 2:
            return np.asarray(element[0]), _optional_array(element[1])
        raise InvalidDataError(
            f"elements must be x, (x,), (x, y) or a dict; got a sequence of {len(element)}."
        )
    return np.asarray(element), None


def _optional_array(value: Any) -> np.ndarray | None:
    return None if value is None else np.asarray(value)


def _is_array_like(value: Any) -> bool:
    return isinstance(value, np.ndarray) or hasattr(value, "__array__")
