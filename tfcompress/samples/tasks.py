"""Small models shaped like the ones users ship: two inputs and two heads, and a segmenter.

Real edge models are rarely one-input classifiers: detectors have a class head and a box
head, landmarkers regress points, segmenters predict a mask per pixel. These reference
models, trained in seconds on the bundled digits (:func:`tfcompress.samples.datasets.digits`), give
the tests, examples and benchmarks those shapes with real data behind them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tfcompress._compat.keras import KerasFlavour, keras_module
from tfcompress.data.dataset import Dataset

#: Pixels above this (images scaled to [0, 1]) are ink in :func:`ink_masks`.
INK_THRESHOLD = 0.5


def digit_boxes(images: np.ndarray) -> np.ndarray:
    """The box around each digit's ink: ``(top, left, bottom, right)`` as fractions of the side."""
    ink = images.reshape(len(images), images.shape[1], images.shape[2]) > INK_THRESHOLD
    side = float(images.shape[1])
    boxes = np.zeros((len(images), 4), np.float32)
    for i, mask in enumerate(ink):
        rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
        if rows.size:
            boxes[i] = (rows[0], cols[0], rows[-1] + 1, cols[-1] + 1)
    return boxes / side


def ink_masks(images: np.ndarray) -> np.ndarray:
    """Integer masks ``(N, H, W)``: 1 where a pixel is ink, 0 for background.

    Example:
        >>> ink_masks(np.array([[[[0.9], [0.1]]]])).tolist()
        [[[1, 0]]]
    """
    return (images[..., 0] > INK_THRESHOLD).astype(np.int64)


def two_input_data(dataset: Dataset, *, seed: int = 0) -> Dataset:
    """Digits as a two-input, two-head task: ``image`` seen through a random ``gain``.

    Each image is multiplied by a gain in [0.5, 1.5] that the model also receives as its
    second input; the labels are the digit (``y_cls``) and the ink box of the original
    image (``y_box``).

    Args:
        dataset: Digits with labels, images ``(N, 8, 8, 1)`` in [0, 1].
        seed: Seed of the gains.

    Returns:
        ``x = {"image", "gain"}``, ``y = {"cls", "box"}``.

    Example:
        >>> data = two_input_data(tfcompress.samples.datasets.digits().test)  # doctest: +SKIP
        >>> sorted(data.x), sorted(data.y)  # doctest: +SKIP
        (['gain', 'image'], ['box', 'cls'])
    """
    gain = np.random.default_rng(seed).uniform(0.5, 1.5, (len(dataset), 1)).astype(np.float32)
    image = (dataset.x * gain[:, :, None, None]).astype(np.float32)
    labels = {"cls": np.asarray(dataset.y), "box": digit_boxes(dataset.x)}
    return Dataset({"image": image, "gain": gain}, labels)


def two_head_cnn(
    *,
    input_shape: tuple[int, int, int] = (8, 8, 1),
    num_classes: int = 10,
    flavour: str | KerasFlavour = KerasFlavour.KERAS3,
) -> Any:
    """A detector-shaped model: inputs ``image`` and ``gain``, heads ``cls`` and ``box``.

    Example:
        >>> two_head_cnn().output_names  # doctest: +SKIP
        ['cls', 'box']
    """
    keras = keras_module(KerasFlavour(flavour))
    layers = keras.layers
    image = keras.Input(input_shape, name="image")
    gain = keras.Input((1,), name="gain")
    x = layers.Conv2D(16, 3, padding="same", activation="relu")(image)
    x = layers.Conv2D(32, 3, padding="same", activation="relu")(x)
    x = layers.MaxPooling2D()(x)
    x = layers.Flatten()(x)
    x = layers.Concatenate()([x, gain])
    x = layers.Dense(64, activation="relu")(x)
    cls = layers.Dense(num_classes, activation="softmax", name="cls")(x)
    box = layers.Dense(4, activation="sigmoid", name="box")(x)
    return keras.Model([image, gain], [cls, box], name="two_head")


def ink_segmenter(
    *, input_shape: tuple[int, int, int] = (8, 8, 1), flavour: str | KerasFlavour = "keras3"
) -> Any:
    """A segmenter-shaped model: per-pixel softmax over background and ink, ``(N, H, W, 2)``."""
    keras = keras_module(KerasFlavour(flavour))
    layers = keras.layers
    inputs = keras.Input(input_shape, name="image")
    x = layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
    x = layers.Conv2D(8, 3, padding="same", activation="relu")(x)
    outputs = layers.Conv2D(2, 1, activation="softmax", name="mask")(x)
    return keras.Model(inputs, outputs, name="ink_segmenter")


def train_two_head(model: Any, data: Dataset, *, epochs: int = 8, seed: int = 0) -> Any:
    """Fit the two heads (cross-entropy for ``cls``, MSE for ``box``), seeded and silent.

    Returns:
        The same model, trained.
    """
    keras = keras_module(KerasFlavour.KERAS3)
    keras.utils.set_random_seed(seed)
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=["sparse_categorical_crossentropy", "mse"],
        loss_weights=[1.0, 10.0],
    )
    inputs = [data.x["image"], data.x["gain"]]
    model.fit(inputs, [data.y["cls"], data.y["box"]], epochs=epochs, batch_size=32, verbose=0)
    return model


def train_segmenter(model: Any, images: np.ndarray, *, epochs: int = 5, seed: int = 0) -> Any:
    """Fit the segmenter on :func:`ink_masks` of ``images`` (seeded, silent)."""
    keras = keras_module(KerasFlavour.KERAS3)
    keras.utils.set_random_seed(seed)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy")
    model.fit(images, ink_masks(images), epochs=epochs, batch_size=32, verbose=0)
    return model
