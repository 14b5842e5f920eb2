"""The in-memory dataset every tfcompress step consumes: one array or one per model input."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np

from tfcompress.errors import InvalidArgumentTypeError, InvalidDataError, InvalidInputError

#: Samples for one input, or one array per input name (batch dimension first in each).
Arrays = Union[np.ndarray, dict[str, np.ndarray]]  # noqa: UP007 - a runtime alias


@dataclass(frozen=True, eq=False)
class Dataset:
    """Samples ``x`` and optional labels ``y``, each one array or a dict of named arrays.

    A single-input model takes ``x`` as one array; a model with several inputs takes a dict
    keyed by input name (or ``x0``, ``x1``, ... in input order). In a dict, a 0-d array is
    one value for every sample (a scalar input such as a sample rate): it is not counted or
    sliced. Labels are one array (class indices, targets or masks of a single-output model)
    or a dict keyed by output name.

    Raises:
        InvalidArgumentTypeError: ``x`` or ``y`` is not a numpy array (or dict of them).
        InvalidDataError: A 0-d array where samples are expected (``x`` itself, labels, or
            a dict of nothing else), an empty dict, or input arrays with different sample
            counts.

    Example:
        >>> ds = Dataset(np.zeros((4, 2), np.float32), np.array([0, 1, 0, 1]))
        >>> len(ds), ds.has_labels
        (4, True)
        >>> Dataset({"image": np.zeros((3, 8, 8)), "scale": np.ones((3, 1))}).input_names
        ('image', 'scale')
    """

    x: Arrays
    y: Arrays | None = None
    #: False for arrays read in a model's own layout, before a signature says where each
    #: one's batch is (a ``(layers, N, units)`` state): their sample counts are compared
    #: after :func:`~tfcompress.data.validate_for_signature` has moved the batch first.
    aligned: bool = field(default=True, repr=False)

    def __post_init__(self) -> None:
        # Checked here so that len() and slicing can never fail later on a bad Dataset.
        object.__setattr__(self, "x", _arrays(self.x, "x"))
        if self.y is not None:
            object.__setattr__(self, "y", _arrays(self.y, "y"))
        # Labels are matched to the samples where they are read, with a message per source.
        if isinstance(self.x, dict) and self.aligned:
            counts = {name: int(array.shape[0]) for name, array in self.x.items() if array.ndim}
            if not counts:
                raise InvalidDataError(
                    f"Dataset.x holds only single values ({', '.join(self.x)}); give at least "
                    "one input's samples with the batch dimension."
                )
            if len(set(counts.values())) > 1:
                listed = ", ".join(f"{name!r}: {count}" for name, count in counts.items())
                raise InvalidDataError(
                    f"the input arrays hold different numbers of samples ({listed}); give "
                    "every input the same number of samples along the first axis."
                )

    def __len__(self) -> int:
        if isinstance(self.x, dict):
            return next(int(a.shape[0]) for a in self.x.values() if a.ndim)
        return int(self.x.shape[0])

    @property
    def has_labels(self) -> bool:
        """Whether labels are present."""
        return self.y is not None

    @property
    def input_names(self) -> tuple[str, ...]:
        """The keys of a dict ``x`` (empty for a single array)."""
        return tuple(self.x) if isinstance(self.x, dict) else ()

    def take(self, count: int) -> Dataset:
        """The first ``count`` samples (all when there are fewer)."""
        if not self.aligned:
            raise InvalidDataError(
                "these arrays are in a model's own layout (their batch is not first in all of "
                "them); match them to the model first (validate_for_signature)."
            )
        y = None if self.y is None else slice_arrays(self.y, 0, count)
        return Dataset(slice_arrays(self.x, 0, count), y)

    def batches(self, batch_size: int) -> Iterator[Arrays]:
        """Yield ``x`` in consecutive batches; the last one may be smaller.

        Raises:
            InvalidInputError: ``batch_size`` is not a positive integer.
        """
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise InvalidInputError(
                f"batch_size must be a positive integer, got {batch_size!r}; pass e.g. 32."
            )
        for start in range(0, len(self), batch_size):
            yield slice_arrays(self.x, start, start + batch_size)


@dataclass(frozen=True, eq=False)
class LaidOut(Dataset):
    """Samples already matched to a model's inputs: batch first, with the model's layout.

    What :func:`~tfcompress.bench.paired.read_for_reference` and the calibration adapter
    return for a model that is not "batch first" (a ``(layers, N, units)`` state, a scalar
    input, a static batch): every array batch first, a scalar repeated per sample, and the
    :class:`~tfcompress.models.feeding.FeedLayout` that puts them back in the model's own
    layout. Readers given one take it as it is instead of reading it again in the model's
    layout, so data read once (by compress, by quantize's ``--eval``) goes through every
    step unchanged.

    Attributes:
        layout: Where each tensor's batch is (with the dimensions the user declared).
    """

    layout: Any = None


def slice_arrays(arrays: Arrays, start: int, stop: int) -> Arrays:
    """Samples ``start:stop`` of one array or of every array in a dict (0-d ones kept whole)."""
    if isinstance(arrays, dict):
        return {name: array[start:stop] if array.ndim else array for name, array in arrays.items()}
    return arrays[start:stop]


def _arrays(value: Any, field: str) -> Arrays:
    if isinstance(value, Mapping):
        if not value:
            raise InvalidDataError(
                f"Dataset.{field} is an empty dict; give one array per model input."
            )
        return {
            str(name): _array(array, f"{field}[{name!r}]", single=field == "x")
            for name, array in value.items()
        }
    return _array(value, field)


def _array(value: Any, what: str, *, single: bool = False) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise InvalidArgumentTypeError(
            f"Dataset.{what} must be a numpy array, got {type(value).__name__}; wrap it with "
            "np.asarray(...)."
        )
    if value.ndim == 0 and not single:
        raise InvalidDataError(
            f"Dataset.{what} is a single value (a 0-d array), not a batch; give samples with "
            "the batch dimension first, e.g. shape (N, 28, 28, 1)."
        )
    return value
