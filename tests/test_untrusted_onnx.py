"""Untrusted ONNX files: external data stays inside the model's folder; unfeedable models are
refused in one line or become an error row, never an internal error.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tfcompress.cli import main  # noqa: E402
from tfcompress.errors import ModelLoadError  # noqa: E402
from tfcompress.models import OnnxModel, load_model  # noqa: E402
from tfcompress.runtime import create_runner  # noqa: E402

WEIGHTS = np.array([1.0, 2.0, 3.0, 4.0], np.float32)


def _model(nodes, inputs, outputs, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _x(shape=(1, 4)) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))


def _y(shape=(1, 4)) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))


def _adds_external(folder: Path, location: str) -> Path:
    """``y = x + w`` with ``w`` kept in the file at ``location`` (relative to the model)."""
    weights = numpy_helper.from_array(WEIGHTS, "w")
    weights.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "16")):
        entry = weights.external_data.add()
        entry.key, entry.value = key, value
    weights.ClearField("raw_data")
    model = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_x()], [_y()], [weights])
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return path


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """models/ holds the model; the working directory holds a decoy with the same location."""
    models, cwd, outside = tmp_path / "models", tmp_path / "cwd", tmp_path / "outside"
    for folder in (models, cwd / "secretdir", outside):
        folder.mkdir(parents=True)
    (cwd / "secretdir" / "w.bin").write_bytes(np.full(4, 666, np.float32).tobytes())
    (outside / "w.bin").write_bytes(WEIGHTS.tobytes())
    monkeypatch.chdir(cwd)
    return {"models": models, "cwd": cwd, "outside": outside}


def test_external_data_is_read_from_the_models_folder_not_the_working_directory(layout):
    (layout["models"] / "secretdir").mkdir()
    (layout["models"] / "secretdir" / "w.bin").write_bytes(WEIGHTS.tobytes())
    model = load_model(_adds_external(layout["models"], "secretdir/w.bin"))
    assert isinstance(model, OnnxModel)
    with create_runner(model, backend="onnxruntime") as runner:
        out = runner.predict(np.zeros((1, 4), np.float32))
    np.testing.assert_array_equal(out, WEIGHTS[None])  # the model's weights, not the decoy's


def test_a_location_only_the_working_directory_has_is_not_found(layout):
    path = _adds_external(layout["models"], "secretdir/w.bin")
    with pytest.raises(ModelLoadError, match=r"secretdir/w\.bin.*cannot be opened"):
        load_model(path)


def test_a_link_inside_the_folder_to_a_file_inside_it_is_fine(layout):
    (layout["models"] / "real.bin").write_bytes(WEIGHTS.tobytes())
    (layout["models"] / "link.bin").symlink_to("real.bin")
    assert isinstance(load_model(_adds_external(layout["models"], "link.bin")), OnnxModel)


@pytest.mark.parametrize(
    ("make", "location", "refusal"),
    [
        (None, "../outside/w.bin", "outside the model's folder"),
        ("link_out", "link.bin", "outside the model's folder"),
        ("link_dir", "escape/w.bin", "outside the model's folder"),
        (None, "{outside}/w.bin", "not a location relative to the model"),
        ("zero", "zero.bin", "outside the model's folder"),
        ("fifo", "fifo.bin", "a named pipe"),
        ("short", "short.bin", "the data file is truncated"),
    ],
)
def test_external_data_that_leaves_the_folder_or_is_not_a_file_is_refused(
    layout, capsys, make, location, refusal
):
    models = layout["models"]
    if make == "link_out":
        (models / "link.bin").symlink_to(layout["outside"] / "w.bin")
    elif make == "link_dir":
        (models / "escape").symlink_to(layout["outside"])
    elif make == "zero":
        (models / "zero.bin").symlink_to("/dev/zero")
    elif make == "fifo":
        os.mkfifo(models / "fifo.bin")
    elif make == "short":
        (models / "short.bin").write_bytes(b"\0" * 8)
    path = _adds_external(models, location.format(outside=layout["outside"]))
    with pytest.raises(ModelLoadError, match=refusal):
        load_model(path)
    assert main(["inspect", str(path)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_model_without_outputs_or_with_an_unfeedable_input_is_refused(tmp_path, capsys):
    no_outputs = _model([helper.make_node("Relu", ["x"], ["y"])], [_x()], [])
    huge = _model([helper.make_node("Relu", ["x"], ["y"])], [_x((1, 10**13))], [_y((1, 10**13))])
    for name, model, refusal in (
        ("none.onnx", no_outputs, "declares no outputs"),
        ("huge.onnx", huge, "can never be fed"),
    ):
        path = tmp_path / name
        path.write_bytes(model.SerializeToString())
        with pytest.raises(ModelLoadError, match=refusal):
            load_model(path)
        assert main(["benchmark", str(path), "--runs", "1", "--min-seconds", "0"]) == 2
        assert refusal in capsys.readouterr().err.strip().splitlines()[-1]


def test_a_model_that_cannot_run_on_real_inputs_is_an_error_row_not_a_bug(tmp_path, capsys):
    """A Resize to 10^12 elements: the probe's zeros fail to run (accepted, as for any model
    that needs other inputs); the timed run fails the same way and says so in its row."""
    scales = numpy_helper.from_array(np.array([1, 1, 1e6, 1e6], np.float32), "scales")
    resize = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest")
    model = _model(
        [resize],
        [_x((1, 1, 1, 1))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [scales],
    )
    path = tmp_path / "bomb.onnx"
    path.write_bytes(model.SerializeToString())
    code = main(["benchmark", str(path), "--runs", "1", "--min-seconds", "0", "--json"])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert "ONNX Runtime cannot run the model" in captured.err.strip().splitlines()[-1]
    assert "internal error" not in captured.err


def test_a_loop_that_explodes_on_random_inputs_ends_within_the_time_limit(tmp_path):
    """The trip count is 0 on the probe's zeros and about 10^15 on random inputs: the probe
    passes it, and the measurement's time limit (``--timeout``) stops it as a row error."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Identity", ["v_in"], ["v_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [1, 4]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [1, 4]),
        ],
    )
    scale = numpy_helper.from_array(np.array(1e15, np.float32), "scale")
    true = numpy_helper.from_array(np.array(True), "true")
    nodes = [
        helper.make_node("ReduceMax", ["x"], ["top"], keepdims=0),
        helper.make_node("Mul", ["top", "scale"], ["scaled"]),
        helper.make_node("Cast", ["scaled"], ["trips"], to=TensorProto.INT64),
        helper.make_node("Loop", ["trips", "true", "x"], ["looped"], body=body),
        helper.make_node("Relu", ["looped"], ["y"]),
    ]
    model = _model(nodes, [_x()], [_y()], [scale, true])
    path = tmp_path / "loop.onnx"
    path.write_bytes(model.SerializeToString())
    argv = [sys.executable, "-m", "tfcompress", "benchmark", str(path), "--runs", "1"]
    argv += ["--min-seconds", "0", "--timeout", "5", "--json"]
    try:  # the limit covers the worker; imports and the probe come on top
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the measurement ran past its 5 s time limit by more than a minute")
    assert done.returncode in (0, 2), done.stderr
    assert "Traceback" not in done.stderr
    assert "within 5 s and was stopped" in done.stdout + done.stderr


def test_the_quantized_files_load_check_opens_it_in_a_child(monkeypatch):
    from tfcompress.errors import ConversionError
    from tfcompress.quantization import onnx_ptq
    from tfcompress.runtime import onnxruntime as ort_runtime

    def here(*_, **__):
        raise AssertionError("ONNX Runtime opened the quantized file in the caller")

    monkeypatch.setattr(ort_runtime, "OnnxRuntimeRunner", here)  # the child has the real one
    adds = _model([helper.make_node("Add", ["x", "x"], ["y"])], [_x()], [_y()])
    onnx_ptq._check_loads(adds.SerializeToString(), "int8", "adds")
    unknown = _model([helper.make_node("NoSuchOp", ["x"], ["y"])], [_x()], [_y()])
    with pytest.raises(ConversionError, match="made a int8 model of unknown that it cannot load"):
        onnx_ptq._check_loads(unknown.SerializeToString(), "int8", "unknown")
