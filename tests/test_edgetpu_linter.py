"""The Edge TPU linter on models built here and converted by tfcompress.quantize.

No Edge TPU software is involved: the linter reads the .tflite only. Every model is small and
converted once per module (MobileNetV2 alpha 0.35 at 96x96 is the largest, ~20 s).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tfcompress
from tfcompress.cli import main
from tfcompress.edgetpu import EdgeTPUReport, check
from tfcompress.errors import ModelLoadError, UnsupportedModelError
from tfcompress.models import TFLiteModel
from tfcompress.targets.edgetpu.limitations import LIMITATION_CHECKS
from tfcompress.targets.edgetpu.ops import OP_RULES, Support, rule_for
from tfcompress.targets.edgetpu.versions import VERSION_LIMITS

CALIB = np.random.default_rng(0).random((16, 8, 8, 3), dtype=np.float32)


def _small(batch: int | None, middle: Callable[[Any], Any], *, softmax: bool = False) -> Any:
    """conv -> middle -> conv [-> 4-D softmax] -> global average -> dense."""
    import keras

    layers = keras.layers
    inputs = keras.Input((8, 8, 3), batch_size=batch)
    h = layers.Conv2D(4, 3, activation="relu")(inputs)
    h = layers.Conv2D(4, 1)(middle(h))
    if softmax:
        h = layers.Softmax()(h)
    h = layers.GlobalAveragePooling2D()(h)
    return keras.Model(inputs, layers.Dense(3)(h))


def _relu(h: Any) -> Any:
    import keras

    return keras.layers.ReLU()(h)


def _gelu(h: Any) -> Any:
    import keras

    return keras.layers.Activation("gelu")(h)


def _batch_of_two_inside(h: Any) -> Any:
    """Reshape [1, 6, 6, 4] to [2, 6, 3, 4], convolve, reshape back: a 4-D tensor, outer 2."""
    import keras

    folded = keras.layers.Conv2D(4, 1)(keras.ops.reshape(h, (2, 6, 3, 4)))
    return keras.ops.reshape(folded, (1, 6, 6, 4))


def _int8(model: Any) -> bytes:
    return tfcompress.quantize(
        model, recipe="int8", representative_data=CALIB, input_type="uint8"
    ).model_content


@pytest.fixture(scope="module")
def models() -> dict[str, bytes]:
    return {
        "float32": tfcompress.quantize(_small(None, _relu), recipe="float32").model_content,
        "dynamic": _int8(_small(None, _relu)),
        "fixed": _int8(_small(1, _relu)),
        "gelu": _int8(_small(1, _gelu, softmax=True)),
        "rank": _int8(_small(1, _batch_of_two_inside)),
    }


@pytest.fixture(scope="module")
def files(models: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("edgetpu")
    paths = {}
    for name, content in models.items():
        paths[name] = folder / f"{name}.tflite"
        paths[name].write_bytes(content)
    return paths


def _rules(report: EdgeTPUReport) -> list[tuple[int | None, str]]:
    return [(finding.index, finding.rule) for finding in report.findings]


def _explained(report: EdgeTPUReport) -> None:
    for finding in report.findings:
        assert finding.rule and finding.message and finding.fix and finding.source, finding


def test_float32_model_is_not_fully_quantized_and_splits_at_the_first_op(models):
    report = check(models["float32"])
    assert not report.compatible
    assert report.ops_mapped == 0 and report.segments_predicted == 0
    assert report.first_unmapped_op is not None and report.first_unmapped_op.index == 0
    assert report.split_op == report.first_unmapped_op
    assert (0, "not-fully-quantized") in _rules(report)
    quantization = next(f for f in report.findings if f.rule == "not-fully-quantized")
    assert "float32" in quantization.message and "--target edgetpu" in quantization.fix
    assert report.to_dict()["macs_mapped_fraction"] == 0.0
    _explained(report)


def test_dynamic_batch_is_the_shape_finding_and_fixed_batch_removes_it(models):
    dynamic, fixed = check(models["dynamic"]), check(models["fixed"])
    assert [f.rule for f in dynamic.findings] == ["dynamic-shape"]
    shape = dynamic.findings[0]
    assert shape.effect == "compile-fails" and "[-1, 8, 8, 3]" in shape.message
    assert "batch_size=1" in shape.fix
    assert not dynamic.compiles and not dynamic.compatible and dynamic.segments_predicted == 0
    assert dynamic.ops_mapped == dynamic.ops_total  # what maps once the shape is fixed
    assert fixed.findings == () and fixed.compiles and fixed.compatible
    assert fixed.ops_mapped == fixed.ops_total == dynamic.ops_total
    assert fixed.macs_mapped_fraction == 1.0 and fixed.segments_predicted == 1
    assert fixed.first_unmapped_op is None and fixed.split_op is None
    _explained(dynamic)


def test_unsupported_op_splits_the_graph_and_later_ops_run_on_the_cpu(models):
    report = check(models["gelu"])
    types = [op.type for op in report.ops]
    gelu = types.index("GELU")
    assert report.split_op is not None and report.split_op.index == gelu
    assert report.to_dict()["first_unmapped_op"] == {"index": gelu, "type": "GELU"}
    assert [op.on_tpu for op in report.ops] == [i < gelu for i in range(len(types))]
    assert report.ops_mapped == gelu and report.segments_predicted == 1
    # The second convolution is supported but comes after the split: its MACs are on the CPU.
    first_conv, second_conv = (op for op in report.ops if op.type == "CONV_2D")
    assert first_conv.on_tpu and not second_conv.on_tpu and second_conv.macs > 0
    assert report.macs_mapped_fraction == pytest.approx(first_conv.macs / report.macs_total)
    assert 0 < report.macs_mapped_fraction < 1
    # Every blocking op is listed, also those after the split: the 4-D softmax too.
    assert (gelu, "unsupported-op") in _rules(report)
    softmax = types.index("SOFTMAX")
    assert (softmax, "op-limitation") in _rules(report)
    assert "16,000" in next(f.message for f in report.findings if f.index == softmax)
    _explained(report)


def test_four_d_tensor_with_an_outer_dimension_is_the_rank_finding(models):
    report = check(models["rank"])
    rank = [f for f in report.findings if f.rule == "tensor-rank"]
    assert rank and all("[2, 6, 3, 4]" in f.message for f in rank)
    assert report.split_op is not None and report.split_op.index == rank[0].index
    assert report.split_op.type == "RESHAPE" and not report.compatible
    _explained(report)


def _with_versions(content: bytes, versions: dict[str, int]) -> bytes:
    """The same model with some op codes' versions raised (what a newer converter writes)."""
    from tfcompress._compat.litert import flatbuffer_utils

    utils = flatbuffer_utils()
    ops = utils.schema_fb.BuiltinOperator
    model = utils.read_model_from_bytearray(bytearray(content))
    for code in model.operatorCodes:
        for name, version in versions.items():
            if code.builtinCode == getattr(ops, name):
                code.version = version
    return bytes(utils.convert_object_to_bytearray(model))


