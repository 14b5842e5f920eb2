"""A small reference CNN for the demo, examples, tests and benchmarks, in either Keras flavour."""

from __future__ import annotations

from typing import Any

from tfcompress._compat.keras import KerasFlavour, flavour_of, keras_module
from tfcompress.data.dataset import Dataset


def small_cnn(
    *,
    input_shape: tuple[int, int, int] = (28, 28, 1),
    num_classes: int = 10,
    flavour: str | KerasFlavour = KerasFlavour.KERAS3,
) -> Any:
    """Conv(32)-Pool-Conv(64)-Pool-Dense(128)-Dense(classes): ~225k parameters on MNIST.

    Large enough that weights, not the flatbuffer's graph, dominate the file size, so size
    ratios mean what they say; small enough to train in seconds on two cores.

    Uncompiled; ``flavour`` is ``"keras3"`` or ``"tf_keras"``.
    """
    keras = keras_module(KerasFlavour(flavour))
    layers = keras.layers
    # Named as a fresh process names them, so docs, tests and reports see the same names
    # however many models the process built before (Keras numbers its default names).
    return keras.Sequential(
        [
            keras.Input(shape=input_shape),
            layers.Conv2D(32, 3, activation="relu", name="conv2d"),
            layers.MaxPooling2D(name="max_pooling2d"),
            layers.Conv2D(64, 3, activation="relu", name="conv2d_1"),
            layers.MaxPooling2D(name="max_pooling2d_1"),
            layers.Flatten(name="flatten"),
            layers.Dense(128, activation="relu", name="dense"),
            layers.Dense(num_classes, activation="softmax", name="dense_1"),
        ],
        name="small_cnn",
    )


def residual_cnn(*, flavour: str | KerasFlavour = KerasFlavour.KERAS3) -> Any:
    """A Functional MNIST model with a residual Add, BatchNorm, a DepthwiseConv2D and a PReLU.

    Shaped like the mobile blocks users bring, with one layer (PReLU) that tfmot can neither
    quantize nor prune: the model behind the coverage tests and docs/qat.md's table.
    """
    keras = keras_module(KerasFlavour(flavour))
    layers = keras.layers
    inputs = keras.Input((28, 28, 1))
    x = layers.Conv2D(16, 3, padding="same")(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU()(x)
    x = layers.MaxPooling2D()(x)
    y = layers.DepthwiseConv2D(3, padding="same")(x)
    y = layers.BatchNormalization()(y)
    y = layers.ReLU()(y)
    y = layers.Conv2D(16, 1)(y)
    x = layers.Add()([x, y])
    x = layers.PReLU(shared_axes=[1, 2], name="prelu")(x)
    x = layers.MaxPooling2D()(x)
    x = layers.Flatten()(x)
    outputs = layers.Dense(10, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="residual")


def train_classifier(
    model: Any, train: Dataset, *, epochs: int = 3, batch_size: int = 32, seed: int = 0
) -> Any:
    """Compile with Adam + sparse cross-entropy and fit on ``train`` (seeded, silent).

    Returns:
        The same model, trained.
    """
    keras = keras_module(flavour_of(model) or KerasFlavour.KERAS3)
    keras.utils.set_random_seed(seed)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    model.fit(train.x, train.y, epochs=epochs, batch_size=batch_size, verbose=0)
    return model
