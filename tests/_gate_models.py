"""Small models for the gate tests: a Dense net trained in seconds on sklearn's 8x8 digits.

Saved once per test module as files (so pytester runs and the CLI get paths):
``reference.keras``, ``int8.tflite`` (a faithful candidate), ``damaged.tflite`` (float
weights perturbed, then converted: loses tens of points), ``wide.keras`` (12 outputs instead
of 10), ``test.npz`` (labelled) and ``unlabelled.npz``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

_BUILT: dict[str, Path] = {}


def gate_models(tmp_path_factory: Any) -> dict[str, Path]:
    """The files below, built once per test process (shared by the gate test modules)."""
    if not _BUILT:
        _BUILT.update(build_gate_models(tmp_path_factory.mktemp("gate_models")))
    return dict(_BUILT)


def build_gate_models(root: Path) -> dict[str, Path]:
    """Train, damage, convert and save everything into ``root``; return the paths."""
    import keras

    import tfcompress
    from tfcompress.datasets import digits

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
    tfcompress.quantize(model, recipe="int8", representative_data=split.train).save(paths["int8"])
    tfcompress.quantize(damaged, recipe="float32").save(paths["damaged"])
    np.savez(paths["test"], x=split.test.x, y=split.test.y)
    np.savez(paths["unlabelled"], x=split.test.x)
    # Run a .tflite once so LiteRT is imported here, not first inside an in-process pytester
    # run (which would unload it again afterwards).
    tfcompress.evaluate(paths["int8"], split.test.take(8))
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
