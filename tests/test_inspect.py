"""`inspect` on models shaped like real ones: several inputs/outputs, custom ops, every format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tfcompress
from tfcompress.cli import main
from tfcompress.errors import MissingDependencyError
from tfcompress.inspection.api import (
    KerasInfo,
    OnnxInfo,
    SavedModelInfo,
    TFLiteInfo,
    inspect_model,
)
from tfcompress.inspection.common import WeightGroup, group_weights, weights_line
from tfcompress.models import OnnxModel, load_model

CUSTOM = "Convolution2DTransposeBias"


def _cli(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("tfcompress inspect: error: "), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def two_head() -> Any:
    """A detector-like Keras 3 model: image + scalar in, class + 4-number box out."""
    import keras

    image = keras.Input((8, 8, 1), name="image")
    scale = keras.Input((1,), name="scale")
    x = keras.layers.Conv2D(4, 3, activation="relu", name="conv")(image)
    x = keras.layers.Concatenate()([keras.layers.Flatten()(x), scale])
    cls = keras.layers.Dense(3, activation="softmax", name="cls")(x)
    box = keras.layers.Dense(4, name="box")(x)
    return keras.Model([image, scale], [cls, box], name="two_head")


@pytest.fixture(scope="module")
def files(two_head: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The models of this file, on disk."""
    root = tmp_path_factory.mktemp("inspect")
    paths = {
        "keras": root / "two_head.keras",
        "tflite": root / "two_head_int8.tflite",
        "custom": root / "custom_ops.tflite",
        "audio": root / "audio.tflite",
        "saved_model": root / "detector_sm",
        "onnx": root / "two_out.onnx",
    }
    two_head.save(paths["keras"])
    paths["tflite"].write_bytes(_int8_io(two_head))
    paths["custom"].write_bytes(_with_custom_ops(paths["tflite"].read_bytes()))
    paths["audio"].write_bytes(tfcompress.quantize(_audio(), recipe="float32").model_content)
    _saved_model(paths["saved_model"])
    paths["onnx"].write_bytes(_onnx_model().SerializeToString())
    return paths


def _int8_io(model: Any) -> bytes:
    # Multi-input calibration through the converter itself: its representative dataset
    # takes one dict per sample, keyed by the signature's input names.
    import tensorflow as tf

    rng = np.random.default_rng(0)

    def samples() -> Any:
        for _ in range(8):
            yield {
                "image": rng.random((1, 8, 8, 1), dtype=np.float32),
                "scale": rng.random((1, 1), dtype=np.float32),
            }

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = samples
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    return bytes(converter.convert())


def _with_custom_ops(content: bytes) -> bytes:
    """Rename the conv to a MediaPipe-style custom op and the softmax to one with no code."""
    from tfcompress._compat.litert import flatbuffer_utils

    utils = flatbuffer_utils()
    ops = utils.schema_fb.BuiltinOperator
    model = utils.read_model_from_bytearray(bytearray(content))
    for code in model.operatorCodes:
        if code.builtinCode in (ops.CONV_2D, ops.SOFTMAX):
            custom = CUSTOM.encode() if code.builtinCode == ops.CONV_2D else b""
            code.builtinCode = code.deprecatedBuiltinCode = ops.CUSTOM
            code.customCode = custom
    return bytes(utils.convert_object_to_bytearray(model))


def _audio() -> Any:
    """Any-length mono audio in. Dense per frame: the load probe runs it at length 1."""
    import keras

    audio = keras.Input((None, 1), name="audio")
    x = keras.layers.Dense(4, activation="relu")(audio)
    x = keras.layers.GlobalAveragePooling1D()(x)
    return keras.Model(audio, keras.layers.Dense(2, name="keyword")(x), name="kws")


def _saved_model(path: Path) -> None:
    import tensorflow as tf

    class Detector(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.kernel = tf.Variable(tf.ones((16, 4)))
            self.bias = tf.Variable(tf.zeros((4,)))

        @tf.function(input_signature=[tf.TensorSpec((None, None, 16), tf.float32, "frames")])
        def serve(self, frames: Any) -> dict[str, Any]:
            logits = tf.einsum("btf,fk->btk", frames, self.kernel) + self.bias
            return {"scores": tf.nn.softmax(logits), "boxes": logits[..., :2]}

    module = Detector()
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})


def _onnx_model(domain_op: bool = False) -> Any:
    """x (N, 4) -> Gemm (W, B) -> logits (N, 3) -> Relu -> act: two outputs."""
    from onnx import TensorProto, helper, numpy_helper

    weights = [
        numpy_helper.from_array(np.ones((3, 4), np.float32), "W"),
        numpy_helper.from_array(np.zeros(3, np.float32), "B"),
        numpy_helper.from_array(np.array([2], np.int64), "k"),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "W", "B"], ["logits"], transB=1),
        helper.make_node("Relu", ["logits"], ["act"]),
    ]
    if domain_op:
        nodes.append(helper.make_node("Gelu", ["act"], ["gelu"], domain="com.microsoft"))
    graph = helper.make_graph(
        nodes,
        "two_out",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 3]),
            helper.make_tensor_value_info("act", TensorProto.FLOAT, ["N", 3]),
        ],
        weights,
    )
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(
        graph, producer_name="tests", producer_version="1.0", opset_imports=opsets[: 1 + domain_op]
    )
    model.ir_version = 8
    return model


