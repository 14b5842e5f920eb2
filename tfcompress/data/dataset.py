"""The in-memory dataset every tfcompress step consumes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class Dataset:
    """Samples ``x`` (batch dimension first) and optional integer class labels ``y``.

    Example:
        >>> ds = Dataset(np.zeros((4, 2), np.float32), np.array([0, 1, 0, 1]))
        >>> len(ds), ds.has_labels
        (4, True)
    """

    x: np.ndarray
    y: np.ndarray | None = None

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
        """Yield ``x`` in consecutive batches; the last one may be smaller."""
        for start in range(0, len(self), batch_size):
            yield self.x[start : start + batch_size]
