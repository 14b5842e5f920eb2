"""Mutations of data files, and special files (FIFOs, devices) in a model's or data's place."""

from __future__ import annotations

import os
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from fuzzing.mutations import STRATEGIES, Mutant, Strategy, strategy
from fuzzing.seeds import Seeds

# --- data files ---------------------------------------------------------------------------


def _npz(folder: Path, **arrays: np.ndarray) -> Path:
    out = folder / "data.npz"
    np.savez(out, **arrays)
    return out


def _data_strategy(name: str, role: str = "data") -> Callable[[Callable], Strategy]:
    def register(build: Callable[[np.random.Generator, Path], Path]) -> Strategy:
        def make(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
            return Mutant(build(rng, folder), role, must_fail=True)

        STRATEGIES[f"data.{name}"] = make
        return make

    return register


def _x(rng: np.random.Generator, count: int = 6) -> np.ndarray:
    return rng.random((count, 8, 8, 1), dtype=np.float32)


_data_strategy("nan")(lambda rng, f: _npz(f, x=np.where(_x(rng) > 0.9, np.nan, _x(rng))))
_data_strategy("inf")(lambda rng, f: _npz(f, x=np.full((4, 8, 8, 1), np.inf, np.float32)))
_data_strategy("float64_overflow")(lambda rng, f: _npz(f, x=_x(rng).astype(np.float64) * 1e300))
_data_strategy("wrong_shape")(lambda rng, f: _npz(f, x=rng.random((5, 3, 7), dtype=np.float32)))
_data_strategy("complex")(lambda rng, f: _npz(f, x=_x(rng).astype(np.complex64)))
_data_strategy("strings")(lambda rng, f: _npz(f, x=np.array(["a", "b"])))
_data_strategy("empty")(lambda rng, f: _npz(f, x=np.zeros((0, 8, 8, 1), np.float32)))
_data_strategy("no_x")(lambda rng, f: _npz(f, samples=_x(rng)))
_data_strategy("zero_d")(lambda rng, f: _npz(f, x=np.float32(3.0)))
_data_strategy("labels_out_of_range", "labels")(
    lambda rng, f: _npz(f, x=_x(rng), y=np.full(6, 10**9, np.int64))
)
_data_strategy("labels_nan", "labels")(lambda rng, f: _npz(f, x=_x(rng), y=np.full(6, np.nan)))
_data_strategy("labels_length", "labels")(
    lambda rng, f: _npz(f, x=_x(rng), y=np.zeros(2, np.int64))
)


@_data_strategy("object_pickle")
def _object(rng: np.random.Generator, folder: Path) -> Path:
    out = folder / "data.npz"
    np.savez(out, x=np.array([{"a": 1}, None], dtype=object))
    return out


@_data_strategy("npy_named_npz")
def _npy_named(rng: np.random.Generator, folder: Path) -> Path:
    out = folder / "data.npz"
    with out.open("wb") as handle:
        np.save(handle, _x(rng))
    return out


@_data_strategy("npy_huge_shape")
def _npy_huge(rng: np.random.Generator, folder: Path) -> Path:
    # A valid header that declares ~250 GB over a file of a few hundred bytes.
    out = folder / "data.npy"
    header = {"descr": "<f4", "fortran_order": False, "shape": (10**12 // 64, 8, 8, 1)}
    with out.open("wb") as handle:
        np.lib.format.write_array_header_1_0(handle, header)
        handle.write(rng.bytes(256))
    return out


@_data_strategy("npz_bad_crc")
def _bad_crc(rng: np.random.Generator, folder: Path) -> Path:
    out = _npz(folder, x=_x(rng, 64))
    content = bytearray(out.read_bytes())
    start = content.find(b"x.npy") + 200  # inside the stored (uncompressed) member data
    content[start] ^= 0xFF
    out.write_bytes(bytes(content))
    return out


@_data_strategy("npz_garbage_member")
def _garbage_member(rng: np.random.Generator, folder: Path) -> Path:
    out = folder / "data.npz"
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("x.npy", rng.bytes(300))
    return out


# --- special files ------------------------------------------------------------------------


@strategy("special.fifo_model")
def _fifo_model(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    out = folder / ["m.tflite", "m.keras", "m.h5"][int(rng.integers(0, 3))]
    os.mkfifo(out)
    return Mutant(out, "model", must_fail=True)


@strategy("special.fifo_data")
def _fifo_data(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    out = folder / ["d.npz", "d.npy"][int(rng.integers(0, 2))]
    os.mkfifo(out)
    return Mutant(out, "data", must_fail=True)


@strategy("special.device_model")
def _device_model(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    out = folder / "zero.tflite"
    out.symlink_to("/dev/zero")
    return Mutant(out, "model", must_fail=True)


@strategy("special.empty_dir_model")
def _empty_dir(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    out = folder / "empty_model"
    out.mkdir()
    return Mutant(out, "model", must_fail=True)


@strategy("special.fifo_in_saved_model")
def _fifo_in_saved_model(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    out = folder / "savedmodel"
    shutil.copytree(seeds.saved_model, out)
    target = out / "variables" / "variables.index"
    target.unlink()
    os.mkfifo(target)
    return Mutant(out, "model", must_fail=True)
