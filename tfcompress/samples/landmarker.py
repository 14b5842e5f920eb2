"""A float ``.tflite`` shaped like the ones vendors ship (MediaPipe's landmark models).

A MediaPipe landmark model has one image input and several outputs: the landmarks
(regressed coordinates), a presence score (sigmoid) and often a class head; and its file is
not what today's converter writes: no signature, op codes only in the old 8-bit
``deprecated_builtin_code`` field, weights stored as float16 behind DEQUANTIZE.
:func:`landmark_model` trains such a model in seconds on the bundled digits (landmarks:
the four corners of the digit's ink box; presence: the digit is even; classes: the digit)
and :func:`shipped_tflite` writes it as those files are written, one quirk at a time or
all together.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tfcompress.data.dataset import Dataset

#: The quirks :func:`shipped_tflite` can give a file; ``mediapipe`` has all three.
VARIANTS = ("float", "no_signature", "float16", "old_opcodes", "mediapipe")
_PLACEHOLDER_FOR_GREATER_OP_CODES = 127


def landmark_data(dataset: Dataset) -> Dataset:
    """Digits as a landmark task: ``image`` (16x16), ``landmarks``, ``presence``, ``classes``."""
    from tfcompress.samples.tasks import digit_boxes

    images = np.repeat(np.repeat(dataset.x, 2, axis=1), 2, axis=2).astype(np.float32)
    top, left, bottom, right = digit_boxes(dataset.x).T
    corners = np.stack([top, left, top, right, bottom, left, bottom, right], axis=1)
    labels = np.asarray(dataset.y)
    return Dataset(
        images,
        {
            "landmarks": corners.astype(np.float32),
            "presence": (labels % 2 == 0).astype(np.float32)[:, None],
            "classes": labels,
        },
    )


def landmark_model(*, epochs: int = 12, seed: int = 0) -> tuple[Any, tuple[Dataset, Dataset]]:
    """A three-output landmark model trained on the digits, with its train and test data."""
    import keras

    from tfcompress.samples.datasets import digits

    keras.utils.set_random_seed(seed)
    split = digits(seed=seed)
    train, test = landmark_data(split.train), landmark_data(split.test)
    layers = keras.layers
    image = keras.Input((16, 16, 1), name="image")
    x = layers.Conv2D(16, 3, padding="same", activation="relu", name="stem")(image)
    x = layers.DepthwiseConv2D(3, strides=2, padding="same", activation="relu", name="dw1")(x)
    x = layers.Conv2D(32, 1, activation="relu", name="pw1")(x)
    x = layers.DepthwiseConv2D(3, strides=2, padding="same", activation="relu", name="dw2")(x)
    x = layers.Conv2D(32, 1, activation="relu", name="pw2")(x)
    x = layers.Flatten(name="flatten")(x)
    x = layers.Dense(64, activation="relu", name="neck")(x)
    outputs = {
        "landmarks": layers.Dense(8, name="landmarks")(x),
        "presence": layers.Dense(1, activation="sigmoid", name="presence")(x),
        "classes": layers.Dense(10, activation="softmax", name="classes")(x),
    }
    model = keras.Model(image, outputs, name="landmarker")
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss={
            "landmarks": "mse",
            "presence": "binary_crossentropy",
            "classes": "sparse_categorical_crossentropy",
        },
    )
    model.fit(train.x, train.y, epochs=epochs, batch_size=64, verbose=0)
    return model, (train, test)


def shipped_variants(model: Any) -> dict[str, bytes]:
    """Every variant of :func:`shipped_tflite`, from two conversions (float32 and float16)."""
    from tfcompress.quantization.ptq import quantize

    float32 = quantize(model, recipe="float32").model_content
    float16 = quantize(model, recipe="float16").model_content
    return {
        variant: _with_quirks(float16 if variant in ("float16", "mediapipe") else float32, variant)
        for variant in VARIANTS
    }


def shipped_tflite(model: Any, variant: str = "mediapipe") -> bytes:
    """``model`` as a float ``.tflite`` with the quirks of a shipped file.

    Args:
        model: A Keras model.
        variant: ``float`` (today's converter), ``no_signature``, ``float16`` (weights
            stored float16 behind DEQUANTIZE), ``old_opcodes`` (op codes only in
            ``deprecated_builtin_code``) or ``mediapipe`` (all three).

    Raises:
        ValueError: An unknown variant.
    """
    from tfcompress.quantization.ptq import quantize

    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    recipe = "float16" if variant in ("float16", "mediapipe") else "float32"
    return _with_quirks(quantize(model, recipe=recipe).model_content, variant)


def _with_quirks(content: bytes, variant: str) -> bytes:
    from tfcompress._compat.litert import flatbuffer_utils

    if variant in ("float", "float16"):
        return content
    utils = flatbuffer_utils()
    parsed = utils.read_model_from_bytearray(bytearray(content))
    if variant in ("no_signature", "mediapipe"):
        parsed.signatureDefs = []
    if variant in ("old_opcodes", "mediapipe"):
        for code in parsed.operatorCodes:
            real = max(int(code.builtinCode), int(code.deprecatedBuiltinCode))
            if real < _PLACEHOLDER_FOR_GREATER_OP_CODES:  # as written before the field grew
                code.deprecatedBuiltinCode, code.builtinCode = real, 0
    return bytes(utils.convert_object_to_bytearray(parsed))
