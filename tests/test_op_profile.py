"""``benchmark --profile-ops``: each op timed on its own, its placement, the sum's check.

The model is written here with the flatbuffer schema (no TensorFlow, milliseconds):
``x -> FULLY_CONNECTED -> CUMSUM -> FULLY_CONNECTED``. XNNPACK takes both FULLY_CONNECTED
ops and has no CUMSUM, so the file has two delegated partitions and one op that falls back
to LiteRT's built-in kernels. Nothing here asserts a time: the check's verdict is asserted
to follow from its own numbers, not to be true.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import tfcompress
from tfcompress.bench.op_profile import OpProfileUnavailable, profile_runner
from tfcompress.bench.stats import measure, summarize
from tfcompress.cli import main
from tfcompress.errors import InvalidInputError
from tfcompress.report.schema import validate_report

FAST = {"runs": 20, "min_seconds": 0.0, "warmup_seconds": 0.0}
FAST_FLAGS = ["--runs", "20", "--min-seconds", "0", "--warmup-seconds", "0"]
WIDTH = 512


def _tiny_tflite(subgraphs: int = 1) -> bytes:
    from ai_edge_litert import schema_py_generated as fb

    from tfcompress._compat.litert import flatbuffer_utils

    rng = np.random.default_rng(0)
    buffers, tensors = [fb.BufferT()], []

    def tensor(name, shape, kind=fb.TensorType.FLOAT32, data=None):
        made = fb.TensorT()
        made.name, made.shape, made.type, made.buffer = name, list(shape), kind, 0
        if data is not None:
            buffer = fb.BufferT()
            buffer.data = np.frombuffer(np.ascontiguousarray(data).tobytes(), np.uint8)
            buffers.append(buffer)
            made.buffer = len(buffers) - 1
        tensors.append(made)
        return len(tensors) - 1

    def op(code, inputs, outputs, kind, options):
        made = fb.OperatorT()
        made.opcodeIndex, made.inputs, made.outputs = code, inputs, outputs
        made.builtinOptionsType, made.builtinOptions = kind, options
        return made

    codes = []
    for builtin in (fb.BuiltinOperator.FULLY_CONNECTED, fb.BuiltinOperator.CUMSUM):
        code = fb.OperatorCodeT()
        code.builtinCode, code.version = builtin, 1
        code.deprecatedBuiltinCode = min(builtin, 127)  # the old 8-bit field
        codes.append(code)
    # 512 wide: an 8-wide FULLY_CONNECTED takes nanoseconds, no more than an empty call's
    # noise, and on a fast machine every op then measured 0 ms (no shares to sum).
    x = tensor("x", (1, WIDTH))
    w1 = tensor("w1", (WIDTH, WIDTH), data=rng.standard_normal((WIDTH, WIDTH)).astype(np.float32))
    dense = tensor("dense1", (1, WIDTH))
    axis = tensor("axis", (), fb.TensorType.INT32, np.array(1, np.int32))
    summed = tensor("cumsum", (1, WIDTH))
    w2 = tensor("w2", (4, WIDTH), data=rng.standard_normal((4, WIDTH)).astype(np.float32))
    y = tensor("y", (1, 4))
    fc = (fb.BuiltinOptions.FullyConnectedOptions, fb.FullyConnectedOptionsT())
    graph = fb.SubGraphT()
    graph.tensors, graph.inputs, graph.outputs = tensors, [x], [y]
    graph.operators = [
        op(0, [x, w1, -1], [dense], *fc),
        op(1, [dense, axis], [summed], fb.BuiltinOptions.CumsumOptions, fb.CumsumOptionsT()),
        op(0, [summed, w2, -1], [y], *fc),
    ]
    model = fb.ModelT()
    model.version, model.operatorCodes = 3, codes
    model.subgraphs, model.buffers = [graph] * subgraphs, buffers
    return bytes(flatbuffer_utils().convert_object_to_bytearray(model))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("op_profile") / "tiny.tflite"
    path.write_bytes(_tiny_tflite())
    return path


def _consistent(check: dict) -> None:
    """The verdict follows from the check's own numbers, and the tolerance is a real spread."""
    assert check["tolerance_ms"] > 0 and check["call_ms"] >= 0 and check["whole_ms"] > 0
    estimate = check["sum_ms"] + check["call_ms"]
    assert check["within"] == (abs(estimate - check["whole_ms"]) <= check["tolerance_ms"])


