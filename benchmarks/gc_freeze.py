"""What keeping the cycle collector off TensorFlow's import objects saves, per conversion.

Every full collection walks all the objects the process holds; after ``import tensorflow,
keras`` that is ~400,000 that live as long as the process, and the TFLite converter starts one
collection per conversion. ``tfcompress/_compat/heap.py`` freezes what exists for the length
of a conversion (``sparing_collections``, in any process) and, in processes tfcompress owns
(the CLI, the fine-tuning child), for good after the imports.

This script quantizes two models to int8 three times each in this (a user's) process: with
the conversion's freeze switched off (as before it existed) and on, timing the whole call and
the full collections inside it (``gc.callbacks``), and checking the bytes are the same. It
then times ``python -m tfcompress quantize`` of the MNIST CNN in fresh processes, with the
lasting freeze and without it.

Run: .venv/bin/python benchmarks/gc_freeze.py  (writes the gc-freeze section of
docs/benchmarks.md; about three minutes on two cores)
"""

from __future__ import annotations

import contextlib
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
from _markdown import machine_line, write_section

import tfcompress
from tfcompress.quantization import converter
from tfcompress.report.table import format_table
from tfcompress.samples.cnn import small_cnn
from tfcompress.samples.datasets import mnist
from tfcompress.zoo import create_model

CALLS = 3
CLI_RUNS = 3
# Run the CLI as before the lasting freeze: its entry point with own_this_process a no-op.
_CLI_WITHOUT_FREEZE = (
    "import sys, tfcompress.cli as cli; cli.own_this_process = lambda: None; cli.entry()"
)


class _FullCollections:
    """Seconds spent in full (generation 2) collections while active."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._start


def _quantize_times(model, data, *, sparing: bool) -> tuple[list[float], list[float], set]:
    walls, collections, contents = [], [], set()
    original = converter.sparing_collections
    if not sparing:
        converter.sparing_collections = contextlib.nullcontext
    try:
        for _ in range(CALLS):
            counter = _FullCollections()
            gc.callbacks.append(counter)
            start = time.perf_counter()
            result = tfcompress.quantize(model, recipe="int8", representative_data=data)
            walls.append(time.perf_counter() - start)
            gc.callbacks.remove(counter)
            collections.append(counter.seconds)
            contents.add(result.model_content)
    finally:
        converter.sparing_collections = original
    return walls, collections, contents


def _cli_seconds(folder: Path, *, lasting: bool) -> float:
    args = ["quantize", "cnn.keras", "--recipe", "int8", "--data", "calib.npz", "--force"]
    code = ["-m", "tfcompress"] if lasting else ["-c", _CLI_WITHOUT_FREEZE]
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, *code, *args, "--out", "out.tflite"],
        cwd=folder,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def main() -> None:
    started = time.perf_counter()
    split = mnist()
    models = {
        "MNIST CNN (28x28)": (small_cnn(), split.train.x[:200]),
        "MobileNetV2 0.35 (32x32)": (
            create_model(
                "mobilenet_v2", input_shape=(32, 32, 1), num_classes=10, width_multiplier=0.35
            ),
            np.pad(split.train.x[:200], ((0, 0), (2, 2), (2, 2), (0, 0))),
        ),
    }
    model, data = models["MNIST CNN (28x28)"]
    tfcompress.quantize(model, recipe="int8", representative_data=data)  # imports, not timed
    rows, same = [], True
    for name, (model, data) in models.items():
        for sparing in (False, True):
            walls, collections, contents = _quantize_times(model, data, sparing=sparing)
            same = same and len(contents) == 1
            rows.append(
                [
                    name,
                    "on" if sparing else "off",
                    f"{statistics.median(walls):.2f}s",
                    f"{statistics.median(collections):.2f}s",
                ]
            )
    with tempfile.TemporaryDirectory() as folder:
        small_cnn().save(Path(folder) / "cnn.keras")
        np.savez(Path(folder) / "calib.npz", x=split.train.x[:300])
        cli = {
            lasting: statistics.median(
                _cli_seconds(Path(folder), lasting=lasting) for _ in range(CLI_RUNS)
            )
            for lasting in (False, True)
        }
    body = "\n".join(
        [
            "## Full collections kept off TensorFlow's objects (issue 21)",
            "",
            f"Measured by `benchmarks/gc_freeze.py` on {machine_line()} in "
            f'{time.perf_counter() - started:.0f}s: `quantize(recipe="int8")` {CALLS} times '
            "per model in one process (medians), with the conversion's freeze off and on.",
            "",
            format_table(["model", "freeze", "quantize", "in full collections"], rows),
            "",
            f"* The int8 files are {'the same bytes' if same else 'NOT the same bytes'} "
            "either way.",
            f"* `python -m tfcompress quantize` of the MNIST CNN in a fresh process (median of "
            f"{CLI_RUNS}): {cli[False]:.1f}s without the lasting freeze after the imports, "
            f"{cli[True]:.1f}s with it.",
        ]
    )
    print(body)
    write_section("gc_freeze", body)


if __name__ == "__main__":
    main()
