"""The in-memory dataset every tfcompress step consumes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from tfcompress.errors import InvalidArgumentTypeError, InvalidDataError, InvalidInputError


@dataclass(frozen=True, eq=False)
class Dataset:
    """Samples ``x`` (batch dimension first) and optional integer class labels ``y``.

    Raises:
        InvalidArgumentTypeError: ``x`` or ``y`` is not a numpy array.
        InvalidDataError: ``x`` is 0-d (no batch dimension to count samples along).

    Example:
        >>> ds = Dataset(np.zeros((4, 2), np.float32), np.array([0, 1, 0, 1]))
        >>> len(ds), ds.has_labels
        (4, True)
    """

    x: np.ndarray
    y: np.ndarray | None = None

    def __post_init__(self) -> None:
        # Checked here so that len() and slicing can never fail later on a bad Dataset.
        for name, value in (("x", self.x), ("y", self.y)):
            if value is not None and not isinstance(value, np.ndarray):
                raise InvalidArgumentTypeError(
                    f"Dataset.{name} must be a numpy array, got {type(value).__name__}; "
                    "wrap it with np.asarray(...)."
                )
        if self.x.ndim == 0:
            raise InvalidDataError(
                "Dataset.x is a single value (a 0-d array), not a batch; give samples with "
                "the batch dimension first, e.g. shape (N, 28, 28, 1)."
            )

    def __len__(self) -> int:
        return int(self.x.shape[0])

    @property
    def has_labels(self) -> bool:
        """Whether labels are present."""
        return self.y is not None

    def take(self, count: int) -> Dataset:
        """The first ``count`` samples (all when there are fewer)."""
        return Dataset(self.x[:count], None if self.y is None else self.y[:count])

    def batches(self, batch_size: int) -> Iterator[np.ndarray]:
        """Yield ``x`` in consecutive batches; the last one may be smaller.

        Raises:
            InvalidInputError: ``batch_size`` is not a positive integer.
        """
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise InvalidInputError(
                f"batch_size must be a positive integer, got {batch_size!r}; pass e.g. 32."
            )
        for start in range(0, len(self), batch_size):
            yield self.x[start : start + batch_size]
