"""What running the converter in a child process costs: wall time, child vs in-process.

Since issue 29 the TFLite converter and its MLIR quantizer run in a child process
(``tfcompress/_child/``), so a crash there is one error line, not the caller's death. The
child imports TensorFlow once per process (``quantize`` and ``compress`` start it while the
caller loads the model) and stays warm for the next conversion. This script measures, on the
MNIST CNN (random weights, 64 calibration samples, int8):

* ``quantize`` through the CLI, a fresh process each run (what a user typing the command
  pays): child (the default) and ``TFCOMPRESS_IN_PROCESS=1``;
* ``tfcompress.quantize`` called three times in one process (a notebook, ``compress``):
  first call and later calls, child and in-process.

Rounds alternate the two ways; the table shows medians over ``ROUNDS`` rounds.

Run: .venv/bin/python benchmarks/child_cost.py  (writes the child-cost section of
docs/benchmarks.md; about three minutes on two cores).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _markdown import machine_line, write_section

ROUNDS = 5
_API = """
import sys, time, numpy as np, tfcompress
from tfcompress.models import load_model
model = load_model(sys.argv[1]); x = np.load(sys.argv[2])["x"]
for _ in range(3):
    start = time.perf_counter()
    tfcompress.quantize(model, recipe="int8", representative_data=x)
    print(time.perf_counter() - start)
"""


def _files(folder: Path) -> tuple[Path, Path]:
    from tfcompress.samples.cnn import small_cnn

    model, data = folder / "cnn.keras", folder / "calib.npz"
    small_cnn(flavour="keras3").save(model)
    np.savez(data, x=np.random.default_rng(0).random((64, 28, 28, 1), dtype=np.float32))
    return model, data


def _env(in_process: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TFCOMPRESS_IN_PROCESS"}
    return {**env, "TFCOMPRESS_IN_PROCESS": "1"} if in_process else env


def _cli(model: Path, data: Path, out: Path, in_process: bool) -> float:
    command = [sys.executable, "-m", "tfcompress", "quantize", str(model), "--recipe", "int8"]
    command += ["--data", str(data), "--out", str(out), "--force"]
    start = time.perf_counter()
    subprocess.run(command, env=_env(in_process), capture_output=True, check=True)
    return time.perf_counter() - start


def _api(model: Path, data: Path, in_process: bool) -> list[float]:
    done = subprocess.run(
        [sys.executable, "-c", _API, str(model), str(data)],
        env=_env(in_process),
        capture_output=True,
        text=True,
        check=True,
    )
    return [float(line) for line in done.stdout.split()]


def main() -> None:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        model, data = _files(Path(folder))
        out = Path(folder) / "int8.tflite"
        cli: dict[bool, list[float]] = {True: [], False: []}
        api: dict[bool, list[list[float]]] = {True: [], False: []}
        for round_ in range(ROUNDS):
            for in_process in (round_ % 2 == 0, round_ % 2 == 1):
                cli[in_process].append(_cli(model, data, out, in_process))
                api[in_process].append(_api(model, data, in_process))
    rows = []
    for in_process, label in ((False, "child (default)"), (True, "in process")):
        first = statistics.median(run[0] for run in api[in_process])
        later = statistics.median(t for run in api[in_process] for t in run[1:])
        rows.append((label, statistics.median(cli[in_process]), first, later))
    lines = [
        f"Measured by `benchmarks/child_cost.py` on {machine_line()} in "
        f"{time.perf_counter() - started:.0f}s: the MNIST CNN to int8 (64 calibration "
        f"samples), medians of {ROUNDS} rounds.",
        "",
        "converter runs                    CLI quantize   API 1st call   API later calls",
        "-------------------------------  -------------  -------------  ----------------",
    ]
    lines += [f"{r[0]:<31}  {r[1]:>12.2f}s  {r[2]:>12.2f}s  {r[3]:>15.2f}s" for r in rows]
    (_, cli_c, first_c, later_c), (_, cli_p, first_p, later_p) = rows
    lines += [
        "",
        f"* A `quantize` command costs {cli_c - cli_p:+.2f}s with the converter in its child "
        f"({cli_c / cli_p:.2f}x): the child's own TensorFlow import, partly overlapped.",
        f"* In one process, the first conversion costs {first_c - first_p:+.2f}s; later ones "
        f"{later_c - later_p:+.2f}s each (the warm child).",
    ]
    path = write_section("child_cost", "\n".join(lines))
    print("\n".join(lines))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