def test_every_op_once_with_its_share_placement_and_partitions(tiny):
    result = tfcompress.benchmark(tiny, profile_ops=True, **FAST)
    (row,) = result.rows
    profile = row.op_profile
    assert [op["index"] for op in profile["ops"]] == [0, 1, 2]  # each op of the file, once
    assert [op["op"] for op in profile["ops"]] == ["FULLY_CONNECTED", "CUMSUM", "FULLY_CONNECTED"]
    assert [op["output"] for op in profile["ops"]] == ["dense1", "cumsum", "y"]
    placements = [op["placement"] for op in profile["ops"]]
    assert placements == ["delegated", "fell back", "delegated"]  # XNNPACK has no CUMSUM
    assert [p["ops"] for p in profile["partitions"]] == [[0], [2]]
    assert math.isclose(sum(op["share"] for op in profile["ops"]), 1.0, abs_tol=1e-4)
    assert all(op["ms"] >= 0 for op in profile["ops"])
    assert profile["check"]["whole_ms"] == pytest.approx(row.latency.p50, rel=1e-3)
    _consistent(profile["check"])
    assert result.config.profile_ops is True
    text = str(result)
    assert "Per-op profile of tiny.tflite on cpu" in text
    assert "fell back from the delegate to built-in kernels: #1 CUMSUM" in text
    assert "peak MB" in text.splitlines()[0]


def test_without_xnnpack_every_op_runs_on_built_in_kernels(tiny):
    result = tfcompress.benchmark(
        tiny, profile_ops=True, backend_options={"cpu": {"use_xnnpack": False}}, **FAST
    )
    profile = result.rows[0].op_profile
    assert {op["placement"] for op in profile["ops"]} == {"built-in"}
    assert profile["partitions"] == []
    _consistent(profile["check"])


def test_profile_ops_json_shape_and_report(tiny, capsys, tmp_path):
    report = tmp_path / "report"
    argv = ["benchmark", str(tiny), "--profile-ops", "--json", "--report", str(report)]
    assert main([*argv, *FAST_FLAGS]) == 0
    payload = json.loads(capsys.readouterr().out)
    validate_report(payload)
    assert payload["config"]["profile_ops"] is True
    profile = payload["rows"][0]["op_profile"]
    assert set(profile) == {"method", "ops", "partitions", "check"}
    for op in profile["ops"]:
        assert set(op) == {"index", "op", "output", "ms", "spread_ms", "share", "placement"}
    assert set(profile["check"]) == {
        "sum_ms",
        "call_ms",
        "whole_ms",
        "tolerance_ms",
        "within",
        "untimed_ops",
    }
    assert "op_profile" not in (report / "benchmark.csv").read_text().splitlines()[0]
    written = json.loads((report / "benchmark.json").read_text())
    assert written["rows"][0]["op_profile"] == profile


def test_without_the_flag_rows_carry_no_profile(tiny):
    result = tfcompress.benchmark(tiny, **FAST)
    assert result.rows[0].op_profile is None
    assert "Per-op profile" not in str(result)


def test_profile_ops_without_the_cpu_backend_is_refused(tiny, capfd):
    with pytest.raises(InvalidInputError, match="add cpu to them"):
        tfcompress.BenchmarkConfig(backends=("onnxruntime",), profile_ops=True)
    with pytest.raises(InvalidInputError, match="profile_ops must be true or false"):
        tfcompress.BenchmarkConfig(profile_ops="yes")
    assert main(["benchmark", str(tiny), "--profile-ops", "--backends", "onnxruntime"]) == 2
    lines = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "--profile-ops" in lines[0] and "--backends" in lines[0]


def test_a_backend_without_a_per_op_profile_says_so():
    class Other:
        backend = "onnxruntime"

    with pytest.raises(OpProfileUnavailable, match="only LiteRT's cpu backend"):
        profile_runner(Other(), {"x": np.zeros((1, 8), np.float32)}, FAST, summarize([1e-3]))


def test_an_op_that_cannot_run_alone_is_named_and_leaves_no_verdict(tiny, monkeypatch):
    from tfcompress.bench import op_profile
    from tfcompress.models import load_model
    from tfcompress.runtime import create_runner

    real = op_profile._time_cut

    def refusing(cutter, ops, *args):
        if ops == [1]:
            raise RuntimeError("Node number 0 (CUMSUM) failed to prepare.")
        return real(cutter, ops, *args)

    monkeypatch.setattr(op_profile, "_time_cut", refusing)
    with create_runner(load_model(tiny), backend="cpu") as runner:
        feed = {"x": np.ones((1, WIDTH), np.float32)}
        whole = measure(runner.bind(feed["x"]), **FAST).latency
        profile = profile_runner(runner, feed, FAST, whole)
    cumsum = profile["ops"][1]
    assert cumsum["ms"] is None and "CUMSUM) failed to prepare" in cumsum["error"]
    assert math.isclose(sum(op["share"] for op in profile["ops"] if op["ms"] is not None), 1.0)
    assert profile["check"]["untimed_ops"] == 1 and profile["check"]["within"] is None


