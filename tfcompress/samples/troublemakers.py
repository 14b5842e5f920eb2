"""Models shaped like the ones that broke compress's promise (issue 18), built in code, tiny.

Each builder trains in seconds on sklearn's real 8x8 digits
(:func:`tfcompress.samples.digits`) and is shared by ``tests/test_troublemaker_models.py`` and
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
#: Loss weight of the regression heads: their errors are in hundredths of the image, so the
#: weight brings them to the class loss's scale (a larger one leaves the class head untrained).
REGRESSION_WEIGHT = 0.1 / SMALL**2


def digits_split(seed: int = 0) -> Any:
    """The digits split every builder trains on."""
    from tfcompress.samples.datasets import digits

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
    from tfcompress.samples.tasks import digit_boxes

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
    """A face-network-shaped model: a conv trunk, heads ``cls``, ``box``, ``landmarks``.

    The box head has its own large Dense layer on the spatial features (as detection heads
    often do): keeping it float costs most of the float32 file.
    """
    import keras

    keras.utils.set_random_seed(seed)
    inputs = keras.Input((8, 8, 1), name="image")
    trunk = keras.layers.Conv2D(32, 3, padding="same", activation="relu", name="conv1")(inputs)
    trunk = keras.layers.Conv2D(32, 3, padding="same", activation="relu", name="conv2")(trunk)
    features = keras.layers.Flatten()(trunk)
    trunk = keras.layers.Dense(64, activation="relu", name="shared")(features)
    cls = keras.layers.Dense(10, activation="softmax", name="cls")(trunk)
    # The box head reads the spatial features itself: the model's largest layer.
    box = keras.layers.Dense(128, activation="relu", name="box_hidden")(features)
    box = keras.layers.Dense(4, name="box")(box)
    points = keras.layers.Dense(64, activation="relu", name="landmarks_hidden")(trunk)
    points = keras.layers.Dense(4, name="landmarks")(points)
    model = keras.Model(inputs, {"cls": cls, "box": box, "landmarks": points}, name="three_heads")
    model.compile(
        "adam",
        loss={"cls": "sparse_categorical_crossentropy", "box": "mse", "landmarks": "mse"},
        loss_weights={"cls": 1.0, "box": REGRESSION_WEIGHT, "landmarks": REGRESSION_WEIGHT},
    )
    targets = {"cls": train.y, **head_targets(train.x)}
    model.fit(train.x, targets, epochs=epochs, batch_size=32, verbose=0)
    return model


def bn_depthwise_classifier(train: Dataset, *, epochs: int = 12, seed: int = 0) -> Any:
    """A MobileNet-shaped classifier: conv, depthwise-separable blocks, BatchNorm after each."""
    import keras

    keras.utils.set_random_seed(seed)
    layers = keras.layers
    inputs = keras.Input((8, 8, 1), name="image")
    hidden = layers.Conv2D(16, 3, padding="same", use_bias=False, name="stem")(inputs)
    hidden = layers.ReLU()(layers.BatchNormalization(name="stem_bn")(hidden))
    for index, filters in enumerate((32, 48)):
        hidden = layers.DepthwiseConv2D(3, padding="same", use_bias=False, name=f"dw{index}")(
            hidden
        )
        hidden = layers.ReLU()(layers.BatchNormalization(name=f"dw{index}_bn")(hidden))
        hidden = layers.Conv2D(filters, 1, use_bias=False, name=f"pw{index}")(hidden)
        hidden = layers.ReLU()(layers.BatchNormalization(name=f"pw{index}_bn")(hidden))
    hidden = layers.GlobalAveragePooling2D()(hidden)
    outputs = layers.Dense(10, activation="softmax", name="cls")(hidden)
    model = keras.Model(inputs, outputs, name="bn_depthwise")
    model.compile(keras.optimizers.Adam(3e-3), "sparse_categorical_crossentropy")
    model.fit(train.x, train.y, epochs=epochs, batch_size=32, verbose=0)
    return model


def unlike_images(images: np.ndarray, *, seed: int = 0) -> np.ndarray:
    """The same digits as a user's camera might give them: low contrast, bright, noisy."""
    rng = np.random.default_rng(seed)
    shifted = 0.35 + 0.4 * images + rng.normal(0.0, 0.08, images.shape)
    return np.clip(shifted, 0.0, 1.0).astype(np.float32)


def static_batch_lstm(*, seed: int = 0) -> Any:
    """A character LSTM (tokens -> embedding -> LSTM -> next-token probabilities).

    Keras 3's LSTM traces to a TensorList loop that the converter can lower only with a
    static batch: ``'tf.TensorListReserve' op requires element_shape to be static``.
    """
    import keras

    keras.utils.set_random_seed(seed)
    inputs = keras.Input((20,), dtype="int32", name="chars")
    hidden = keras.layers.Embedding(30, 16)(inputs)
    hidden = keras.layers.LSTM(32, return_sequences=True)(hidden)
    outputs = keras.layers.Dense(30, activation="softmax", name="next")(hidden)
    return keras.Model(inputs, outputs, name="char_lstm")


CUSTOM_LAYER_SOURCE = '''\
import keras


class Scale(keras.layers.Layer):
    """Multiplies its input by a constant: a custom layer Keras cannot load by name."""

    def __init__(self, factor=2.0, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def call(self, inputs):
        return inputs * self.factor

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}
'''


def write_custom_layer_h5(folder: Path) -> tuple[Path, Path]:
    """Save a model with a custom layer as ``.h5``; return it and the ``.py`` defining the layer."""
    import importlib.util

    import keras

    module_path = folder / "custom_layers.py"
    module_path.write_text(CUSTOM_LAYER_SOURCE)
    spec = importlib.util.spec_from_file_location("never_worse_custom_layers", module_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8,))
    outputs = keras.layers.Dense(3)(module.Scale()(keras.layers.Dense(16)(inputs)))
    path = folder / "custom.h5"
    keras.Model(inputs, outputs).save(path)
    return path, module_path


def write_weightless_saved_model(path: Path) -> Path:
    """A ``tf.Module`` holding a Keras 3 model, saved with ``tf.saved_model.save``.

    The module does not track the Keras 3 model's variables, so the serving function reads
    variables the SavedModel does not restore: its conversion has no weights.
    """
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    inputs = keras.Input((16,))
    model = keras.Model(inputs, keras.layers.Dense(4)(keras.layers.Dense(64)(inputs)))

    class Wrapper(tf.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        @tf.function(input_signature=[tf.TensorSpec((None, 16), tf.float32)])
        def serve(self, x: Any) -> dict[str, Any]:
            return {"out": self.inner(x)}

    wrapper = Wrapper(model)
    tf.saved_model.save(wrapper, str(path), signatures={"serving_default": wrapper.serve})
    return path
