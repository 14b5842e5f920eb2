"""Small models shaped like the ones users bring, one file per input format, for the matrix.

Built once per test run (``build``), no training, seconds in all:

* ``keras``: a Keras 3 ``.keras`` with two heads (``cls``: 3 classes, ``reg``: 1 value) on a
  ``(None, 8)`` input ``x``.
* ``h5``: a tf-keras ``.h5`` whose middle layer is a custom class, loaded through
  ``--custom-objects`` (``layers``: the file a package ships for it).
* ``savedmodel``: a streaming model as exported for a device: a static batch of 1, a state
  ``h (1, 16)`` in and ``h_out`` out beside the frame ``x (1, 8)`` and the scores ``y``.
* ``tflite``: that SavedModel converted (static batch, state in/out, two outputs).
* ``tflite_dynamic``: the Keras 3 two-head model converted, batch ``-1``.
* ``onnx``: two outputs, batch fixed at 1, opset 13.
* ``onnx_opset11``: a symbolic batch (``N``) at opset 11, as keras2onnx and Paddle2ONNX write.

Each has its data file (``<name>_data``): inputs by name in the model's layout, labels
``y`` (or ``y_<output>`` per output).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from test_custom_objects import LAYER_FILE  # the file a package ships for its layer

SAMPLES = 24
FEATURES, CLASSES, UNITS = 8, 3, 16


# The formats each built file stands for (what `inspect` calls them).
FORMATS = {
    "keras": "keras",
    "h5": "h5",
    "savedmodel": "savedmodel",
    "tflite": "tflite",
    "tflite_dynamic": "tflite",
    "onnx": "onnx",
    "onnx_opset11": "onnx",
}


def build(root: Path) -> dict[str, Path]:
    """Every model, its data and the custom-layer file, written into ``root``."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(SAMPLES, FEATURES)).astype(np.float32)
    h = rng.normal(size=(SAMPLES, UNITS)).astype(np.float32) * 0.1
    labels = rng.integers(0, CLASSES, SAMPLES)
    paths = {**_keras3(root, x, labels), **_h5(root, x, labels), **_state(root, x, h, labels)}
    paths.update(_onnx(root, x, labels))
    return paths


def _keras3(root: Path, x: np.ndarray, labels: np.ndarray) -> dict[str, Path]:
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    inputs = keras.Input((FEATURES,), name="x")
    hidden = keras.layers.Dense(64, activation="relu")(inputs)
    hidden = keras.layers.Dense(64, activation="relu")(hidden)
    cls = keras.layers.Dense(CLASSES, activation="softmax", name="cls")(hidden)
    reg = keras.layers.Dense(1, name="reg")(hidden)
    model = keras.Model(inputs, {"cls": cls, "reg": reg}, name="two_heads")
    model.save(root / "two_heads.keras")
    converted = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    (root / "two_heads.tflite").write_bytes(converted)
    reg_y = model.predict(x, verbose=0)["reg"]
    np.savez(root / "two_heads.npz", x=x, y_cls=labels, y_reg=reg_y)
    return {
        "keras": root / "two_heads.keras",
        "keras_data": root / "two_heads.npz",
        "tflite_dynamic": root / "two_heads.tflite",
        "tflite_dynamic_data": root / "two_heads.npz",
    }


def _h5(root: Path, x: np.ndarray, labels: np.ndarray) -> dict[str, Path]:
    import tf_keras

    (root / "layers.py").write_text(LAYER_FILE)
    namespace: dict = {}
    legacy = LAYER_FILE.replace(
        "import tensorflow as tf\nfrom tensorflow import keras", "import tf_keras as keras"
    )
    exec(compile(legacy, "legacy_layers", "exec"), namespace)
    tf_keras.utils.set_random_seed(0)
    model = tf_keras.Sequential(
        [
            tf_keras.layers.Input((FEATURES,), name="x"),
            tf_keras.layers.Dense(64, activation="relu"),
            namespace["Scale"](0.5),
            tf_keras.layers.Dense(64, activation="relu"),
            tf_keras.layers.Dense(CLASSES, activation="softmax", name="probs"),
        ]
    )
    model.save(root / "custom.h5")
    np.savez(root / "custom.npz", x=x, y=labels)
    return {"h5": root / "custom.h5", "h5_data": root / "custom.npz", "layers": root / "layers.py"}


def _state(root: Path, x: np.ndarray, h: np.ndarray, labels: np.ndarray) -> dict[str, Path]:
    import tensorflow as tf

    rng = np.random.default_rng(1)
    weights = {
        name: tf.constant(rng.normal(size=shape).astype(np.float32) * 0.3)
        for name, shape in (("wx", (FEATURES, UNITS)), ("wh", (UNITS, UNITS)),
                            ("wy", (UNITS, CLASSES)))
    }  # fmt: skip

    class Streaming(tf.Module):
        @tf.function(
            input_signature=[
                tf.TensorSpec([1, FEATURES], tf.float32, name="x"),
                tf.TensorSpec([1, UNITS], tf.float32, name="h"),
            ]
        )
        def serve(self, x, h):
            state = tf.tanh(tf.matmul(x, weights["wx"]) + tf.matmul(h, weights["wh"]))
            return {"y": tf.nn.softmax(tf.matmul(state, weights["wy"])), "h_out": state}

    module = Streaming()
    saved = root / "streaming_savedmodel"
    tf.saved_model.save(module, str(saved), signatures={"serving_default": module.serve})
    tflite = root / "streaming.tflite"
    tflite.write_bytes(tf.lite.TFLiteConverter.from_saved_model(str(saved)).convert())
    np.savez(root / "streaming.npz", x=x, h=h, y_y=labels)
    data = root / "streaming.npz"
    return {"savedmodel": saved, "savedmodel_data": data, "tflite": tflite, "tflite_data": data}


def _onnx(root: Path, x: np.ndarray, labels: np.ndarray) -> dict[str, Path]:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(2)
    hidden = rng.normal(size=(FEATURES, UNITS)).astype(np.float32) * 0.3
    head = rng.normal(size=(UNITS, CLASSES)).astype(np.float32) * 0.3
    paths = {}
    for key, batch, opset in (("onnx", 1, 13), ("onnx_opset11", "N", 11)):
        graph = helper.make_graph(
            [
                helper.make_node("MatMul", ["x", "hidden"], ["pre"]),
                helper.make_node("Relu", ["pre"], ["features"]),
                helper.make_node("MatMul", ["features", "head"], ["logits"]),
                helper.make_node("Softmax", ["logits"], ["probs"], axis=1),
            ],
            key,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, FEATURES])],
            [
                helper.make_tensor_value_info("probs", TensorProto.FLOAT, [batch, CLASSES]),
                helper.make_tensor_value_info("features", TensorProto.FLOAT, [batch, UNITS]),
            ],
            [numpy_helper.from_array(hidden, "hidden"), numpy_helper.from_array(head, "head")],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 7
        onnx.checker.check_model(model)
        paths[key] = root / f"{key}.onnx"
        paths[key].write_bytes(model.SerializeToString())
        paths[f"{key}_data"] = root / f"{key}.npz"
        np.savez(paths[f"{key}_data"], x=x, y_probs=labels)
    return paths
