"""TFLite Micro's LUT-compressed weights (``export-c --lut``): flash and arena before and after.

Run: .venv/bin/python benchmarks/mcu_lut.py
     (writes the `mcu_lut` section of docs/benchmarks.md and benchmarks/results/mcu_lut.json)

Models: the demo's MNIST CNN (``small_cnn``, 225k parameters) and a small CNN (16x16x1 input,
Conv2D(8)-Dense(64)-Dense(10), 101k parameters), each with random weights clustered after the
fact to 16 linearly spaced values per layer (what ``tfcompress cluster`` starts from before it
fine-tunes; flash and arena depend only on how many distinct values each channel holds), then
quantized with ``quantize(target="mcu")`` on 64 random calibration inputs. Each is compressed
with ``tfcompress.targets.mcu.lut.lut_compress`` (TFLM's own compressor), whose figures are
printed as measured: flash (model + C array overhead) and the recommended arena (bisected,
+10%) before and after, and the largest output difference between the two files through TFLM
on 8 seeded random inputs.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from _markdown import machine_line, write_section

RESULTS = Path(__file__).resolve().parent / "results" / "mcu_lut.json"
CLUSTERS = 16


def _clustered(model: Any) -> Any:
    for layer in model.layers:
        weights = layer.get_weights()
        if weights:
            kernel = weights[0]
            centroids = np.linspace(kernel.min(), kernel.max(), CLUSTERS)
            nearest = np.abs(kernel[..., None] - centroids).argmin(-1)
            weights[0] = centroids[nearest].astype(np.float32)
            layer.set_weights(weights)
    return model


def _models() -> dict[str, Any]:
    import keras

    from tfcompress.samples.cnn import small_cnn

    keras.utils.set_random_seed(0)
    small = keras.Sequential([
        keras.Input((16, 16, 1)), keras.layers.Conv2D(8, 3, activation="relu"),
        keras.layers.Flatten(), keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10),
    ])  # fmt: skip
    return {"mnist_cnn (demo)": small_cnn(), "small_cnn 16x16": small}


def main() -> None:
    import tfcompress
    from tfcompress.targets.mcu.lut import lut_compress

    rows = []
    for name, model in _models().items():
        model = _clustered(model)
        shape = (64, *model.input_shape[1:])
        calib = np.random.default_rng(0).random(shape, dtype=np.float32)
        result = tfcompress.quantize(model, representative_data=calib, target="mcu")
        start = time.perf_counter()
        packed = lut_compress(result.model_content, name=name)
        row = {"model": name, **packed.to_dict(), "seconds": time.perf_counter() - start}
        rows.append(row)
        print(name, packed)
    RESULTS.write_text(json.dumps(rows, indent=1) + "\n")
    lines = [
        "## TFLite Micro LUT-compressed weights (`export-c --lut`)",
        "",
        f"Measured by `benchmarks/mcu_lut.py` ({machine_line()}): weights clustered to "
        f"{CLUSTERS} values per layer, int8 with `--target mcu`, then TFLM's own LUT "
        "compressor; arena = recommended (bisected smallest + 10%), host estimate.",
        "",
        "| model | tensors (bits) | flash before | flash after | arena before | arena after "
        "| outputs |",
        "|---|---|--:|--:|--:|--:|---|",
    ]
    for row in rows:
        bits = ", ".join(f"{t['bytes']:,} B ({t['bits']})" for t in row["tensors"])
        same = "identical" if row["outputs_identical"] else f"max diff {row['max_difference']}"
        lines.append(
            f"| {row['model']} | {bits} | {row['flash_bytes_before']:,} B | "
            f"{row['flash_bytes_after']:,} B | {row['arena_bytes_before']:,} B | "
            f"{row['arena_bytes_after']:,} B | {same} ({row['samples']} inputs) |"
        )
    lines += [
        "",
        "The decoded weights live in the arena (DECODE's outputs are planned there), so the "
        "flash saved comes back as RAM: worth it where flash, not RAM, is what is short.",
    ]
    write_section("mcu_lut", "\n".join(lines))


if __name__ == "__main__":
    main()
