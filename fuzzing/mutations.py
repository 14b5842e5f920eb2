"""Named mutation strategies: each turns a seed into a broken, hostile or odd input file.

A strategy is ``fn(rng, seeds, folder) -> Mutant``. It says which kind of input it made
(model or data), and whether every sane tool must refuse it (``must_fail``) or whether it
may legitimately still work (a bit flipped inside a weight is still a valid model).
Strategies register themselves with :func:`strategy`, next to their definition.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fuzzing.seeds import Seeds


@dataclass(frozen=True)
class Mutant:
    """One generated input.

    Attributes:
        path: The file or folder made.
        role: ``"model"``, ``"tflite"`` (a model that is a ``.tflite``), ``"data"`` or
            ``"labels"`` (a data file whose labels are broken: only label readers care).
        must_fail: True when any correct tool must reject it (exit 2).
    """

    path: Path
    role: str
    must_fail: bool


Strategy = Callable[[np.random.Generator, Seeds, Path], Mutant]
STRATEGIES: dict[str, Strategy] = {}


def strategy(name: str) -> Callable[[Strategy], Strategy]:
    """Register a mutation strategy under ``name`` (``family.what``)."""

    def register(fn: Strategy) -> Strategy:
        STRATEGIES[name] = fn
        return fn

    return register


# --- bytes, any format -------------------------------------------------------------------


def _bytes_mutant(rng: np.random.Generator, seed: Path, how: str) -> bytes:
    data = bytearray(seed.read_bytes())
    if how == "truncate":
        return bytes(data[: int(rng.integers(0, len(data)))])
    if how == "bitflip":
        for _ in range(int(rng.integers(1, 9))):
            position = int(rng.integers(0, len(data)))
            data[position] ^= 1 << int(rng.integers(0, 8))
        return bytes(data)
    start = int(rng.integers(0, len(data)))
    span = int(rng.integers(4, 65))
    data[start : start + span] = rng.integers(0, 256, span, dtype=np.uint8).tobytes()
    return bytes(data)


def _register_bytes(family: str, role: str, seed_of: Callable[[Seeds], Path]) -> None:
    for how in ("truncate", "bitflip", "splat"):

        def make(rng: np.random.Generator, seeds: Seeds, folder: Path, how: str = how) -> Mutant:
            seed = seed_of(seeds)
            out = folder / f"mutant{seed.suffix}"
            out.write_bytes(_bytes_mutant(rng, seed, how))
            return Mutant(out, role, must_fail=how == "truncate" and role != "data")

        STRATEGIES[f"{family}.{how}"] = make


_register_bytes("tflite", "tflite", lambda s: s.tflite_int8)
_register_bytes("keras", "model", lambda s: s.keras)
_register_bytes("h5", "model", lambda s: s.h5)
_register_bytes("npz", "data", lambda s: s.data_npz)


@strategy("tflite.random_body")
def _tflite_random_body(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    body = rng.integers(0, 256, int(rng.integers(8, 4096)), dtype=np.uint8).tobytes()
    out = folder / "random.tflite"
    out.write_bytes(body[:4] + b"TFL3" + body[8:])
    return Mutant(out, "tflite", must_fail=True)


def load_all() -> dict[str, Strategy]:
    """Import every strategy module (each registers itself) and return the registry."""
    from fuzzing import (
        mutations_data,
        mutations_formats,
        mutations_images,
        mutations_keras,
        mutations_onnx,
        mutations_tflite,
    )

    # Imported for registration.
    del mutations_data, mutations_formats, mutations_images, mutations_keras
    del mutations_onnx, mutations_tflite
    return STRATEGIES
