"""Models shaped like the ones that broke compress's promise (issue 18), built in code, tiny.

Each builder trains in seconds on sklearn's real 8x8 digits
(:func:`tfcompress.datasets.digits`) and is shared by ``tests/test_never_worse.py`` and
``benchmarks/never_worse.py``:

* :func:`layer_norm_classifier`: a transformer-style classifier whose LayerNormalization
  makes a NEG op with no int8 kernel (the converter keeps it float by default);
* :func:`three_heads`: a class head and two small-magnitude regression heads (a box and
  landmarks, in units of a hundredth of the image), where int8 loses SNR on the regressions;
* :func:`bn_depthwise_classifier` + :func:`unlike_images`: a BatchNorm-heavy depthwise
  classifier, and images unlike its training set (lower contrast, brighter, noisy) for
  label-free fine-tuning;
* :func:`static_batch_lstm`: a character LSTM whose converter error asks for a static batch;
* :func:`write_custom_layer_h5`: an ``.h5`` with a custom layer, and the ``.py`` defining it;
* :func:`write_weightless_saved_model`: a ``tf.Module`` holding a Keras 3 model, saved with
  ``tf.saved_model.save`` (its variables are not captured).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tfcompress.data import Dataset

#: Regression heads are in units of this fraction of the image side.
SMALL = 0.01


def digits_split(seed: int = 0) -> Any:
    """The digits split every builder trains on."""
    from tfcompress.datasets import digits

    return digits(seed=seed)


def layer_norm_classifier(train: Dataset, *, epochs: int = 8, seed: int = 0) -> Any:
    """Rows of the 8x8 image as 8 tokens -> Dense -> LayerNorm -> MLP -> 10 classes."""
    import keras

    keras.utils.set_random_seed(seed)
    inputs = keras.Input((8, 8, 1), name="image")
    tokens = keras.layers.Reshape((8, 8))(inputs)
    hidden = keras.layers.Dense(64, activation="relu", name="embed")(tokens)
    hidden = keras.layers.LayerNormalization(name="norm")(hidden)
    hidden = keras.layers.Dense(64, activation="relu", name="mix")(hidden)
    hidden = keras.layers.Flatten()(hidden)
    hidden = keras.layers.Dense(96, activation="relu", name="dense")(hidden)
    outputs = keras.layers.Dense(10, activation="softmax", name="cls")(hidden)
    model = keras.Model(inputs, outputs, name="layer_norm_classifier")
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(train.x, train.y, epochs=epochs, batch_size=32, verbose=0)
    return model


def head_targets(images: np.ndarray) -> dict[str, np.ndarray]:
    """Small-magnitude regression targets: box offsets and ink centroids, around 0."""
    from tfcompress.models.reference_tasks import digit_boxes

    boxes = digit_boxes(images)
    ink = images[..., 0]
    total = ink.sum(axis=(1, 2)) + 1e-6
    grid = np.arange(ink.shape[1], dtype=np.float32) / ink.shape[1]
    rows = (ink.sum(axis=2) * grid).sum(axis=1) / total
    cols = (ink.sum(axis=1) * grid).sum(axis=1) / total
    landmarks = np.stack([rows, cols, rows - cols, rows + cols - 1.0], axis=1)
    return {
        "box": ((boxes - 0.5) * SMALL).astype(np.float32),
        "landmarks": ((landmarks - landmarks.mean(axis=0)) * SMALL).astype(np.float32),
    }


def three_heads(train: Dataset, *, epochs: int = 10, seed: int = 0) -> Any:
    """A face-network-shaped model: a shared trunk, heads ``cls``, ``box``, ``landmarks``."""
    import keras

    keras.utils.set_random_seed(seed)
    inputs = keras.Input((8, 8, 1), name="image")
    trunk = keras.layers.Conv2D(32, 3, padding="same", activation="relu", name="conv1")(inputs)
    trunk = keras.layers.Conv2D(32, 3, padding="same", activation="relu", name="conv2")(trunk)
    trunk = keras.layers.Flatten()(trunk)
    trunk = keras.layers.Dense(128, activation="relu", name="shared")(trunk)
    cls = keras.layers.Dense(10, activation="softmax", name="cls")(trunk)
    box = keras.layers.Dense(64, activation="relu", name="box_hidden")(trunk)
    box = keras.layers.Dense(4, name="box")(box)
    points = keras.layers.Dense(64, activation="relu", name="landmarks_hidden")(trunk)
    points = keras.layers.Dense(4, name="landmarks")(points)
    model = keras.Model(inputs, {"cls": cls, "box": box, "landmarks": points}, name="three_heads")
    model.compile(
        "adam",
        loss={"cls": "sparse_categorical_crossentropy", "box": "mse", "landmarks": "mse"},
        loss_weights={"cls": 1.0, "box": 1 / SMALL**2, "landmarks": 1 / SMALL**2},
    )
    targets = {"cls": train.y, **head_targets(train.x)}
    model.fit(train.x, targets, epochs=epochs, batch_size=32, verbose=0)
    return model