def test_op_version_newer_than_compiler_16_is_its_own_finding(models):
    report = check(_with_versions(models["fixed"], {"CONV_2D": 6, "QUANTIZE": 3}))
    versions = [f for f in report.findings if f.rule == "op-version"]
    assert {f.op for f in versions} == {"CONV_2D", "QUANTIZE"}
    conv = next(f for f in versions if f.op == "CONV_2D")
    assert "version 6" in conv.message and "grouped convolution" in conv.message
    assert "issues/631" in conv.source and "TensorFlow 2.8.2" in conv.fix
    assert all(f.effect == "compile-fails" for f in versions)
    assert not report.compiles and not report.compatible and report.segments_predicted == 0
    assert report.ops_mapped == report.ops_total  # no op rule is broken: only the versions
    below = check(_with_versions(models["fixed"], {"CONV_2D": 5}))
    assert below.compatible and below.findings == ()


@pytest.mark.slow
def test_mobilenet_v2_full_int8_reports_its_mapped_fraction_and_explains_every_finding():
    import keras

    model = keras.applications.MobileNetV2(
        weights=None, alpha=0.35, input_shape=(96, 96, 3), classes=10
    )
    calibration = np.random.default_rng(1).random((8, 96, 96, 3), dtype=np.float32)
    content = tfcompress.quantize(
        model,
        recipe="int8",
        representative_data=calibration,
        input_type="uint8",
        calibration_samples=8,
    ).model_content
    data = check(TFLiteModel(content, label="mobilenet_v2")).to_dict()
    assert data["source"] == "mobilenet_v2" and data["ops_total"] > 60
    assert data["ops_mapped"] == data["ops_total"] and data["ops_mapped_fraction"] == 1.0
    assert data["macs_mapped_fraction"] == 1.0 and data["macs_total"] > 5_000_000
    # keras.applications leaves the batch dimension open: the one finding left.
    assert [f["rule"] for f in data["findings"]] == ["dynamic-shape"]
    assert not data["compatible"] and not data["compiles"]
    for finding in data["findings"]:
        assert all(finding[key] for key in ("rule", "message", "fix", "source")), finding
    json.dumps(data)  # plain data


