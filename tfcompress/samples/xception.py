"""The mini-Xception facial-emotion classifier, as users ship it, for QAT regression tests.

oarriaga/face_classification's ``mini_XCEPTION`` (FER-2013, 48x48 grey faces, 7 emotions) is
a common first model on edge devices and a known stumbling block for tfmot's QAT transform:
its residual modules add a strided 1x1 convolution to a max-pooled separable-convolution
branch. Random weights are enough for the structure; nothing here downloads anything.
"""

from __future__ import annotations

from typing import Any

from tfcompress._compat.keras import KerasFlavour, keras_module

#: Filters of the four residual modules.
MODULE_FILTERS = (16, 32, 64, 128)
#: FER-2013's seven emotions.
EMOTIONS = 7


def mini_xception(
    *,
    input_shape: tuple[int, int, int] = (48, 48, 1),
    num_classes: int = EMOTIONS,
    flavour: str | KerasFlavour = KerasFlavour.KERAS3,
) -> Any:
    """The ``mini_XCEPTION`` of oarriaga/face_classification, layer for layer (no regularizer).

    Base: ``Conv2D(8, 3, use_bias=False)`` + BN + ReLU, twice. Then four residual modules
    with ``n`` = 16, 32, 64, 128: residual ``Conv2D(n, 1, strides=2, padding="same")`` + BN;
    main ``SeparableConv2D(n, 3, padding="same")`` + BN + ReLU, ``SeparableConv2D(n, 3,
    padding="same")`` + BN, ``MaxPooling2D(3, strides=2, padding="same")``; ``Add``. Head:
    ``Conv2D(classes, 3, padding="same")``, ``GlobalAveragePooling2D``, ``Softmax``.

    Args:
        input_shape: One face (48x48 grey in the original).
        num_classes: Emotions (7 for FER-2013).
        flavour: ``"keras3"`` or ``"tf_keras"``.

    Returns:
        An uncompiled Functional model named ``mini_xception`` with random weights.

    Example:
        >>> model = mini_xception()  # doctest: +SKIP
        >>> model.output_shape  # doctest: +SKIP
        (None, 7)
    """
    keras = keras_module(KerasFlavour(flavour))
    layers = keras.layers
    inputs = keras.Input(input_shape, name="face")
    x = inputs
    for _ in range(2):
        x = layers.Conv2D(8, 3, use_bias=False)(x)
        x = layers.BatchNormalization()(x)
        x = layers.Activation("relu")(x)
    for filters in MODULE_FILTERS:
        residual = layers.Conv2D(filters, 1, strides=2, padding="same", use_bias=False)(x)
        residual = layers.BatchNormalization()(residual)
        x = layers.SeparableConv2D(filters, 3, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization()(x)
        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(filters, 3, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization()(x)
        x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
        x = layers.Add()([x, residual])
    x = layers.Conv2D(num_classes, 3, padding="same")(x)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Activation("softmax", name="predictions")(x)
    return keras.Model(inputs, outputs, name="mini_xception")
