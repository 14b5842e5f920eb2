"""An already-quantized input is called that first, with what can still be done with it.

An int8 ``.tflite`` (a microWakeWord-style file) and int8 ONNX files (QDQ, QLinear and
MatMulInteger nodes, built with the ``onnx`` helper API) given to ``quantize`` or
``compress``: one line, exit 2, that starts by saying the file is already quantized.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tfcompress
from tfcompress.cli import main
from tfcompress.errors import UnsupportedModelError
from tfcompress.models import load_model
from tfcompress.models.quantized import quantized_precision


def _onnx(path, nodes, initializers, x_type=TensorProto.FLOAT, y_type=TensorProto.FLOAT):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", x_type, [None, 4])],
        [helper.make_tensor_value_info("y", y_type, [None, 3])],
        initializer=initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.write_bytes(model.SerializeToString())
    return path


def _tensor(name, value, dtype):
    return numpy_helper.from_array(np.asarray(value, dtype), name)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    import keras

    root = tmp_path_factory.mktemp("quantized")
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    x = np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32)
    np.savez(root / "data.npz", x=x)
    tfcompress.quantize(model, recipe="int8", representative_data=x).save(root / "kws.tflite")
    scale, zero = _tensor("s", 0.05, np.float32), _tensor("z", 0, np.int8)
    weight = _tensor("w", np.ones((4, 3)), np.float32)
    _onnx(
        root / "qdq.onnx",
        [
            helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
            helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
            helper.make_node("MatMul", ["xd", "w"], ["y"]),
        ],
        [scale, zero, weight],
    )
    _onnx(
        root / "dynamic.onnx",
        [
            helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
            helper.make_node("MatMulInteger", ["xq", "wq", "xz"], ["acc"]),
            helper.make_node("Cast", ["acc"], ["y"], to=TensorProto.FLOAT),
        ],
        [_tensor("wq", np.ones((4, 3)), np.uint8)],
    )
    _onnx(root / "float.onnx", [helper.make_node("MatMul", ["x", "w"], ["y"])], [weight])
    return root


def test_what_makes_a_file_quantized_is_named(files):
    assert quantized_precision(load_model(files / "kws.tflite")) == "int8 tensors with scales"
    assert quantized_precision(load_model(files / "qdq.onnx")) == (
        "int8: DequantizeLinear, QuantizeLinear nodes"
    )
    assert quantized_precision(load_model(files / "dynamic.onnx")) == (
        "DynamicQuantizeLinear, MatMulInteger nodes"
    )
    assert quantized_precision(load_model(files / "float.onnx")) is None


@pytest.mark.parametrize(
    ("verb", "name", "extra", "said"),
    [
        ("quantize", "kws.tflite", ["--recipe", "int8"], "int8 tensors with scales"),
        ("quantize", "kws.tflite", ["--recipe", "dynamic"], "int8 tensors with scales"),
        ("compress", "kws.tflite", ["--eval", "data.npz"], "int8 tensors with scales"),
        ("quantize", "qdq.onnx", ["--recipe", "int8"], "int8: DequantizeLinear, QuantizeLinear"),
        ("compress", "qdq.onnx", ["--eval", "data.npz"], "int8: DequantizeLinear"),
        ("quantize", "dynamic.onnx", ["--recipe", "dynamic"], "DynamicQuantizeLinear, MatMul"),
    ],
)
def test_quantize_and_compress_say_already_quantized_first(
    files, tmp_path, capsys, verb, name, extra, said
):
    model, out = files / name, tmp_path / f"out{model_suffix(name)}"
    argv = [verb, str(model), "--data", str(files / "data.npz"), *extra, "--out", str(out)]
    code = main([a if not a.endswith(".npz") else str(files / a) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and not out.exists()
    assert err[-1].startswith(f"tfcompress {verb}: error: {model} is already quantized ({said}")
    assert "tfcompress benchmark" in err[-1] and "tfcompress gate FLOAT_MODEL" in err[-1]
    assert ("tfcompress mcu" in err[-1]) == name.endswith(".tflite")  # .tflite checks only


def model_suffix(name: str) -> str:
    return ".onnx" if name.endswith(".onnx") else ".tflite"


def test_the_library_refuses_it_too(files):
    with pytest.raises(UnsupportedModelError, match=r"^\S*kws.tflite is already quantized"):
        tfcompress.quantize(str(files / "kws.tflite"), recipe="int8", engine="converter")
