"""The valid files a fuzz campaign mutates: tiny models in every format, data, code payloads.

Everything is built once per campaign in a work folder, from code, in a few seconds: no
download and no training (the contract does not depend on accuracy).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SAMPLE_SHAPE = (8, 8, 1)
CLASSES = 3


@dataclass(frozen=True)
class Seeds:
    """Paths of the seed files, and the marker a code payload would create.

    Attributes:
        root: The folder holding them.
        marker: The file a Lambda payload writes when its code runs; it must never appear.
        keras: A Keras 3 ``.keras`` model.
        h5: The same architecture saved by tf-keras as ``.h5``.
        saved_model: A tf-keras SavedModel directory.
        tflite_float: A float32 ``.tflite``.
        tflite_int8: A full-int8 ``.tflite`` (float I/O).
        data_npz: Labelled samples ``x``/``y``.
        lambda_h5: A tf-keras ``.h5`` whose Lambda layer writes ``marker`` when it runs.
        lambda_saved_model: The same Lambda model as a tf-keras SavedModel.
        lambda_keras: A Keras 3 ``.keras`` with the same Lambda.
        onnx: A small ONNX model with the same input (None without the onnx package).
        graph_on_call: A plain SavedModel whose serving function writes ``marker``.
        graph_on_load: A plain SavedModel whose resource initializer writes ``marker``.
        images: An image folder (two classes of 8x8 grayscale PNGs) fitting the models.
        select_train: Labelled 32x32x3 images for ``select``.
    """

    root: Path
    marker: Path
    keras: Path
    h5: Path
    saved_model: Path
    tflite_float: Path
    tflite_int8: Path
    data_npz: Path
    lambda_h5: Path
    lambda_saved_model: Path
    lambda_keras: Path
    onnx: Path | None
    graph_on_call: Path
    graph_on_load: Path
    images: Path
    select_train: Path


def build_seeds(root: Path, *, seed: int = 0) -> Seeds:
    """Create every seed file under ``root`` (which must exist).

    Example:
        >>> seeds = build_seeds(Path("/tmp/fuzz"))  # doctest: +SKIP
    """
    import tfcompress
    from tfcompress._compat.keras import KerasFlavour, keras_module

    rng = np.random.default_rng(seed)
    x = rng.random((24, *SAMPLE_SHAPE), dtype=np.float32)
    y = rng.integers(0, CLASSES, len(x))
    marker = root / "CODE_RAN"
    seeds = Seeds(
        root=root,
        marker=marker,
        keras=root / "seed.keras",
        h5=root / "seed.h5",
        saved_model=root / "seed_savedmodel",
        tflite_float=root / "seed_float32.tflite",
        tflite_int8=root / "seed_int8.tflite",
        data_npz=root / "seed_data.npz",
        lambda_h5=root / "lambda.h5",
        lambda_saved_model=root / "lambda_savedmodel",
        lambda_keras=root / "lambda.keras",
        onnx=root / "seed.onnx" if _has_onnx() else None,
        graph_on_call=root / "graph_on_call",
        graph_on_load=root / "graph_on_load",
        images=root / "images",
        select_train=root / "select_train.npz",
    )
    np.savez(seeds.data_npz, x=x, y=y)
    np.savez(
        seeds.select_train,
        x=rng.random((16, 32, 32, 3), dtype=np.float32),
        y=np.arange(16) % 2,
    )
    _image_folder(seeds.images, rng)
    if seeds.onnx is not None:
        seeds.onnx.write_bytes(onnx_model().SerializeToString())
    _graph_payloads(seeds)
    keras3 = keras_module(KerasFlavour.KERAS3)
    tf_keras = keras_module(KerasFlavour.TF_KERAS)
    keras3.utils.set_random_seed(seed)
    model = _tiny_model(keras3)
    model.save(seeds.keras)
    tfk_model = _tiny_model(tf_keras)
    tfk_model.save(seeds.h5)
    tfk_model.save(seeds.saved_model, save_format="tf")
    float32 = tfcompress.quantize(model, recipe="float32")
    float32.save(seeds.tflite_float)
    tfcompress.quantize(model, recipe="int8", representative_data=x).save(seeds.tflite_int8)
    _lambda_model(tf_keras, marker).save(seeds.lambda_h5)
    _lambda_model(tf_keras, marker).save(seeds.lambda_saved_model, save_format="tf")
    _lambda_model(keras3, marker).save(seeds.lambda_keras)
    marker.unlink(missing_ok=True)  # saving may trace the Lambda; the campaign starts clean
    return seeds


def _has_onnx() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) for m in ("onnx", "onnxruntime"))


def onnx_model(*, outputs: bool = True, opset: int = 17, batch: object = "N") -> object:
    """``y = Relu(x)`` on ``(batch, 8, 8, 1)`` float32: the ONNX seed, and its variants."""
    from onnx import TensorProto, helper

    shape = [batch, *SAMPLE_SHAPE]
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "fuzz_seed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)] if outputs else [],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def png(width: int, height: int, pixels: bytes | None = None) -> bytes:
    """An 8-bit grayscale PNG; ``pixels`` (rows of ``width`` bytes) default to a gradient."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    if pixels is None:
        pixels = bytes((x * 32 + y) % 256 for y in range(height) for x in range(width))
    rows = b"".join(b"\0" + pixels[y * width : (y + 1) * width] for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def _image_folder(root: Path, rng: np.random.Generator) -> None:
    height, width, _ = SAMPLE_SHAPE
    for label in ("a", "b"):
        (root / label).mkdir(parents=True)
        for index in range(3):
            pixels = rng.integers(0, 256, height * width, dtype=np.uint8).tobytes()
            (root / label / f"{index}.png").write_bytes(png(width, height, pixels))


def _graph_payloads(seeds: Seeds) -> None:
    """Two plain SavedModels whose graphs (no Python) write the marker file."""
    from tfcompress._compat.tf import tensorflow

    tf = tensorflow()
    marker = str(seeds.marker)
    spec = [tf.TensorSpec([None, *SAMPLE_SHAPE], tf.float32)]

    class OnCall(tf.Module):
        @tf.function(input_signature=spec)
        def serve(self, x):
            tf.io.write_file(marker, "ran")
            return {"y": tf.nn.relu(x)}

    class Resource(tf.saved_model.experimental.TrackableResource):
        def _create_resource(self):
            return tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=[], shared_name="fuzz_graph")

        def _initialize(self):
            tf.io.write_file(marker, "ran")
            tf.raw_ops.AssignVariableOp(resource=self.resource_handle, value=1.0)

    class OnLoad(tf.Module):
        def __init__(self):
            self.resource = Resource()

        @tf.function(input_signature=spec)
        def serve(self, x):
            scale = tf.raw_ops.ReadVariableOp(
                resource=self.resource.resource_handle, dtype=tf.float32
            )
            return {"y": x * scale}

    for module, path in ((OnCall(), seeds.graph_on_call), (OnLoad(), seeds.graph_on_load)):
        tf.saved_model.save(module, path, signatures={"serving_default": module.serve})


