"""Compress to a target: the smallest .tflite that loses at most one accuracy point, proven.

Run: .venv/bin/python examples/compress_mnist.py [OUT_DIR]
Trains the small CNN on the 5,000 bundled MNIST digits (nothing is downloaded), lets
tfcompress.compress try int8, more calibration, selective float layers and int16x8 cheapest
first, and writes the chosen artifact with its report (JSON, Markdown, plots).
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

    result = tfcompress.compress(
        model,
        representative_data=split.train,
        eval_data=split.test,  # labelled: the gate is the accuracy drop, with its interval
        max_drop=0.01,
        measure_latency=True,  # time each attempt on this CPU too (the objective stays size)
        progress=True,  # "attempt k of n" and the best so far, on stderr
    )
    print(result)  # the attempts table, the chosen artifact and why the search stopped
    if not result.passed:
        raise SystemExit("no artifact passed a one-point gate")
    ratio = result.chosen.size_bytes / result.float32_bytes
    print(f"{result.chosen.name}: {ratio:.2f}x the float32 .tflite")

    path = result.save(out_dir / "mnist_compressed.tflite", overwrite=True)
    print(f"wrote {path}")
    for written in result.write_report(out_dir / "report", overwrite=True):
        print(f"report: {written}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
