"""Build a zoo model by name and price it: MixNet-S at 32x32x1, width 0.5, full int8.

Run: .venv/bin/python examples/zoo_mixnet.py [OUT_DIR]
The bundled MNIST digits (28x28, nothing downloaded) are zero-padded to 32x32, the smallest
input the zoo's models take: padding keeps every pixel as it is, where resizing would blur
the strokes. The model is untrained: its size and MACs do not depend on the weights' values,
which is how a model search prices candidates before training any.
"""

import sys
import tempfile
from pathlib import Path

import numpy as np

import tfcompress
from tfcompress.bench.size import measure_size
from tfcompress.models import TFLiteModel
from tfcompress.samples.datasets import mnist
from tfcompress.zoo import create_model, list_models


def main(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    print("zoo:", ", ".join(list_models()))
    split = mnist()
    x = np.pad(split.train.x[:500], ((0, 0), (2, 2), (2, 2), (0, 0)))  # 28 -> 32, zeros

    model = create_model("mixnet_s", input_shape=(32, 32, 1), num_classes=10, width_multiplier=0.5)
    result = tfcompress.quantize(model, recipe="int8", representative_data=x)
    size = measure_size(TFLiteModel(result.model_content))  # the harness's own counter
    print(f"mixnet_s 32x32x1 width 0.5: {model.count_params():,} params, {size.macs:,} MACs")
    print(f"int8 .tflite: {size.file_bytes:,} bytes (float32: {len(result.reference_content):,})")

    with tfcompress.create_runner(result.model_content) as runner:  # LiteRT interpreter
        probabilities = runner.predict(x[:4])
    print(f"LiteRT int8 output {probabilities.shape}, rows sum to {probabilities.sum(1).round(2)}")
    path = result.save(out_dir / "mixnet_s_w0.5_int8.tflite", overwrite=True)
    print(f"wrote {path}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
