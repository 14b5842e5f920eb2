"""The TFLite converter vs LiteRT Quantizer, side by side, on two models.

Run: .venv/bin/python benchmarks/engines_compared.py [--quick]
     (writes the `litert_quantizer` section of docs/benchmarks.md)

For the small MNIST CNN (trained 3 epochs on 3,750 real digits) and MobileNetV2 (alpha 0.35,
96x96, trained 2 epochs on the same digits resized to 96x96x3: Keras weights cannot be
fetched here; its BatchNormalization momentum is set to 0.9 so the moving statistics
settle in 2 epochs), each arm quantizes the Keras model with the same 200 calibration samples:

- converter int8: ``tfcompress.quantize(model, recipe="int8")``;
- LiteRT Quantizer int8: ``engine="litert-quantizer"`` (static int8, float I/O);
- LiteRT Quantizer int4-weights (weight-only, no calibration).

Size is the file's bytes and its share of the float32 ``.tflite``; the drop is the float32
``.tflite``'s accuracy minus the arm's on the held-out digits; conversion time is
``result.conversion_seconds`` (LiteRT Quantizer's includes converting the Keras model to
its float ``.tflite``); latency is the median of 50 single-sample runs on the ``cpu``
backend (LiteRT, XNNPACK on, 1 thread) after 5 warm-up runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from _markdown import machine_line, write_section

import tfcompress
from tfcompress.report.table import format_table

ARMS = (
    ("converter int8", {"recipe": "int8", "engine": "converter"}),
    ("LiteRT Quantizer int8", {"recipe": "int8", "engine": "litert-quantizer"}),
    ("LiteRT Quantizer int4-weights", {"recipe": "int4-weights", "engine": "litert-quantizer"}),
)
INT4_GOAL = 0.16  # int4-weights at most this share of the float32 file (MNIST CNN)
DROP_GOAL = 0.01  # LiteRT Quantizer int8 within 1 point of the converter's accuracy


def mnist_cnn(quick: bool):
    from tfcompress.samples.cnn import small_cnn, train_classifier
    from tfcompress.samples.datasets import mnist

    split = mnist(test_fraction=0.25, seed=0)
    model = train_classifier(small_cnn(flavour="keras3"), split.train, epochs=1 if quick else 3)
    return model, split.train.x[:200], split.test


def mobilenet(quick: bool):
    import keras

    from tfcompress.data import Dataset
    from tfcompress.samples.datasets import mnist

    split = mnist(test_fraction=0.25, seed=0)

    def resized(x: np.ndarray) -> np.ndarray:
        images = keras.ops.image.resize(x, (96, 96))
        return np.repeat(keras.ops.convert_to_numpy(images), 3, axis=-1).astype(np.float32)

    train_n, test_n = (300, 200) if quick else (2000, 1000)
    train_x, test_x = resized(split.train.x[:train_n]), resized(split.test.x[:test_n])
    keras.utils.set_random_seed(0)
    model = keras.applications.MobileNetV2(
        input_shape=(96, 96, 3), alpha=0.35, weights=None, classes=10
    )
    for layer in model.layers:  # 0.999 leaves the moving statistics at their init in 2 epochs
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.momentum = 0.9
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(train_x, split.train.y[:train_n], epochs=1 if quick else 2, batch_size=32, verbose=0)
    return model, train_x[:200], Dataset(test_x, split.test.y[:test_n])


def latency_ms(content: bytes, sample: np.ndarray) -> float:
    from tfcompress.models import TFLiteModel
    from tfcompress.runtime import create_runner

    runner = create_runner(TFLiteModel(content, verified=True), backend="cpu", threads=1)
    try:
        for _ in range(5):
            runner.predict(sample)
        times = []
        for _ in range(50):
            start = time.perf_counter()
            runner.predict(sample)
            times.append(time.perf_counter() - start)
    finally:
        runner.close()
    return 1000 * statistics.median(times)


def output_snr_db(reference: np.ndarray, output: np.ndarray) -> float:
    noise = float(np.sum((output - reference) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(float(np.sum(reference**2)) / noise)


def outputs(content: bytes, x: np.ndarray) -> np.ndarray:
    from tfcompress.models import TFLiteModel
    from tfcompress.runtime import create_runner

    runner = create_runner(TFLiteModel(content, verified=True), backend="cpu", threads=1)
    try:
        return np.asarray(runner.predict(x), np.float64)
    finally:
        runner.close()


def measure(name: str, model, calib: np.ndarray, test) -> tuple[list[list[str]], dict]:
    results = {arm: tfcompress.quantize(model, representative_data=calib, **opts)
               for arm, opts in ARMS}  # fmt: skip
    float32 = results["converter int8"].reference
    models = {"float32": float32, **{arm: r.model for arm, r in results.items()}}
    scores = tfcompress.evaluate(models, test)
    sample = test.x[:1]
    reference = outputs(float32.content, test.x[:200])
    rows = [[name, "float32 .tflite", f"{float32.size_bytes:,}", "1.000",
             f"{100 * scores['float32'].score:.2f}", "-", "-", "-",
             f"{latency_ms(float32.content, sample):.3f}"]]  # fmt: skip
    found = {"float32_bytes": float32.size_bytes}
    for arm, result in results.items():
        drop = scores.drop(arm)
        rows.append([
            name, arm, f"{result.size_bytes:,}", f"{result.size_bytes / float32.size_bytes:.3f}",
            f"{100 * scores[arm].score:.2f}", f"{100 * drop:+.2f}",
            f"{output_snr_db(reference, outputs(result.model_content, test.x[:200])):.1f}",
            f"{result.conversion_seconds:.1f}", f"{latency_ms(result.model_content, sample):.3f}",
        ])  # fmt: skip
        found[arm] = {
            "bytes": result.size_bytes,
            "ratio": result.size_bytes / float32.size_bytes,
            "score": scores[arm].score,
            "drop": drop,
        }
    return rows, found


def goals(name: str, found: dict) -> list[str]:
    conv, lq = found["converter int8"], found["LiteRT Quantizer int8"]
    int4 = found["LiteRT Quantizer int4-weights"]
    gap = conv["score"] - lq["score"]
    lines = [
        f"- {name}: LiteRT Quantizer int8 scores {100 * gap:+.2f} pt below the converter's "
        f"int8 ({'met' if gap <= DROP_GOAL else 'missed'}: goal at most 1 pt) and is "
        f"{lq['bytes'] / conv['bytes']:.3f}x its size "
        f"({'met' if lq['bytes'] <= conv['bytes'] else 'missed'}: goal no larger); "
        f"int4-weights is {int4['ratio']:.3f} of float32 and drops {100 * int4['drop']:+.2f} pt."
    ]
    if name == "MNIST CNN":
        met = "met" if int4["ratio"] <= INT4_GOAL else "missed"
        lines.append(f"- MNIST CNN int4-weights size goal (at most {INT4_GOAL} of float32): {met}.")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 epoch, fewer samples; no write")
    args = parser.parse_args()
    rows, lines = [], []
    for name, build in (("MNIST CNN", mnist_cnn), ("MobileNetV2 0.35 96x96", mobilenet)):
        model, calib, test = build(args.quick)
        model_rows, found = measure(name, model, calib, test)
        rows += model_rows
        lines += goals(name, found)
    header = ["model", "arm", "bytes", "vs float32", "accuracy %", "drop pt", "output SNR dB",
              "convert s", "cpu ms"]  # fmt: skip
    body = (
        "## The converter vs LiteRT Quantizer\n\n"
        "`benchmarks/engines_compared.py`: each Keras model quantized by the TFLite converter "
        "(int8) and by LiteRT Quantizer (int8, int4-weights) with the same 200 calibration "
        "samples; accuracy on held-out real digits; output SNR: the arm's class probabilities "
        "against the float32 `.tflite`'s on 200 of them; latency: median of 50 single-sample runs "
        "on `cpu` (LiteRT, XNNPACK, 1 thread). MobileNetV2 is trained 2 epochs on digits "
        f"resized to 96x96x3.\n\nMachine: {machine_line()}.\n\n"
        + format_table(header, rows, markdown=True)
        + "\n\n"
        + "\n".join(lines)
    )
    print(body)
    if not args.quick:
        write_section("litert_quantizer", body)


if __name__ == "__main__":
    main()
