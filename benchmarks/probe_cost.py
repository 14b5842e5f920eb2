"""What the load probe costs: the first native touch of a ``.tflite``/``.onnx``, in a child.

Before LiteRT or ONNX Runtime touches an artifact in this process, ``models/probe.py`` has
it loaded, prepared and run once on zeros in a child process (a crash or a hang there is
one error line). This script measures, in fresh processes (``ROUNDS`` of them):

* the first probe of a process (what ``tfcompress inspect m.tflite`` pays, child start-up
  included);
* a later probe of other bytes in the same process (``inspect`` of several files);
* a later probe in a process that measures: a measurement worker is open, so its zygote
  runs (``benchmark`` and the gates load their artifacts with it running);
* a probe of bytes already probed (a cache hit).

on the MNIST CNN quantized to int8 (``.tflite``) and, when ONNX Runtime is installed, a
small ONNX model (one Gemm + Relu).

Run: .venv/bin/python benchmarks/probe_cost.py  (writes the probe-cost section of
docs/benchmarks.md; about a minute on two cores).
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _markdown import machine_line, write_section

ROUNDS = 7
LATER = 5  # later probes per process, each of bytes not probed yet
_ONE_PROCESS = """
import json, sys, time
from pathlib import Path
from tfcompress.models import probe
kind, later, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
content = Path(paths[0]).read_bytes()

def timed(data):
    start = time.perf_counter()
    probe.probe_model(data, kind, source="m")
    return (time.perf_counter() - start) * 1000

first = timed(content)
cached = timed(content)
others = [timed(Path(path).read_bytes()) for path in paths[1 : later + 1]]
from tfcompress.bench.isolation import IsolatedRunner
from tfcompress.models import load_model

backend = "cpu" if kind == "tflite" else "onnxruntime"
with IsolatedRunner(load_model(paths[0]), backend=backend):  # its zygote runs now
    measuring = [timed(Path(path).read_bytes()) for path in paths[later + 1 :]]
print(json.dumps({"first": first, "later": others, "measuring": measuring, "cached": cached}))
"""


def _tflite(folder: Path) -> list[Path]:
    """The int8 CNN, then copies with a different trailing byte (other bytes, same model)."""
    import tfcompress
    from tfcompress.samples.cnn import small_cnn

    calibration = np.random.default_rng(0).random((32, 28, 28, 1), dtype=np.float32)
    result = tfcompress.quantize(
        small_cnn(flavour="keras3"), recipe="int8", representative_data=calibration
    )
    paths = []
    for i in range(2 * LATER + 1):
        path = folder / f"cnn_int8_{i}.tflite"
        path.write_bytes(result.model_content + bytes(i))
        paths.append(path)
    return paths


def _onnx(folder: Path) -> list[Path]:
    if importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("onnx") is None:
        return []
    return [_one_onnx(folder, seed) for seed in range(2 * LATER + 1)]


def _one_onnx(folder: Path, seed: int) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weights = np.random.default_rng(seed).standard_normal((64, 10)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "gemm_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])],
        initializer=[numpy_helper.from_array(weights, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = folder / f"gemm_relu_{seed}.onnx"
    onnx.save(model, path)
    return path


def _rounds(kind: str, paths: list[Path]) -> dict[str, float]:
    firsts, laters, measuring, cached = [], [], [], []
    for _ in range(ROUNDS):
        done = subprocess.run(
            [sys.executable, "-c", _ONE_PROCESS, kind, str(LATER), *map(str, paths)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"the measuring process failed: {done.stderr[-2000:]}")
        record = json.loads(done.stdout.strip().splitlines()[-1])
        firsts.append(record["first"])
        laters.extend(record["later"])
        measuring.extend(record["measuring"])
        cached.append(record["cached"])
    return {
        "first": statistics.median(firsts),
        "later": statistics.median(laters),
        "measuring": statistics.median(measuring),
        "cached": statistics.median(cached),
    }


def main() -> None:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        files = {"tflite": _tflite(Path(folder)), "onnx": _onnx(Path(folder))}
        measured = {kind: _rounds(kind, paths) for kind, paths in files.items() if paths}
    names = {"tflite": "MNIST CNN int8 `.tflite`", "onnx": "Gemm + Relu `.onnx`"}
    lines = [
        "## Cost of the load probe",
        "",
        f"Measured by `benchmarks/probe_cost.py` on {machine_line()} in "
        f"{time.perf_counter() - started:.0f}s: medians over {ROUNDS} fresh processes "
        f"({LATER} later probes each, then {LATER} with a measurement worker open).",
        "",
        "| artifact | first probe of a process (ms) | later probe of other bytes (ms) "
        "| later probe, a measurement worker open (ms) | same bytes again (ms) |",
        "|---|---|---|---|---|",
    ]
    for kind, numbers in measured.items():
        lines.append(
            f"| {names[kind]} | {numbers['first']:.0f} | {numbers['later']:.0f} "
            f"| {numbers['measuring']:.0f} | {numbers['cached']:.3f} |"
        )
    path = write_section("probe-cost", "\n".join(lines))
    print("\n".join(lines))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
