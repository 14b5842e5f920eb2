"""Read every supported data source into a :class:`Dataset` (no model knowledge here)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tfcompress.data.dataset import Dataset
from tfcompress.data.npfiles import read_npy, read_npz
from tfcompress.data.validation import check_count
from tfcompress.errors import InvalidArgumentTypeError, InvalidDataError

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
        source: A :class:`Dataset`; a numpy array ``x``; a tuple ``(x, y)``; a dict of
            arrays (one per input name, labels as ``y`` or ``y_<output name>``); a ``.npz``
            file (arrays ``x`` and optionally ``y``, or named like the dict) or ``.npy``
            file (``x``); a folder of
            images with one subfolder per class; a ``tf.data.Dataset``; or an iterable or
            generator function yielding ``x``, ``(x, y)``, ``[x]`` or ``{"x": ..., "y": ...}``,
            each a single sample or a batch.
        sample_rank: Rank of one sample (e.g. 3 for 28x28x1); tells a batch from a sample.
        max_samples: Stop reading a stream (tf.data, iterable, generator) after this many
            samples, as endless generators need; arrays and files are read whole.
        image_size: ``(height, width)`` to resize folder images to.
        channels: Channels to decode folder images with (1 or 3).
        rescale: Factor applied to folder image pixels (default maps 0..255 to 0..1).

    Raises:
        InvalidDataError: The source cannot be read or holds no usable arrays: a missing,
            special (FIFO, device) or corrupt file, a pickled, 0-d or non-numeric array.
        InvalidArgumentTypeError: ``source`` is of a type tfcompress cannot read.
        InvalidInputError: ``max_samples`` is not a positive integer.

    Example:
        >>> load_data((np.zeros((2, 3), np.float32), np.array([0, 1]))).y
        array([0, 1])
    """
    if max_samples is not None:
        check_count(max_samples, "max_samples", "e.g. 200, or None to read everything")
    if isinstance(source, Dataset):
        dataset = source
    elif isinstance(source, str | os.PathLike):
        dataset = _from_path(Path(source), image_size, channels, rescale)
    elif isinstance(source, np.ndarray):
        dataset = Dataset(_samples(source, "data"))
    elif isinstance(source, tuple) and len(source) == 2 and isinstance(source[0], Mapping):
        # 0-d arrays are single values for scalar inputs: Dataset and the signature judge them.
        x = {str(k): _array(v, f"x[{k!r}]") for k, v in source[0].items()}
        dataset = Dataset(x, _optional_labels(source[1]))
    elif isinstance(source, tuple) and len(source) == 2 and hasattr(source[0], "__array__"):
        dataset = Dataset(_samples(_array(source[0], "x"), "x"), _optional_labels(source[1]))
    elif isinstance(source, Mapping):
        # A 0-d array named after an input is one value for every sample (a sample rate);
        # the model's signature decides whether that input takes one.
        dataset = dataset_from_arrays(
            {str(k): _array(v, repr(k)) for k, v in source.items()}, "the dict"
        )
    elif type(source).__module__.startswith("tensorflow") and hasattr(source, "as_numpy_iterator"):
        dataset = _from_elements(source.as_numpy_iterator(), sample_rank, max_samples)
    elif callable(source):
        dataset = _from_elements(source(), sample_rank, max_samples)
    elif isinstance(source, Iterable) and not isinstance(source, str | bytes | Mapping):
        dataset = _from_elements(source, sample_rank, max_samples)
    else:
        raise InvalidArgumentTypeError(
            f"cannot read data from an object of type {type(source).__name__}; pass arrays, "
            "(x, y), a dict of arrays per input, a .npz/.npy file, an image folder, a "
            "tf.data.Dataset or a generator."
        )
    return dataset


def describe_source(source: DataLike, what: str) -> str:
    """Name data in messages, with its file when it came from one."""
    return f"{what} {source}" if isinstance(source, str | os.PathLike) else what