# --- Keras ---------------------------------------------------------------------------------


def test_keras_lists_every_input_and_output(two_head):
    info = inspect_model(two_head)
    assert isinstance(info, KerasInfo)
    assert [(s.name, s.shape) for s in info.inputs] == [
        ("image", (None, 8, 8, 1)),
        ("scale", (None, 1)),
    ]
    assert [(s.name, s.shape) for s in info.outputs] == [("cls", (None, 3)), ("box", (None, 4))]
    text = str(info)
    assert "2 input(s), 2 output(s)" in text
    assert "input  image (N, 8, 8, 1) float32" in text
    assert "output box (N, 4) float32" in text
    params = two_head.count_params()
    (group,) = info.weights_by_dtype
    assert (group.dtype, group.bytes, group.biases) == ("float32", 4 * params, 3)
    data = info.to_dict()
    assert data["outputs"][1] == {"name": "box", "shape": [None, 4], "dtype": "float32"}
    assert "input" not in data


def test_keras_audio_input_prints_any_length_as_question_mark():
    info = inspect_model(_audio())
    assert "input  audio (N, ?, 1) float32" in str(info)
    assert info.to_dict()["inputs"] == [
        {"name": "audio", "shape": [None, None, 1], "dtype": "float32"}
    ]


# --- .tflite -------------------------------------------------------------------------------


def test_tflite_io_keeps_signature_names_stored_dtype_and_quantization(files):
    info = inspect_model(files["tflite"])
    assert isinstance(info, TFLiteInfo)
    by_name = {t.name: t for t in (*info.inputs, *info.outputs)}
    assert set(by_name) == {"image", "scale", "output_0", "output_1"}
    assert by_name["image"].shape == (None, 8, 8, 1)
    assert by_name["image"].tensor.startswith("serving_default_image")
    for tensor in by_name.values():
        assert tensor.dtype == "int8" and tensor.scale > 0 and -128 <= tensor.zero_point <= 127
    boxes = [t for t in info.outputs if t.shape == (None, 4)]
    assert len(boxes) == 1  # both heads are listed, each with its own shape
    text = str(info)
    assert f"input  image (N, 8, 8, 1) int8 q=({by_name['image'].scale:.6g}, " in text


def test_tflite_weights_by_dtype_add_up_to_the_constant_buffers(files):
    info = inspect_model(files["tflite"])
    groups = {g.dtype: g for g in info.weights_by_dtype}
    assert set(groups) == {"int8", "int32"}
    # Kernels: conv 4x3x3x1, cls 3x145, box 4x145, one byte each.
    assert groups["int8"].tensors == 3 and groups["int8"].bytes == 36 + 435 + 580
    assert groups["int32"].biases and groups["int32"].biases >= 1
    assert sum(g.bytes for g in info.weights_by_dtype) <= info.weight_bytes
    line = next(x for x in str(info).splitlines() if x.startswith("weights: "))
    assert line.startswith("weights: int8 3 tensors 1,051 bytes; int32 ")


def test_tflite_audio_shape_is_n_question_one(files):
    info = inspect_model(files["audio"])
    assert info.inputs[0].shape == (None, None, 1)
    assert f"input  {info.inputs[0].name} (N, ?, 1) float32" in str(info)


def test_custom_ops_are_named_by_their_code(files):
    info = inspect_model(files["custom"])
    assert info.op_histogram[f"CUSTOM: {CUSTOM}"] == 1
    assert info.op_histogram["CUSTOM: (no code)"] == 1
    assert "CONV_2D" not in info.op_histogram and "SOFTMAX" not in info.op_histogram
    assert info.custom_ops == (CUSTOM, "(no code)")
    text = str(info)
    assert f"custom ops: {CUSTOM} \u00d71, (no code) \u00d71; not TFLite builtins" in text
    assert "runtime or delegate that defines them" in text
    assert not any(
        line.startswith("custom ops") for line in str(inspect_model(files["tflite"])).splitlines()
    )


# --- SavedModel and ONNX -------------------------------------------------------------------