def _tiny_model(keras: object) -> object:
    layers = keras.layers  # type: ignore[attr-defined]
    return keras.Sequential(  # type: ignore[attr-defined]
        [
            keras.Input(shape=SAMPLE_SHAPE),  # type: ignore[attr-defined]
            layers.Conv2D(4, 3, activation="relu"),
            layers.Flatten(),
            layers.Dense(CLASSES, activation="softmax"),
        ],
        name="fuzz_seed",
    )


def _lambda_model(keras: object, marker: Path) -> object:
    # The payload's path is a constant inside the marshalled bytecode, as in a real attack.
    payload = eval(  # builds our own test payload; never evaluates user input
        f"lambda t: (__import__('pathlib').Path({str(marker)!r}).write_text('ran'), t)[1]"
    )
    layers = keras.layers  # type: ignore[attr-defined]
    inner = keras.Sequential(  # type: ignore[attr-defined]
        [keras.Input(shape=(CLASSES,)), layers.Lambda(payload)],  # type: ignore[attr-defined]
        name="inner",
    )
    inputs = keras.Input(shape=SAMPLE_SHAPE)  # type: ignore[attr-defined]
    hidden = layers.Dense(CLASSES)(layers.Flatten()(inputs))
    return keras.Model(inputs, inner(hidden), name="payload")  # type: ignore[attr-defined]


def describe(seeds: Seeds) -> str:
    """The seeds as JSON, for a campaign's record."""
    return json.dumps({k: str(v) for k, v in vars(seeds).items()}, indent=2)
