"""Files that are two formats at once, names that lie, and SavedModel graphs that act outside.

Every polyglot carries the Lambda payload of the seeds (it writes the campaign's marker
file when it runs), so a loader that reads the other format than the one checked is caught
by the marker, whatever the exit code.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np

from fuzzing.mutations import STRATEGIES, Mutant
from fuzzing.seeds import Seeds


def pad_to_power_of_two(prefix: bytes) -> bytes:
    """``prefix`` padded to 512, 1024, 2048...: where HDF5 looks for a superblock.

    Shared with tests/test_untrusted_polyglot.py, which builds the same polyglots.
    """
    size = 512
    while size < len(prefix):
        size *= 2
    return prefix + b"\0" * (size - len(prefix))


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def onnx_holding(onnx: bytes, tail: bytes, *, align: bool) -> bytes:
    """An ONNX model whose doc string (field 6, last in the file) ends with ``tail``.

    With ``align`` the tail starts at a power of two from 512, as an HDF5 superblock must.
    """
    padding = 0
    while True:
        head = onnx + b"\x32" + _varint(padding + len(tail))
        start = len(head) + padding
        if not align or (start >= 512 and start & (start - 1) == 0):
            return head + b"\0" * padding + tail
        target = 512
        while target < len(head):
            target *= 2
        padding = target - len(head)  # the length's varint may grow: checked on the next turn


def _layouts(seeds: Seeds) -> dict[str, Callable[[], bytes]]:
    def read(path: Path | None) -> bytes:
        return path.read_bytes() if path is not None else b""

    layouts = {
        "zip_stub+h5_lambda+keras": lambda: (
            pad_to_power_of_two(b"PK\x03\x04") + read(seeds.lambda_h5) + read(seeds.keras)
        ),
        "h5_lambda+keras": lambda: read(seeds.lambda_h5) + read(seeds.keras),
        "h5+keras_lambda": lambda: read(seeds.h5) + read(seeds.lambda_keras),
        "tflite+h5_lambda": lambda: (
            pad_to_power_of_two(read(seeds.tflite_float)) + read(seeds.lambda_h5)
        ),
        "tflite+keras_lambda": lambda: read(seeds.tflite_float) + read(seeds.lambda_keras),
    }
    if seeds.onnx is not None:
        layouts["onnx+h5_lambda"] = lambda: onnx_holding(
            read(seeds.onnx), read(seeds.lambda_h5), align=True
        )
        layouts["onnx+keras_lambda"] = lambda: onnx_holding(
            read(seeds.onnx), read(seeds.lambda_keras), align=False
        )
    return layouts


_EXTENSIONS = (".h5", ".keras", ".tflite", ".onnx", ".hdf5", ".bin")


def _polyglot(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    layouts = _layouts(seeds)
    name = sorted(layouts)[int(rng.integers(0, len(layouts)))]
    out = folder / f"polyglot{_EXTENSIONS[int(rng.integers(0, len(_EXTENSIONS)))]}"
    out.write_bytes(layouts[name]())
    return Mutant(out, "model", must_fail=True)


def _wrong_extension(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    pairs = [
        (seeds.keras, ".h5"),
        (seeds.h5, ".keras"),
        (seeds.lambda_h5, ".keras"),
        (seeds.lambda_keras, ".h5"),
        (seeds.tflite_int8, ".onnx"),
        (seeds.h5, ".tflite"),
    ]
    if seeds.onnx is not None:
        pairs.append((seeds.onnx, ".tflite"))
    source, extension = pairs[int(rng.integers(0, len(pairs)))]
    out = folder / f"renamed{extension}"
    shutil.copyfile(source, out)
    return Mutant(out, "model", must_fail=True)


def _folder_named_like_a_file(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    out = folder / ["model.h5", "model.keras", "model.tflite"][int(rng.integers(0, 3))]
    shutil.copytree(seeds.saved_model, out)
    return Mutant(out, "model", must_fail=True)


def _graph_on_call(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    # Loading is fine, and so is inspecting; running it is refused: the marker decides.
    out = Path(shutil.copytree(seeds.graph_on_call, folder / "graph_savedmodel"))
    return Mutant(out, "model", must_fail=False)


def _graph_on_load(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    out = Path(shutil.copytree(seeds.graph_on_load, folder / "graph_savedmodel"))
    return Mutant(out, "model", must_fail=True)


def _damaged_fingerprint(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    out = Path(shutil.copytree(seeds.saved_model, folder / "savedmodel"))
    (out / "fingerprint.pb").write_bytes(rng.bytes(int(rng.integers(1, 64))))
    return Mutant(out, "model", must_fail=False)


STRATEGIES.update(
    {
        "format.polyglot": _polyglot,
        "format.wrong_extension": _wrong_extension,
        "format.folder_named_like_a_file": _folder_named_like_a_file,
        "graph.writes_when_called": _graph_on_call,
        "graph.writes_when_loaded": _graph_on_load,
        "saved_model.damaged_fingerprint": _damaged_fingerprint,
    }
)
