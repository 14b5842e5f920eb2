"""The valid files a fuzz campaign mutates: tiny models in every format, data, code payloads.

Everything is built once per campaign in a work folder, from code, in a few seconds: no
download and no training (the contract does not depend on accuracy).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SAMPLE_SHAPE = (8, 8, 1)
CLASSES = 3


@dataclass(frozen=True)
class Seeds:
    """Paths of the seed files, and the marker a code payload would create.

    Attributes:
        root: The folder holding them.
        marker: The file a Lambda payload writes when its code runs; it must never appear.
        keras: A Keras 3 ``.keras`` model.
        h5: The same architecture saved by tf-keras as ``.h5``.
        saved_model: A tf-keras SavedModel directory.
        tflite_float: A float32 ``.tflite``.
        tflite_int8: A full-int8 ``.tflite`` (float I/O).
        data_npz: Labelled samples ``x``/``y``.
        lambda_h5: A tf-keras ``.h5`` whose Lambda layer writes ``marker`` when it runs.
        lambda_saved_model: The same Lambda model as a tf-keras SavedModel.
        lambda_keras: A Keras 3 ``.keras`` with the same Lambda.
    """

    root: Path
    marker: Path
    keras: Path
    h5: Path
    saved_model: Path
    tflite_float: Path
    tflite_int8: Path
    data_npz: Path
    lambda_h5: Path
    lambda_saved_model: Path
    lambda_keras: Path


def build_seeds(root: Path, *, seed: int = 0) -> Seeds:
    """Create every seed file under ``root`` (which must exist).

    Example:
        >>> seeds = build_seeds(Path("/tmp/fuzz"))  # doctest: +SKIP
    """
    import tfcompress
    from tfcompress._compat.keras import KerasFlavour, keras_module

    rng = np.random.default_rng(seed)
    x = rng.random((24, *SAMPLE_SHAPE), dtype=np.float32)
    y = rng.integers(0, CLASSES, len(x))
    marker = root / "CODE_RAN"
    seeds = Seeds(
        root=root,
        marker=marker,
        keras=root / "seed.keras",
        h5=root / "seed.h5",
        saved_model=root / "seed_savedmodel",
        tflite_float=root / "seed_float32.tflite",
        tflite_int8=root / "seed_int8.tflite",
        data_npz=root / "seed_data.npz",
        lambda_h5=root / "lambda.h5",
        lambda_saved_model=root / "lambda_savedmodel",
        lambda_keras=root / "lambda.keras",
    )
    np.savez(seeds.data_npz, x=x, y=y)
    keras3 = keras_module(KerasFlavour.KERAS3)
    tf_keras = keras_module(KerasFlavour.TF_KERAS)
    keras3.utils.set_random_seed(seed)
    model = _tiny_model(keras3)
    model.save(seeds.keras)
    tfk_model = _tiny_model(tf_keras)
    tfk_model.save(seeds.h5)
    tfk_model.save(seeds.saved_model, save_format="tf")
    float32 = tfcompress.quantize(model, recipe="float32")
    float32.save(seeds.tflite_float)
    tfcompress.quantize(model, recipe="int8", representative_data=x).save(seeds.tflite_int8)
    _lambda_model(tf_keras, marker).save(seeds.lambda_h5)
    _lambda_model(tf_keras, marker).save(seeds.lambda_saved_model, save_format="tf")
    _lambda_model(keras3, marker).save(seeds.lambda_keras)
    marker.unlink(missing_ok=True)  # saving may trace the Lambda; the campaign starts clean
    return seeds


def _tiny_model(keras: object) -> object:
    layers = keras.layers  # type: ignore[attr-defined]
    return keras.Sequential(  # type: ignore[attr-defined]
        [
            keras.Input(shape=SAMPLE_SHAPE),  # type: ignore[attr-defined]
            layers.Conv2D(4, 3, activation="relu"),
            layers.Flatten(),
            layers.Dense(CLASSES, activation="softmax"),
        ],
        name="fuzz_seed",
    )


def _lambda_model(keras: object, marker: Path) -> object:
    # The payload's path is a constant inside the marshalled bytecode, as in a real attack.
    payload = eval(  # builds our own test payload; never evaluates user input
        f"lambda t: (__import__('pathlib').Path({str(marker)!r}).write_text('ran'), t)[1]"
    )
    layers = keras.layers  # type: ignore[attr-defined]
    inner = keras.Sequential(  # type: ignore[attr-defined]
        [keras.Input(shape=(CLASSES,)), layers.Lambda(payload)],  # type: ignore[attr-defined]
        name="inner",
    )
    inputs = keras.Input(shape=SAMPLE_SHAPE)  # type: ignore[attr-defined]
    hidden = layers.Dense(CLASSES)(layers.Flatten()(inputs))
    return keras.Model(inputs, inner(hidden), name="payload")  # type: ignore[attr-defined]


def describe(seeds: Seeds) -> str:
    """The seeds as JSON, for a campaign's record."""
    return json.dumps({k: str(v) for k, v in vars(seeds).items()}, indent=2)
