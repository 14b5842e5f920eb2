"""Models shaped like the ones that ship to devices, built in code, tiny.

* ``vad``: a streaming voice-activity model as Silero's is exported: inputs ``input (N, ?)``
  (audio of any length), ``sr ()`` (the sample rate, a scalar) and ``h (2, N, 16)`` (the
  state: layers, batch, units); outputs ``output (N, 1)`` and ``hn (2, N, 16)``. As a plain
  SavedModel, a ``.tflite`` converted from it, and an ``.onnx`` built node by node with the
  same weights (what ``torch.onnx.export`` gives for such a model).
* ``rnn``: an LSTM classifier exported at a static batch of 1 (``frames (1, 10, 8)``), as
  a plain SavedModel and the ``.tflite`` (a fused ``UNIDIRECTIONAL_SEQUENCE_LSTM``).
* ``norm``: an audio front end that normalises by the frame's peak, quantized to int8 by
  ``tfcompress.quantize``: its int8 DIV fails on an all-zero input (a divisor that is 0).
* :class:`AbortingRunner`: a stand-in for LiteRT aborting an int8 LSTM at its second
  invoke (``malloc_consolidate(): invalid chunk size``): a ``cpu`` runner that really calls
  ``abort()`` at its second invoke. Tests register it as backend ``"aborting"``.

Data files hold each model's inputs in the model's own layout (``h`` as ``(2, N, 16)``,
``sr`` as one 0-d value) and labels (``y_output``, ``y``).
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tfcompress.runtime.base import Feed, Outputs
from tfcompress.runtime.litert import LiteRTRunner

UNITS = 16
LAYERS = 2
SAMPLE_RATE = 16000.0
FRAME = 64
RNN_SHAPE = (10, 8)


@functools.cache
def build() -> dict[str, Path]:
    """Every model and data file, built once per test process into a temporary folder."""
    root = Path(tempfile.mkdtemp(prefix="tfcompress-shipped-"))
    return {**build_vad(root), **build_rnn(root), **build_norm(root)}


class AbortingRunner(LiteRTRunner):
    """LiteRT's ``cpu`` runner, except that its second invoke aborts the process (SIGABRT)."""

    backend = "aborting"

    def __init__(self, model, *, threads: int = 1) -> None:
        super().__init__(model, threads=threads)
        self._invokes = 0

    def _count(self) -> None:
        self._invokes += 1
        if self._invokes >= 2:
            os.abort()  # a real native abort, as LiteRT's malloc_consolidate() check does

    def predict_batch(self, feed: Feed) -> Outputs:
        self._count()
        return super().predict_batch(feed)

    def bind_call(self, feed: Feed) -> Callable[[], object]:
        invoke = super().bind_call(feed)

        def counted() -> object:
            self._count()
            return invoke()

        return counted


def _vad_weights() -> np.ndarray:
    return np.random.default_rng(7).normal(size=(1, UNITS)).astype(np.float32)


def build_vad(root: Path) -> dict[str, Path]:
    """The streaming model as SavedModel, .tflite and .onnx, with data in its layout."""
    import tensorflow as tf

    weights = tf.constant(_vad_weights())

    class Vad(tf.Module):
        @tf.function(
            input_signature=[
                tf.TensorSpec([None, None], tf.float32, name="input"),
                tf.TensorSpec([], tf.float32, name="sr"),
                tf.TensorSpec([LAYERS, None, UNITS], tf.float32, name="h"),
            ]
        )
        def serve(self, input, sr, h):  # Silero names its audio input "input"
            energy = tf.reduce_mean(tf.square(input), axis=1, keepdims=True) * (sr / SAMPLE_RATE)
            hn = tf.tanh(0.5 * h + tf.matmul(energy, weights)[None])
            output = tf.sigmoid(tf.reduce_mean(hn[-1], axis=-1, keepdims=True) * 4.0)
            return {"output": output, "hn": hn}

    module = Vad()
    saved = root / "vad_savedmodel"
    tf.saved_model.save(module, str(saved), signatures={"serving_default": module.serve})
    tflite = root / "vad.tflite"
    tflite.write_bytes(tf.lite.TFLiteConverter.from_saved_model(str(saved)).convert())
    onnx_path = root / "vad.onnx"
    onnx_path.write_bytes(_vad_onnx())
    # Frames of speech-like noise at several loudness levels; labels from the reference.
    rng = np.random.default_rng(3)
    count = 48
    loud = rng.uniform(0.05, 3.0, (count, 1)).astype(np.float32)
    audio = (rng.normal(size=(count, FRAME)) * loud).astype(np.float32)
    state = rng.normal(0.0, 0.3, (LAYERS, count, UNITS)).astype(np.float32)
    outputs = module.serve(tf.constant(audio), tf.constant(SAMPLE_RATE), tf.constant(state))
    speech = (outputs["output"].numpy() > 0.5).astype(np.int64)
    data = root / "vad.npz"
    np.savez(data, input=audio, sr=np.float32(SAMPLE_RATE), h=state, y_output=speech)
    unlabelled = root / "vad_unlabelled.npz"
    np.savez(unlabelled, input=audio, h=state)  # sr comes from --input-value
    return {
        "vad_savedmodel": saved,
        "vad_tflite": tflite,
        "vad_onnx": onnx_path,
        "vad_data": data,
        "vad_unlabelled": unlabelled,
    }