def dataset_from_arrays(arrays: Mapping[str, np.ndarray], origin: str) -> Dataset:
    """Sort named arrays (from ``origin``, for messages) into samples and labels, as ``.npz``.

    ``y`` holds the labels of a single-output model and ``y_<output name>`` those of one
    output; every other array is samples: ``x`` alone for a single-input model (``x`` is
    then an array), otherwise one array per input name (or ``x0``, ``x1``, ... in order).

    Raises:
        InvalidDataError: No samples, or both ``y`` and ``y_<name>`` labels.

    Example:
        >>> ds = dataset_from_arrays({"image": np.zeros((2, 4)), "y_box": np.ones((2, 4))}, "d")
        >>> ds.input_names, sorted(ds.y)
        (('image',), ['box'])
    """
    samples = {k: v for k, v in arrays.items() if k != "y" and not k.startswith("y_")}
    labels = {k[2:]: v for k, v in arrays.items() if k.startswith("y_")}
    if not samples:
        raise InvalidDataError(
            f"{origin}: no samples (found only {sorted(arrays)}); save the samples as 'x', or "
            "one array per input name."
        )
    if "y" in arrays and labels:
        raise InvalidDataError(
            f"{origin}: both 'y' and per-output labels ({', '.join('y_' + k for k in labels)}); "
            "use 'y' for a single-output model, 'y_<output name>' for each output otherwise."
        )
    x = samples["x"] if list(samples) == ["x"] else samples
    y = labels or arrays.get("y")
    counts = {int(a.shape[0]) for a in samples.values() if a.ndim}
    # Arrays in a model's own layout may carry their batch elsewhere (a (layers, N, units)
    # state): when the first dimensions differ, the signature decides (validate_for_signature).
    return Dataset(x, y, aligned=len(counts) <= 1)


def _from_path(
    path: Path, image_size: tuple[int, int] | None, channels: int | None, rescale: float
) -> Dataset:
    if not path.exists():
        raise InvalidDataError(
            f"{path}: no such data file or folder; check the path (tfcompress reads a .npz "
            "with arrays x and y, a .npy, or an image folder)."
        )
    if path.is_dir():
        from tfcompress.data.images import load_image_folder

        return load_image_folder(path, image_size=image_size, channels=channels, rescale=rescale)
    suffix = path.suffix.lower()
    if suffix == ".npz":
        return dataset_from_arrays(read_npz(path), str(path))
    if suffix == ".npy":
        return Dataset(read_npy(path))
    raise InvalidDataError(
        f"{path}: unsupported data file ({suffix or 'no suffix'}); convert it to a .npz "
        "(np.savez(path, x=samples, y=labels)), a .npy, or an image folder."
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
        reason = " ".join(str(error).split())[:200]
        raise InvalidDataError(
            f"elements have different shapes ({reason}); give every sample the same shape."
        ) from error


def _split_element(element: Any) -> tuple[np.ndarray, np.ndarray | None]:
    if isinstance(element, Mapping):
        if "x" not in element:
            raise InvalidDataError(f"dict elements need a key 'x' (got {sorted(element)}).")
        return _array(element["x"], "x"), _optional_array(element.get("y"))
    if isinstance(element, tuple | list):
        if len(element) in (1, 2):  # (x,) or (x, y)
            y = element[1] if len(element) == 2 else None
            return _array(element[0], "x"), _optional_array(y)
        raise InvalidDataError(
            f"elements must be x, (x,), (x, y) or a dict; got a sequence of {len(element)}."
        )
    return _array(element, "x"), None


def _array(value: Any, what: str) -> np.ndarray:
    """``np.asarray`` with ragged or odd values turned into a data error."""
    try:
        return np.asarray(value)
    except (ValueError, TypeError) as error:
        reason = " ".join(str(error).split())[:200]
        raise InvalidDataError(
            f"{what} cannot be made into one numeric array ({reason}); give arrays of equal "
            "shape per sample."
        ) from error


def _samples(array: np.ndarray, what: str) -> np.ndarray:
    """Refuse a 0-d array, which has no batch dimension to count samples along."""
    if array.ndim == 0:
        raise InvalidDataError(
            f"{what} is a single value (a 0-d array), not a batch; pass an array with the "
            "batch dimension first, e.g. shape (N, 28, 28, 1)."
        )
    return array


def _optional_array(value: Any) -> np.ndarray | None:
    return None if value is None else _array(value, "y")


def _optional_labels(value: Any) -> np.ndarray | dict[str, np.ndarray] | None:
    """Labels as one array, or a dict of arrays keyed by output name."""
    if isinstance(value, Mapping):
        return {str(k): _array(v, f"y[{k!r}]") for k, v in value.items()}
    return _optional_array(value)