def test_op_table_rows_name_their_source_and_only_implemented_checks():
    for rule in OP_RULES:
        assert rule.source and rule.tflite_ops, rule
        assert set(rule.checks) <= set(LIMITATION_CHECKS), rule
        assert rule.support is Support.YES or rule.fix, rule
    for limit in VERSION_LIMITS:
        assert limit.evidence.startswith("https://github.com/") and limit.cause, limit
    assert rule_for("HARD_SWISH").support is Support.NO
    assert rule_for("ABS").support is Support.NO  # in the part of Coral's table read
    assert rule_for("TILE").support is Support.UNKNOWN  # in the part that could not be read
    assert rule_for("CUSTOM:MyOp").support is Support.NO


def test_accepts_paths_bytes_and_tflite_models_and_refuses_other_formats(files, tmp_path):
    path = files["fixed"]
    assert check(path).to_dict()["ops"] == check(path.read_bytes()).to_dict()["ops"]
    assert check(str(path)).source == str(path)
    with pytest.raises(ModelLoadError, match="no such file"):
        check(tmp_path / "missing.tflite")
    with pytest.raises(ModelLoadError, match="not a TFLite model"):
        check(b"not a flatbuffer at all")
    onnx = _onnx_file(tmp_path)
    with pytest.raises(UnsupportedModelError, match=r"reads \.tflite files"):
        check(onnx)


def _onnx_file(folder: Any) -> Any:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    path = folder / "model.onnx"
    path.write_bytes(onnx.helper.make_model(graph).SerializeToString())
    return path


def test_cli_json_report_and_exit_codes(files, capfd):
    assert main(["edgetpu", str(files["gelu"]), "--json"]) == 0  # a report, incompatible or not
    data = json.loads(capfd.readouterr().out)
    for key in ("compatible", "ops_total", "ops_mapped", "macs_mapped_fraction"):
        assert key in data
    assert data["first_unmapped_op"]["type"] == "GELU" and data["segments_predicted"] == 1
    assert {"op", "index", "rule", "message", "fix"} <= set(data["findings"][0])
    assert main(["edgetpu", str(files["gelu"]), "--require-compatible"]) == 1
    out, err = capfd.readouterr()
    assert "Graph splits at op #" in out and "GELU" in out and "not predicted" in err
    assert main(["edgetpu", str(files["fixed"]), "--require-compatible"]) == 0
    assert "Verdict: compatible" in capfd.readouterr().out


@pytest.mark.parametrize("kind", ["not_flatbuffer", "missing", "onnx"])
def test_cli_bad_input_is_exit_2_with_one_line(kind, tmp_path, capfd):
    if kind == "not_flatbuffer":
        path = tmp_path / "model.tflite"
        path.write_bytes(b"\x00" * 64)
    elif kind == "missing":
        path = tmp_path / "missing.tflite"
    else:
        path = _onnx_file(tmp_path)
    assert main(["edgetpu", str(path)]) == 2
    captured = capfd.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("tfcompress edgetpu: error: ")
    assert captured.out == ""


def test_cli_process_prints_one_line_and_no_traceback(tmp_path):
    path = tmp_path / "model.tflite"
    path.write_bytes(b"TFL3 but truncated")
    done = subprocess.run(
        [sys.executable, "-m", "tfcompress", "edgetpu", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