def _vad_onnx() -> bytes:
    """The same model as ONNX nodes, with symbolic N (batch) and T (length) dimensions."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def const(name: str, value: np.ndarray) -> onnx.TensorProto:
        return numpy_helper.from_array(np.asarray(value), name)

    nodes = [
        helper.make_node("Mul", ["input", "input"], ["sq"]),
        helper.make_node("ReduceMean", ["sq", "axis1"], ["energy0"], keepdims=1),
        helper.make_node("Div", ["sr", "rate"], ["scale"]),
        helper.make_node("Mul", ["energy0", "scale"], ["energy"]),
        helper.make_node("MatMul", ["energy", "weights"], ["drive"]),
        helper.make_node("Unsqueeze", ["drive", "axis0"], ["drive3"]),
        helper.make_node("Mul", ["h", "half"], ["decay"]),
        helper.make_node("Add", ["decay", "drive3"], ["pre"]),
        helper.make_node("Tanh", ["pre"], ["hn"]),
        helper.make_node("Gather", ["hn", "last"], ["top"], axis=0),
        helper.make_node("ReduceMean", ["top", "axis_last"], ["mean"], keepdims=1),
        helper.make_node("Mul", ["mean", "four"], ["logit"]),
        helper.make_node("Sigmoid", ["logit"], ["output"]),
    ]
    initializers = [
        const("axis1", np.array([1], np.int64)),
        const("axis0", np.array([0], np.int64)),
        const("axis_last", np.array([-1], np.int64)),
        const("rate", np.float32(SAMPLE_RATE)),
        const("weights", _vad_weights()),
        const("half", np.float32(0.5)),
        const("last", np.int64(LAYERS - 1)),
        const("four", np.float32(4.0)),
    ]
    graph = helper.make_graph(
        nodes,
        "vad",
        [
            helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", "T"]),
            helper.make_tensor_value_info("sr", TensorProto.FLOAT, []),
            helper.make_tensor_value_info("h", TensorProto.FLOAT, [LAYERS, "N", UNITS]),
        ],
        [
            helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 1]),
            helper.make_tensor_value_info("hn", TensorProto.FLOAT, [LAYERS, "N", UNITS]),
        ],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model.SerializeToString()


def build_rnn(root: Path) -> dict[str, Path]:
    """The static-batch-1 LSTM as SavedModel and .tflite, with labelled data."""
    import tensorflow as tf

    from tfcompress._compat.keras import KerasFlavour, keras_module

    keras = keras_module(KerasFlavour.TF_KERAS)  # its LSTM converts to the fused LiteRT op
    keras.utils.set_random_seed(0)
    frames = keras.Input(shape=RNN_SHAPE, batch_size=1, name="frames")
    hidden = keras.layers.LSTM(16)(frames)
    probs = keras.layers.Dense(4, activation="softmax", name="probs")(hidden)
    model = keras.Model(frames, probs, name="rnn")

    class Exported(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        @tf.function(input_signature=[tf.TensorSpec([1, *RNN_SHAPE], tf.float32, name="frames")])
        def serve(self, frames):
            return {"probs": self.model(frames, training=False)}

    module = Exported()
    saved = root / "rnn_savedmodel"
    tf.saved_model.save(module, str(saved), signatures={"serving_default": module.serve})
    tflite = root / "rnn.tflite"
    tflite.write_bytes(tf.lite.TFLiteConverter.from_saved_model(str(saved)).convert())
    x = np.random.default_rng(4).normal(size=(24, *RNN_SHAPE)).astype(np.float32)
    labels = model.predict(x, batch_size=1, verbose=0).argmax(axis=1)
    data, unlabelled = root / "rnn.npz", root / "rnn_unlabelled.npz"
    np.savez(data, frames=x, y=labels)
    np.savez(unlabelled, frames=x)
    return {
        "rnn_savedmodel": saved,
        "rnn_tflite": tflite,
        "rnn_data": data,
        "rnn_unlabelled": unlabelled,
    }


def build_norm(root: Path) -> dict[str, Path]:
    """The int8 front end whose DIV refuses silence, its Keras source and data."""
    import keras

    import tfcompress

    keras.utils.set_random_seed(0)
    audio = keras.Input(shape=(FRAME,), name="audio")
    peak = keras.ops.max(keras.ops.abs(audio), axis=-1, keepdims=True)
    logits = keras.layers.Dense(4, name="logits")(audio / peak)
    model = keras.Model(audio, logits, name="norm")
    rng = np.random.default_rng(5)
    x = (rng.normal(size=(96, FRAME)) * rng.uniform(0.1, 2.0, (96, 1))).astype(np.float32)
    keras_path = root / "norm.keras"
    model.save(keras_path)
    result = tfcompress.quantize(model, recipe="int8", representative_data=x[:64])
    int8 = root / "norm_int8.tflite"
    result.save(int8)
    data = root / "norm.npz"
    np.savez(data, audio=x, y=model.predict(x, verbose=0).argmax(axis=1))
    return {"norm_keras": keras_path, "norm_int8": int8, "norm_data": data}
