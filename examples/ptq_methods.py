"""Post-training methods beyond the converter's int8: per-tensor weights on a depthwise net.

Run: .venv/bin/python examples/ptq_methods.py [OUT_DIR]
Trains a small MobileNet-style classifier (depthwise-separable blocks, BatchNorm, ReLU6) on
the scikit-learn digits (bundled; nothing is downloaded), then quantizes it to int8 with
per-tensor weights, as some older accelerators need: asked for methods="auto", quantize
tries range search (MSE, percentile), cross-layer equalization and bias correction next to
the converter's plain int8, scores each against the float32 model on held-out data, and
keeps the one whose weakest output is best (plain int8 on a tie; with a gate, the one that
passes it by the largest margin). Writes the artifact and its recipe (replayable: the same
recipe and calibration data give the same bytes). With TFC_EXAMPLE_QUICK=1 (what CI's test of this
file sets) it trains for fewer epochs.
"""

import os
import sys
import tempfile
from pathlib import Path

import keras

import tfcompress
from tfcompress._files import write_text_atomic
from tfcompress.quantization.recipes import Recipe
from tfcompress.samples.datasets import digits

QUICK = os.environ.get("TFC_EXAMPLE_QUICK") == "1"


def depthwise_classifier() -> keras.Model:
    layers = keras.layers
    inputs = keras.Input((8, 8, 1), name="image")
    x = layers.Conv2D(16, 3, padding="same", use_bias=False)(inputs)
    x = layers.ReLU(6.0)(layers.BatchNormalization(momentum=0.9)(x))
    for filters, stride in ((24, 1), (32, 2)):
        x = layers.DepthwiseConv2D(3, strides=stride, padding="same", use_bias=False)(x)
        x = layers.ReLU(6.0)(layers.BatchNormalization(momentum=0.9)(x))
        x = layers.Conv2D(filters, 1, use_bias=False)(x)
        x = layers.ReLU(6.0)(layers.BatchNormalization(momentum=0.9)(x))
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(10, activation="softmax", name="digit")(x))


def main(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)  # a new folder is fine; a bad one fails now
    split = digits()  # 1,347 train / 450 test, 8x8
    keras.utils.set_random_seed(0)
    model = depthwise_classifier()
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="sparse_categorical_crossentropy")
    model.fit(split.train.x, split.train.y, epochs=10 if QUICK else 30, batch_size=32, verbose=0)

    result = tfcompress.quantize(
        model,
        recipe="int8",
        representative_data=split.train,
        eval_data=split.test,  # the methods are scored on it
        methods="auto",  # eval data alone means the converter's int8: ask for the methods
        per_channel=False,
    )
    print(result)  # sizes, then every candidate against float32 and which was kept

    plain = tfcompress.quantize(
        model, recipe="int8", representative_data=split.train, per_channel=False
    )
    evaluation = tfcompress.evaluate(
        {"float32": result.reference, "plain int8": plain.model, "kept int8": result.model},
        split.test,
    )
    print(evaluation)

    # The recipe records the methods kept; applied as given, it makes the same bytes again.
    again = tfcompress.quantize(
        model, recipe=Recipe.from_json(result.recipe.to_json()), representative_data=split.train
    )
    print(f"replayed {result.recipe.methods or 'plain int8'}: same bytes: "
          f"{again.model_content == result.model_content}")  # fmt: skip

    path = result.save(out_dir / "digits_int8.tflite", overwrite=True)
    recipe_path = out_dir / "digits_int8_recipe.json"
    write_text_atomic(recipe_path, result.recipe.to_json() + "\n", overwrite=True)
    print(f"wrote {path} and its recipe {recipe_path}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