def test_a_model_with_control_flow_is_not_cut_op_by_op():
    from tfcompress.bench.op_profile import _Cutter

    with pytest.raises(OpProfileUnavailable, match="2 subgraphs"):
        _Cutter(_tiny_tflite(subgraphs=2))


@pytest.mark.device
def test_with_on_the_device_profiles_the_ops(tiny, tmp_path_factory):
    pytest.importorskip("distributed")
    from _device import Cluster

    cluster = Cluster(tmp_path_factory.mktemp("dask_logs"))
    try:
        started = cluster.start("pi-a")
        result = tfcompress.benchmark(tiny, profile_ops=True, on=started.address, **FAST)
    finally:
        cluster.stop()
    (row,) = result.rows
    assert row.device == "pi-a" and row.ok, row.status
    placements = [op["placement"] for op in row.op_profile["ops"]]
    assert placements == ["delegated", "fell back", "delegated"]
    _consistent(row.op_profile["check"])


def test_a_report_of_schema_2_3_is_still_read(tiny):
    report = tfcompress.benchmark(tiny, **FAST).to_dict()
    for row in report["rows"]:
        del row["op_profile"]
    validate_report({**report, "schema_version": "2.3"})


def test_a_float16_files_weight_dequantize_is_computed_at_load_not_an_error(tmp_path):
    """A float16 file's DEQUANTIZE of constant weights runs once when LiteRT prepares the
    model: it is a row of its own at 0 ms, not an op "not timed alone", so the sum has a verdict
    (a real float16 MobileNet gave some forty such error lines before)."""
    from ai_edge_litert import schema_py_generated as fb

    from tfcompress._compat.litert import flatbuffer_utils

    # WIDTH wide, as above: on a fast machine an 8-wide FULLY_CONNECTED measured 0 ms.
    weights = np.random.default_rng(0).standard_normal((WIDTH, WIDTH)).astype(np.float16)
    tensors = []
    for name, kind, buffer in (
        ("x", 0, 0),
        ("w16", fb.TensorType.FLOAT16, 1),
        ("w", 0, 0),
        ("y", 0, 0),
    ):
        made = fb.TensorT()
        made.name, made.shape, made.type, made.buffer = (
            name,
            [1, WIDTH] if name in "xy" else [WIDTH, WIDTH],
            kind,
            buffer,
        )
        tensors.append(made)
    stored = fb.BufferT()
    stored.data = np.frombuffer(weights.tobytes(), np.uint8)
    codes = []
    for builtin in (fb.BuiltinOperator.DEQUANTIZE, fb.BuiltinOperator.FULLY_CONNECTED):
        code = fb.OperatorCodeT()
        code.builtinCode, code.version, code.deprecatedBuiltinCode = builtin, 1, builtin
        codes.append(code)
    dequantize, dense = fb.OperatorT(), fb.OperatorT()
    dequantize.opcodeIndex, dequantize.inputs, dequantize.outputs = 0, [1], [2]
    dense.opcodeIndex, dense.inputs, dense.outputs = 1, [0, 2, -1], [3]
    dense.builtinOptionsType = fb.BuiltinOptions.FullyConnectedOptions
    dense.builtinOptions = fb.FullyConnectedOptionsT()
    graph = fb.SubGraphT()
    graph.tensors, graph.inputs, graph.outputs = tensors, [0], [3]
    graph.operators = [dequantize, dense]
    model = fb.ModelT()
    model.version, model.operatorCodes, model.subgraphs = 3, codes, [graph]
    model.buffers = [fb.BufferT(), stored]
    path = tmp_path / "fp16.tflite"
    path.write_bytes(bytes(flatbuffer_utils().convert_object_to_bytearray(model)))

    result = tfcompress.benchmark(path, profile_ops=True, **FAST)
    profile = result.rows[0].op_profile
    first, second = profile["ops"]
    assert (first["op"], first["placement"], first["ms"]) == ("DEQUANTIZE", "at load", 0.0)
    assert "error" not in first and second["op"] == "FULLY_CONNECTED" and second["ms"] > 0
    assert profile["check"]["untimed_ops"] == 0 and profile["check"]["within"] is not None
    _consistent(profile["check"])
    assert "not timed alone" not in str(result)