def test_saved_model_shows_its_serving_signature_and_variables(files):
    info = inspect_model(files["saved_model"])
    assert isinstance(info, SavedModelInfo)
    assert [s.name for s in info.inputs] == ["frames"]
    assert [(s.name, s.shape) for s in info.outputs] == [
        ("boxes", (None, None, 2)),
        ("scores", (None, None, 4)),
    ]
    on_disk = sum(f.stat().st_size for f in (files["saved_model"] / "variables").iterdir())
    assert info.variables_bytes == on_disk > 0
    assert info.weights_by_dtype == (WeightGroup("float32", 2, (16 * 4 + 4) * 4),)
    text = str(info)
    assert text.startswith("detector_sm (saved_model): signature 'serving_default'")
    assert "input  frames (N, ?, 16) float32" in text and "output scores (N, ?, 4)" in text


def test_onnx_facts(files):
    info = inspect_model(files["onnx"])
    assert isinstance(info, OnnxInfo)
    assert (info.ir_version, info.producer, info.opsets) == (8, "tests 1.0", (("ai.onnx", 13),))
    assert info.node_count == 2 and info.op_histogram == {"Gemm": 1, "Relu": 1}
    assert info.weights_by_dtype == (
        WeightGroup("float32", 2, (12 + 3) * 4, biases=1),
        WeightGroup("int64", 1, 8, biases=0),
    )
    assert [s.name for s in info.inputs] == ["x"]
    assert [(s.name, s.shape) for s in info.outputs] == [("logits", (None, 3)), ("act", (None, 3))]
    text = str(info)
    assert "ONNX IR 8, opset ai.onnx 13; producer tests 1.0; 2 nodes" in text
    assert "convert" not in text.lower()


def test_onnx_ops_of_other_domains_are_named_with_their_domain():
    model = OnnxModel(_onnx_model(domain_op=True).SerializeToString())
    info = inspect_model(model)
    assert info.op_histogram["com.microsoft:Gelu"] == 1
    assert info.custom_ops == ("com.microsoft:Gelu",)
    assert ("com.microsoft", 1) in info.opsets
    assert "ops outside ai.onnx: com.microsoft:Gelu \u00d71" in str(info)


def test_onnx_without_the_onnx_package_names_the_install(files, monkeypatch, capsys):
    model = load_model(files["onnx"])
    monkeypatch.setattr("tfcompress.models.onnx.parse", lambda _: None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'tfcompress\[onnx\]'"):
        inspect_model(model)
    code, out, err = _cli(capsys, "inspect", files["onnx"])
    assert code == 2 and out == ""
    assert "pip install 'tfcompress[onnx]'" in _one_error_line(err)


# --- the command line ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "fmt", "outputs"),
    [
        ("keras", "keras", 2),
        ("tflite", "tflite", 2),
        ("custom", "tflite", 2),
        ("audio", "tflite", 1),
        ("saved_model", "saved_model", 2),
        ("onnx", "onnx", 2),
    ],
)
def test_cli_json_lists_inputs_and_outputs_as_objects(files, capsys, kind, fmt, outputs):
    code, out, err = _cli(capsys, "inspect", files[kind], "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["format"] == fmt
    assert len(data["outputs"]) == outputs
    for tensor in (*data["inputs"], *data["outputs"]):
        assert isinstance(tensor, dict) and {"name", "shape", "dtype"} <= set(tensor)
        assert isinstance(tensor["shape"], list)
    for group in data["weights_by_dtype"]:
        assert set(group) == {"dtype", "tensors", "bytes", "biases"}


def test_cli_json_custom_op_keys_match_the_table(files, capsys):
    code, out, _ = _cli(capsys, "inspect", files["custom"], "--json")
    data = json.loads(out)
    assert code == 0 and data["custom_ops"] == [CUSTOM, "(no code)"]
    assert data["op_histogram"][f"CUSTOM: {CUSTOM}"] == 1
    code, out, _ = _cli(capsys, "inspect", files["custom"])
    assert code == 0 and f"CUSTOM: {CUSTOM}" in out and "CUSTOM: (no code)" in out


def test_cli_human_output_prints_every_tensor(files, capsys):
    code, out, _ = _cli(capsys, "inspect", files["tflite"])
    assert code == 0
    lines = out.splitlines()
    assert sum(line.startswith("input  ") for line in lines) == 2
    assert sum(line.startswith("output ") for line in lines) == 2
    assert any(line.startswith("weights: int8 ") for line in lines)


def test_cli_bad_onnx_is_one_line_and_exit_2(tmp_path, capsys):
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(_onnx_model().SerializeToString()[:-7])
    code, out, err = _cli(capsys, "inspect", broken)
    assert code == 2 and out == ""
    _one_error_line(err)


def test_weights_line_wording():
    groups = group_weights(
        [("int8", 864, False), ("int32", 16, True), ("int32", 8, False), ("float16", 2, None)]
    )
    assert weights_line(groups) == (
        "weights: int8 1 tensor 864 bytes; int32 2 tensors 24 bytes (1 bias); "
        "float16 1 tensor 2 bytes"
    )
    assert groups[-1].biases is None  # unknown, not "no biases"
