"""Models where the converter's plain int8 is weak, shared by tests and benchmarks/ptq_methods.py.

Each is shaped like a real case of issue 22, small enough to train in seconds on the
scikit-learn digits (8x8, bundled, nothing downloaded):

* :func:`depthwise_classifier`: a MobileNet-style depthwise-separable classifier with
  BatchNorm and ReLU6 whose linear bottleneck has a few channels tens of times wider than
  the rest (:func:`widen_channels`), as BatchNorm folding leaves real depthwise nets;
* :func:`two_head_regressor`: a shared trunk with a class head and a small-magnitude box
  regression head, whose shared features also have a few channels tens of times wider than
  the rest (:func:`widen_dense_channels`);
* :func:`normalized_classifier`: spectrogram-like features whose bins differ in offset and
  scale, with a ``Normalization`` front end.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tfcompress._compat.keras import KerasFlavour, flavour_of, keras_module
from tfcompress.samples.datasets import Split, digits
from tfcompress.samples.tasks import digit_boxes

#: Channels of the bottleneck made wide, and by how much.
WIDE_CHANNELS = (1, 5, 9)
WIDE_FACTOR = 40.0
#: How much wider the shared features' most active channels are made in the two-head model.
SHARED_FACTOR = 2.0
#: The box head predicts offsets from the mean box, scaled down like anchor deltas.
BOX_SCALE = 0.1


def digits_split(seed: int = 0) -> Split:
    """The scikit-learn digits, 1,347 train / 450 test, stratified."""
    return digits(test_fraction=0.25, seed=seed)


def depthwise_classifier(*, flavour: str = "keras3") -> Any:
    """Conv-BN-ReLU6, two depthwise-separable blocks with linear bottlenecks, GAP, Dense."""
    keras = keras_module(KerasFlavour(flavour))
    layers = keras.layers
    inputs = keras.Input((8, 8, 1), name="image")
    x = layers.Conv2D(16, 3, padding="same", use_bias=False)(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU(6.0)(x)
    x = layers.DepthwiseConv2D(3, padding="same", use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU(6.0)(x)
    x = layers.Conv2D(24, 1, use_bias=False, name="bottleneck")(x)
    x = layers.BatchNormalization(name="bottleneck_bn")(x)  # linear: no activation
    x = layers.Conv2D(48, 1, use_bias=False, name="expand")(x)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU(6.0)(x)
    x = layers.DepthwiseConv2D(3, strides=2, padding="same", use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU(6.0)(x)
    x = layers.Conv2D(32, 1, use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(10, activation="softmax", name="digit")(x)
    return keras.Model(inputs, outputs, name="depthwise_classifier")


def widen_channels(
    model: Any,
    *,
    batchnorm: str = "bottleneck_bn",
    consumer: str = "expand",
    channels: tuple[int, ...] = WIDE_CHANNELS,
    factor: float = WIDE_FACTOR,
) -> Any:
    """Make a few channels of a linear BatchNorm output ``factor`` times wider, same function.

    The BatchNorm's gamma and beta of ``channels`` are multiplied by ``factor`` and the
    consumer's weights reading them divided by it: the float model computes the same thing
    (to float rounding), but that tensor's int8 range is now set by a few channels, as in
    real depthwise networks after BatchNorm folding.
    """
    bn = model.get_layer(batchnorm)
    gamma, beta, mean, variance = bn.get_weights()
    index = list(channels)
    gamma[index] *= factor
    beta[index] *= factor
    bn.set_weights([gamma, beta, mean, variance])
    conv = model.get_layer(consumer)
    values = conv.get_weights()
    values[0][:, :, index, :] /= factor
    conv.set_weights(values)
    return model


def trained_depthwise_classifier(split: Split, *, flavour: str = "keras3", epochs: int = 30) -> Any:
    """:func:`depthwise_classifier` trained on the digits, then :func:`widen_channels`."""
    _seed(flavour)
    model = depthwise_classifier(flavour=flavour)
    _fit(model, split.train.x, split.train.y, "sparse_categorical_crossentropy", epochs, 3e-3)
    return widen_channels(model)


def box_targets(images: np.ndarray) -> np.ndarray:
    """Small box offsets: the ink box minus the mean box of the digits, times :data:`BOX_SCALE`."""
    boxes = digit_boxes(images)
    return ((boxes - np.array([0.0, 0.1, 1.0, 0.85], np.float32)) * BOX_SCALE).astype(np.float32)


def two_head_regressor(*, flavour: str = "keras3") -> Any:
    """A shared trunk (conv, conv, dense) with heads ``digit`` (softmax) and ``box`` (linear)."""
    keras = keras_module(KerasFlavour(flavour))
    layers = keras.layers
    inputs = keras.Input((8, 8, 1), name="image")
    x = layers.Conv2D(16, 3, padding="same", activation="relu")(inputs)
    x = layers.Conv2D(32, 3, padding="same", activation="relu")(x)
    x = layers.MaxPooling2D()(x)
    x = layers.Flatten()(x)
    x = layers.Dense(64, activation="relu", name="shared")(x)
    digit = layers.Dense(10, activation="softmax", name="digit")(x)
    box = layers.Dense(4, name="box")(x)
    return keras.Model(inputs, [digit, box], name="two_head_regressor")


def trained_two_head_regressor(split: Split, *, flavour: str = "keras3", epochs: int = 30) -> Any:
    """:func:`two_head_regressor` fitted to the digit and :func:`box_targets`, channels widened.

    Its most active shared channels are then widened (:func:`widen_dense_channels`).
    """
    _seed(flavour)
    model = two_head_regressor(flavour=flavour)
    labels = {"digit": split.train.y, "box": box_targets(split.train.x)}
    _fit(
        model,
        split.train.x,
        labels,
        {"digit": "sparse_categorical_crossentropy", "box": "mse"},
        epochs,
        3e-3,
        loss_weights={"digit": 1.0, "box": 100.0},
    )
    return widen_dense_channels(model, split.train.x)


def widen_dense_channels(
    model: Any,
    x: np.ndarray,
    *,
    layer: str = "shared",
    consumers: tuple[str, ...] = ("digit", "box"),
    count: int = len(WIDE_CHANNELS),
    factor: float = SHARED_FACTOR,
) -> Any:
    """Make the ``count`` most active channels of a ReLU Dense layer ``factor`` times wider.

    The layer's weights and bias of those channels are multiplied by ``factor`` (ReLU commutes
    with it) and every consumer's weights reading them divided by it: the same function, but
    the shared tensor's int8 range is now set by a few channels, and the box head, whose
    signal is small, reads the others.
    """
    keras = keras_module(flavour_of(model) or KerasFlavour.KERAS3)
    source = model.get_layer(layer)
    probe = keras.Model(model.inputs[0], source.output)
    activity = np.asarray(probe(x, training=False)).mean(axis=0)
    index = list(np.argsort(activity)[::-1][:count])
    kernel, bias = source.get_weights()
    kernel[:, index] *= factor
    bias[index] *= factor
    source.set_weights([kernel, bias])
    for name in consumers:
        weights = model.get_layer(name).get_weights()
        weights[0][index, :] /= factor
        model.get_layer(name).set_weights(weights)
    return model


def spectral_features(images: np.ndarray, seed: int = 0) -> np.ndarray:
    """Digits as ``(N, 8, 8)`` spectrogram-like frames, one offset and scale per bin.

    Each of the 8 bins (columns) has its own offset (tens of units) and scale, as log-mel
    bins do.
    """
    rng = np.random.default_rng(seed)
    offsets = rng.uniform(-40.0, -20.0, 8).astype(np.float32)
    scales = rng.uniform(5.0, 20.0, 8).astype(np.float32)
    return (images[..., 0] * scales + offsets).astype(np.float32)


def normalized_classifier(features: np.ndarray, *, flavour: str = "keras3") -> Any:
    """``Normalization`` (per bin, adapted to ``features``) then a small conv classifier."""
    keras = keras_module(KerasFlavour(flavour))
    layers = keras.layers
    inputs = keras.Input((8, 8), name="frames")
    norm = layers.Normalization(axis=-1, name="normalize")
    norm.adapt(features)
    x = norm(inputs)
    x = layers.Reshape((8, 8, 1))(x)
    x = layers.Conv2D(16, 3, padding="same", use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU()(x)
    x = layers.Conv2D(32, 3, padding="same", activation="relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(10, activation="softmax", name="digit")(x)
    return keras.Model(inputs, outputs, name="normalized_classifier")


def trained_normalized_classifier(
    split: Split, *, flavour: str = "keras3", epochs: int = 30
) -> Any:
    """:func:`normalized_classifier` trained on :func:`spectral_features` of the digits."""
    features = spectral_features(split.train.x)
    _seed(flavour)
    model = normalized_classifier(features, flavour=flavour)
    _fit(model, features, split.train.y, "sparse_categorical_crossentropy", epochs, 3e-3)
    return model


def _seed(flavour: str) -> None:
    """Seed weight initialisation and training (Keras seeds both from one call)."""
    keras_module(KerasFlavour(flavour)).utils.set_random_seed(0)


def _fit(
    model: Any, x: Any, y: Any, loss: Any, epochs: int, rate: float, **compile_options: Any
) -> None:
    keras = keras_module(flavour_of(model) or KerasFlavour.KERAS3)
    model.compile(optimizer=keras.optimizers.Adam(rate), loss=loss, **compile_options)
    model.fit(x, y, epochs=epochs, batch_size=32, verbose=0)
