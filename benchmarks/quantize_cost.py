"""What `tfcompress.quantize` costs against the bare TFLite converter doing the same outputs.

Run: .venv/bin/python benchmarks/quantize_cost.py [--repeats 5]
     (writes the `quantize_cost` section of docs/benchmarks.md)

quantize makes two files, the int8 model and its float32 reference, from one trace of the
model. It is timed against a bare script that converts both with
`tf.lite.TFLiteConverter.from_keras_model` (what quantize replaces), and against a bare
int8-only conversion (the least anyone could do). The arms run interleaved, in a rotating
order, in one process after one untimed warm-up of each; medians are reported.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from _markdown import machine_line, write_section

import tfcompress
from tfcompress.report.table import format_table

GOAL = 0.9  # quantize must cost at most this share of the two bare conversions it replaces
SAMPLES = 32


def bare_float32(model) -> bytes:
    import tensorflow as tf

    return tf.lite.TFLiteConverter.from_keras_model(model).convert()


def bare_int8(model, x: np.ndarray) -> bytes:
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.representative_dataset = lambda: ([sample[np.newaxis]] for sample in x)
    return converter.convert()


def arms(model, x: np.ndarray) -> dict[str, Callable[[], dict[str, int]]]:
    """Each arm returns the byte sizes of what it made, to show the work is the same."""

    def quantize() -> dict[str, int]:
        result = tfcompress.quantize(model, recipe="int8", representative_data=x)
        return {"float32": result.reference_size_bytes, "int8": result.size_bytes}

    def both() -> dict[str, int]:
        return {"float32": len(bare_float32(model)), "int8": len(bare_int8(model, x))}

    def int8_only() -> dict[str, int]:
        return {"int8": len(bare_int8(model, x))}

    return {
        "tfcompress.quantize (int8 + float32 reference)": quantize,
        "bare from_keras_model: float32 + int8": both,
        "bare from_keras_model: int8 only": int8_only,
    }


def measure(
    run: dict[str, Callable[[], dict[str, int]]], repeats: int
) -> tuple[dict[str, list[float]], dict[str, dict[str, int]]]:
    names = list(run)
    # warm-up: lazy imports and first-call costs hit no arm's timings; it also says what
    # each arm makes
    sizes = {name: run[name]() for name in names}
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(repeats):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order:
            gc.collect()
            start = time.perf_counter()
            run[name]()
            times[name].append(time.perf_counter() - start)
            print(f"round {round_ + 1}/{repeats} {name}: {times[name][-1]:.2f}s", flush=True)
    return times, sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per arm (>= 3)")
    args = parser.parse_args()
    if args.repeats < 3:
        parser.error("--repeats must be at least 3 for a median")
    import keras

    keras.utils.set_random_seed(0)
    model = keras.applications.MobileNetV2(alpha=0.35, input_shape=(96, 96, 3), weights=None)
    x = np.random.default_rng(0).random((SAMPLES, 96, 96, 3), dtype=np.float32)
    times, sizes = measure(arms(model, x), args.repeats)
    print(body := report(times, sizes, args.repeats))
    print(f"wrote {write_section('quantize_cost', body)}")


def report(times: dict[str, list[float]], sizes: dict[str, dict[str, int]], repeats: int) -> str:
    quantize_name, both_name, int8_name = times
    median = {name: statistics.median(values) for name, values in times.items()}
    rows = [
        [
            name,
            f"{median[name]:.2f}",
            f"{min(values):.2f}",
            f"{max(values):.2f}",
            f"{median[name] / median[both_name]:.2f}",
            ", ".join(f"{kind} {size:,}" for kind, size in sizes[name].items()),
        ]
        for name, values in times.items()
    ]
    header = ["arm", "median s", "min s", "max s", "x bare both", "output bytes"]
    table = format_table(header, rows, markdown=True)
    ratio = median[quantize_name] / median[both_name]
    ratio_int8 = median[quantize_name] / median[int8_name]
    spread = max(max(v) / min(v) for v in times.values())
    verdict = "met" if ratio <= GOAL else "not met"
    same = all(sizes[quantize_name][k] == sizes[both_name][k] for k in ("float32", "int8"))
    return (
        "## Cost of `quantize`: one trace for two outputs\n\n"
        f"Machine: {machine_line()}. Script: `benchmarks/quantize_cost.py`. Model: "
        f"MobileNetV2 alpha 0.35, 96x96, random weights, {SAMPLES} random calibration samples. "
        f"Wall time of each arm, {repeats} interleaved runs after one warm-up, in one "
        "process.\n\n"
        f"{table}\n\n"
        f"`tfcompress.quantize` took {ratio:.2f}x the wall time of the bare script doing both "
        f"conversions ({median[quantize_name]:.1f}s against {median[both_name]:.1f}s, medians) "
        f"and {ratio_int8:.2f}x a bare int8-only conversion ({median[int8_name]:.1f}s). The "
        f"goal of at most {GOAL:.2f}x the two bare conversions was {verdict} in this run. "
        f"Runs of one arm varied by up to {spread:.2f}x (slowest / fastest). The float32 and "
        f"int8 files of quantize and of the bare script are "
        f"{'the same size' if same else 'of different sizes'}.\n"
    )


if __name__ == "__main__":
    main()
