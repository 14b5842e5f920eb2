"""Small models for gates: a Dense net trained in seconds on sklearn's 8x8 digits.

The tests (session fixtures in ``tests/conftest.py``) and ``benchmarks/doc_examples.py`` save
them as files, so pytester runs and the CLI get paths:
``reference.keras``, ``int8.tflite`` (a faithful candidate), ``damaged.tflite`` (float
weights perturbed, then converted: loses tens of points), ``wide.keras`` (12 outputs instead
of 10), ``test.npz`` (labelled) and ``unlabelled.npz``.

:func:`build_two_head_models` adds a detector-shaped model (inputs ``image`` and ``gain``, heads
``cls`` and ``box``; :mod:`tfcompress.samples.tasks`) and its int8 artifact, with
test frames without labels (``two_head_frames.npz``) and with them
(``two_head_test.npz``: ``y_cls``, ``y_box``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def build_gate_models(root: Path) -> dict[str, Path]:
    """Train, damage, convert and save everything into ``root``; return the paths."""
    import keras

    from tfcompress.bench.accuracy import evaluate
    from tfcompress.quantization.ptq import quantize
    from tfcompress.samples.datasets import digits

    split = digits(seed=0)
    keras.utils.set_random_seed(0)
    model = _dense_net(10, "digits_dense")
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(split.train.x, split.train.y, epochs=15, batch_size=32, verbose=0)

    damaged = _dense_net(10, "digits_damaged")
    rng = np.random.default_rng(1)
    damaged.set_weights(
        [w + rng.normal(0.0, 0.2, w.shape).astype(w.dtype) for w in model.get_weights()]
    )

    paths = {
        "reference": root / "reference.keras",
        "int8": root / "int8.tflite",
        "damaged": root / "damaged.tflite",
        "wide": root / "wide.keras",
        "test": root / "test.npz",
        "unlabelled": root / "unlabelled.npz",
    }
    model.save(paths["reference"])
    _dense_net(12, "wide").save(paths["wide"])
    quantize(model, recipe="int8", representative_data=split.train).save(paths["int8"])
    quantize(damaged, recipe="float32").save(paths["damaged"])
    np.savez(paths["test"], x=split.test.x, y=split.test.y)
    np.savez(paths["unlabelled"], x=split.test.x)
    # Run a .tflite once so LiteRT is imported here, not first inside an in-process pytester
    # run (which would unload it again afterwards).
    evaluate(paths["int8"], split.test.take(8))
    return paths


def build_two_head_models(root: Path) -> dict[str, Path]:
    """Train the two-head CNN 3 epochs on digits, quantize it to int8, save the test frames."""
    from tfcompress.quantization.ptq import quantize
    from tfcompress.samples.datasets import digits
    from tfcompress.samples.tasks import train_two_head, two_head_cnn, two_input_data

    split = digits(seed=0)
    train, test = two_input_data(split.train), two_input_data(split.test, seed=1)
    model = train_two_head(two_head_cnn(), train, epochs=3)
    paths = {
        "two_head": root / "two_head.keras",
        "two_head_int8": root / "two_head_int8.tflite",
        "two_head_frames": root / "two_head_frames.npz",
        "two_head_test": root / "two_head_test.npz",
    }
    model.save(paths["two_head"])
    int8 = quantize(model, recipe="int8", representative_data=train)
    int8.save(paths["two_head_int8"])
    np.savez(paths["two_head_frames"], **test.x)
    labels = {f"y_{name}": array for name, array in test.y.items()}
    np.savez(paths["two_head_test"], **test.x, **labels)
    return paths


def _dense_net(classes: int, name: str) -> Any:
    import keras

    return keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            keras.layers.Flatten(),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(classes, activation="softmax"),
        ],
        name=name,
    )
