"""Check a model for the Coral Edge TPU before buying one: what would run on it, and why not.

Run: .venv/bin/python examples/edgetpu_check.py [OUT_DIR]
No Edge TPU software is needed: the linter reads the .tflite only and predicts what
edgetpu_compiler 16 would map. The same small CNN is converted twice with
``target="edgetpu"`` (full int8, uint8 input and output, a fixed batch of 1, then the linter,
and edgetpu_compiler where it is installed): once with a hard-swish activation, which the
Edge TPU does not run, and once with ReLU6, the fix the linter suggests. Random calibration
data is enough to check compatibility (not to measure accuracy).
"""

import json
import sys
import tempfile
from pathlib import Path

import keras
import numpy as np

import tfcompress
from tfcompress.edgetpu import check


def small_cnn(activation: str) -> keras.Model:
    """A MobileNet-like block; ``activation`` in its last convolution."""
    layers = keras.layers
    inputs = keras.Input((32, 32, 3))  # the target fixes the batch at 1
    h = layers.Conv2D(16, 3, strides=2, padding="same", activation="relu6")(inputs)
    h = layers.DepthwiseConv2D(3, padding="same", activation="relu6")(h)
    h = layers.Conv2D(32, 1, activation=activation)(h)
    h = layers.GlobalAveragePooling2D()(h)
    return keras.Model(inputs, layers.Dense(10, activation="softmax")(h))


def main(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    calibration = np.random.default_rng(0).random((32, 32, 32, 3), dtype=np.float32)
    reports = {}
    for activation in ("hard_swish", "relu6"):
        result = tfcompress.quantize(
            small_cnn(activation), representative_data=calibration, target="edgetpu"
        )
        path = result.save(out_dir / f"cnn_{activation}_int8.tflite", overwrite=True)
        print(result.edgetpu, end="\n\n")  # the linter's summary, and the compiler's if any
        reports[activation] = report = check(path)  # the same linter, on the saved file
        print(report, end="\n\n")
        (out_dir / f"cnn_{activation}_edgetpu_check.json").write_text(
            json.dumps(report.to_dict(), indent=2)
        )
    before, after = reports["hard_swish"], reports["relu6"]
    print(
        f"hard-swish: {before.ops_mapped}/{before.ops_total} ops on the Edge TPU; "
        f"ReLU6: {after.ops_mapped}/{after.ops_total} (compatible: {after.compatible})"
    )
    if not after.compatible:
        raise SystemExit("the ReLU6 model should run whole on the Edge TPU")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
