"""MTCNN O-Net-shaped models and data, built in code, trained in seconds on the real digits.

MTCNN's O-Net (48x48x3 faces) is conv + PReLU blocks, a Dense 256 + PReLU, and three heads: a
2-class face score (softmax), 4 box offsets and 10 landmark coordinates. Its PRELU ops are why
the converter's int8 runs slower than float32 on some CPUs (issue 39); these stand-ins keep the
shapes and the op mix, so per-op precision is tested and benchmarked on them:

* :func:`onet`: the structure, layer for layer (random weights);
* :func:`onet_data`: the sklearn digits upscaled to 48x48x3, with a 2-class score (digit
  below 5), the ink box and five ink centroids (10 numbers) as targets;
* :func:`trained_onet`: :func:`onet` trained briefly on that.

Example:
    >>> model = trained_onet(onet_data(digits().train), epochs=1)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tfcompress.data import Dataset

#: O-Net's input side.
SIDE = 48


def onet(*, seed: int = 0) -> Any:
    """O-Net: conv 32/64/64/128 with PReLU and max pooling, Dense 256 + PReLU, three heads.

    The heads are named ``cls`` (2-class softmax), ``box`` (4) and ``landmarks`` (10), as
    MTCNN's ports name them.
    """
    from tfcompress._compat.keras import KerasFlavour, keras_module

    keras = keras_module(KerasFlavour.KERAS3)
    keras.utils.set_random_seed(seed)
    layers = keras.layers
    inputs = keras.Input((SIDE, SIDE, 3), name="image")
    x = inputs
    blocks = ((32, 3, (3, 2, "same")), (64, 3, (3, 2, "valid")), (64, 3, (2, 2, "valid")))
    for index, (filters, kernel, pool) in enumerate((*blocks, (128, 2, None))):
        x = layers.Conv2D(filters, kernel, name=f"conv{index + 1}")(x)
        x = layers.PReLU(shared_axes=[1, 2], name=f"prelu{index + 1}")(x)
        if pool is not None:
            x = layers.MaxPooling2D(pool[0], pool[1], padding=pool[2])(x)
    x = layers.Flatten()(x)
    x = layers.PReLU(name="prelu5")(layers.Dense(256, name="fc")(x))
    outputs = {
        "cls": layers.Dense(2, activation="softmax", name="cls")(x),
        "box": layers.Dense(4, name="box")(x),
        "landmarks": layers.Dense(10, name="landmarks")(x),
    }
    return keras.Model(inputs, outputs, name="onet")


def onet_data(digits: Dataset) -> Dataset:
    """Digits as O-Net inputs (48x48, three equal channels) with its three heads' targets.

    Targets: ``cls`` the digit is below 5; ``box`` the ink box (:func:`digit_boxes`);
    ``landmarks`` the ink centroid of the whole image and of its four quadrants (row, col).
    """
    from tfcompress.samples.tasks import digit_boxes

    images = np.asarray(digits.x, np.float32)
    scale = SIDE // images.shape[1]
    big = np.repeat(np.repeat(images, scale, axis=1), scale, axis=2)
    ink = images[..., 0]
    half = ink.shape[1] // 2
    points = []
    for rows, cols in ((slice(None), slice(None)), *[
        (slice(r, r + half), slice(c, c + half)) for r in (0, half) for c in (0, half)
    ]):  # fmt: skip
        part = ink[:, rows, cols]
        total = part.sum(axis=(1, 2)) + 1e-6
        grid = np.arange(part.shape[1], dtype=np.float32) / ink.shape[1]
        points += [(part.sum(axis=2) * grid).sum(axis=1) / total,
                   (part.sum(axis=1) * grid).sum(axis=1) / total]  # fmt: skip
    labels = np.asarray(digits.y)
    targets = {
        "cls": (labels < 5).astype(np.int64),
        "box": digit_boxes(images),
        "landmarks": np.stack(points, axis=1).astype(np.float32),
    }
    return Dataset(np.repeat(big, 3, axis=-1), targets)


def trained_onet(data: Dataset, *, epochs: int = 2, seed: int = 0) -> Any:
    """:func:`onet` trained on :func:`onet_data` (class loss plus both regressions)."""
    model = onet(seed=seed)
    model.compile(
        "adam",
        loss={"cls": "sparse_categorical_crossentropy", "box": "mse", "landmarks": "mse"},
    )
    model.fit(data.x, data.y, epochs=epochs, batch_size=32, verbose=0)
    return model
