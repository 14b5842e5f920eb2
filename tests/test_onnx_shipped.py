"""Stateful ONNX models and the ONNX files other exporters write, through quantize and gate.

Tiny models built with the ``onnx`` helper API (no TensorFlow): the streaming VAD of
``_shipped_models`` (``input (N, ?)``, scalar ``sr``, state ``h (2, N, 16)``), a copy whose
state output is made inside ``If`` subgraphs (shape ``(?, ?, ?)``, as Silero's exports
declare it), a file exported at a static batch of 1 (ddddocr), a Paddle2ONNX file whose
batch is ``dim_value -1`` and one whose weights are ``Constant`` nodes (PaddleOCR).
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from _shipped_models import LAYERS, UNITS, _vad_onnx
from onnx import TensorProto, helper, numpy_helper

import tfcompress
from tfcompress.cli import main
from tfcompress.errors import InvalidInputError
from tfcompress.quantization.config import PTQConfig

SAMPLES = 72  # calls of 64 and 8: outputs are joined across calls of different sizes


def _save(tmp_path, name, graph, opset=13) -> str:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = tmp_path / name
    path.write_bytes(model.SerializeToString())
    return str(path)


def _if_state(content: bytes) -> bytes:
    """The VAD with its state made inside If branches, whose shape nothing can infer."""
    model = onnx.load_from_string(content)
    graph = model.graph

    def branch(tag: str) -> onnx.GraphProto:
        nodes = [
            helper.make_node("Tanh", ["pre"], [f"t_{tag}"]),
            helper.make_node("Shape", ["pre"], [f"s_{tag}"]),
            helper.make_node("Reshape", [f"t_{tag}", f"s_{tag}"], [f"hn_{tag}"]),
        ]
        out = helper.make_tensor_value_info(f"hn_{tag}", TensorProto.FLOAT, [None] * 3)
        return helper.make_graph(nodes, tag, [], [out])

    nodes = [n for n in graph.node if n.op_type != "Tanh"]
    at = next(i for i, n in enumerate(nodes) if n.op_type == "Gather")
    made = [
        helper.make_node("Equal", ["sr", "rate"], ["is16k"]),
        helper.make_node(
            "If", ["is16k"], ["hn"], then_branch=branch("then"), else_branch=branch("else")
        ),
    ]
    del graph.node[:]
    graph.node.extend([*nodes[:at], *made, *nodes[at:]])
    for value in graph.output:
        if value.name == "hn":  # (?, ?, ?): no value, no name in any dimension
            value.type.tensor_type.ClearField("shape")
            for _ in range(3):
                value.type.tensor_type.shape.dim.add()
    onnx.checker.check_model(model)
    return model.SerializeToString()


@pytest.fixture(scope="module")
def vad(tmp_path_factory):
    root = tmp_path_factory.mktemp("vad")
    (root / "vad.onnx").write_bytes(_vad_onnx())
    (root / "vad_if.onnx").write_bytes(_if_state(_vad_onnx()))
    rng = np.random.default_rng(0)
    audio = rng.normal(size=(SAMPLES, 64)).astype(np.float32)
    state = rng.normal(0.0, 0.3, (LAYERS, SAMPLES, UNITS)).astype(np.float32)
    np.savez(root / "vad.npz", input=audio, sr=np.float32(16000), h=state)
    np.savez(root / "vad_nosr.npz", input=audio, h=state)  # sr from --input-value
    return root


def test_quantize_calibrates_a_stateful_model_laid_out_as_benchmark_reads_it(vad, capsys):
    # Before: "the input arrays hold different numbers of samples ('input': 200, 'h': 2)".
    out = str(vad / "int8.onnx")
    argv = ["quantize", str(vad / "vad.onnx"), "--format", "onnx", "--out", out, "--force"]
    assert main([*argv, "--data", str(vad / "vad.npz"), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["calibration_samples"] == SAMPLES
    # The scalar from --input-value, the state's batch declared, --eval in the same layout.
    nosr = str(vad / "vad_nosr.npz")
    flags = ["--data", nosr, "--input-value", "sr=16000", "--batch-dim", "h=1"]
    assert main([*argv, *flags, "--eval", nosr, "--min-snr", "20", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["config"]["input_values"] == {"sr": 16000.0}
    assert payload["config"]["batch_dims"] == {"h": 1}
    assert payload["gate"]["passed"] is True
    # Without the value the error names the scalar; a bad declaration is one line, exit 2.
    assert main([*argv, "--data", nosr]) == 2
    assert "sr" in capsys.readouterr().err
    assert main([*argv, "--data", nosr, "--batch-dim", "h=3"]) == 2
    assert "input 'h' has 3 dimension(s)" in capsys.readouterr().err


def test_feeding_lives_in_the_config_and_is_checked_there(vad):
    config = PTQConfig(recipe="int8", batch_dims={"h": 1}, input_values={"sr": 16000})
    assert PTQConfig.from_dict(config.to_dict()) == config
    with pytest.raises(InvalidInputError, match="batch_dims\\['h'\\] must be a dimension"):
        PTQConfig(recipe="int8", batch_dims={"h": -1})
    with pytest.raises(InvalidInputError, match="input_values\\['sr'\\] must be a finite"):
        PTQConfig.from_options(input_values={"sr": float("nan")})
    result = tfcompress.quantize(
        str(vad / "vad.onnx"),
        format="onnx",
        representative_data=str(vad / "vad_nosr.npz"),
        input_values={"sr": 16000},
    )
    assert result.config.input_values == {"sr": 16000.0} and result.calibration_samples == SAMPLES


def test_gate_joins_a_state_output_along_its_batch(vad, capsys):
    # Before: exit 3 (numpy could not concatenate (2, 64, 16) and (2, 8, 16) on axis 0).
    data = str(vad / "vad.npz")
    for reference, candidate in (("vad.onnx", "vad_if.onnx"), ("vad_if.onnx", "vad_if.onnx")):
        argv = ["gate", str(vad / reference), str(vad / candidate), "--eval", data]
        assert main([*argv, "--min-snr", "60", "--json"]) == 0
        checks = {c["output"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
        assert checks["hn"]["value"] is None  # +inf dB: the same state, joined alike

    # Calls of 2 samples cannot show where a (2, N, 16) state's batch is: the reference's
    # layout places the candidate's, a declaration places the reference's own.
    def hn_snr(reference: str, candidate: str, **dims) -> float:
        models = {"ref": str(vad / reference), "cand": str(vad / candidate)}
        result = tfcompress.evaluate(models, data, batch_size=2, **dims)
        return result.rows[1].scores[1]

    assert hn_snr("vad.onnx", "vad_if.onnx") == float("inf")
    assert hn_snr("vad_if.onnx", "vad.onnx", batch_dims={"hn": 1}) == float("inf")
    assert hn_snr("vad_if.onnx", "vad.onnx") < 60  # undeclared: joined on the wrong axis
    argv = ["gate", str(vad / "vad.onnx"), str(vad / "vad_if.onnx"), "--eval", data]
    assert main([*argv, "--batch-dim", "nothing=1"]) == 2
    assert "no such input or output" in capsys.readouterr().err


def test_static_batch_onnx_calibrates_in_calls_of_its_batch(tmp_path, capsys):
    # ddddocr: batch fixed at 1 and a Reshape to (1, 16); calibration batches of 8 failed.
    weights = np.random.default_rng(1).normal(size=(16, 4)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Reshape", ["x", "shape"], ["flat"]),
            helper.make_node("MatMul", ["flat", "w"], ["y"]),
        ],
        "fixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [
            numpy_helper.from_array(weights, "w"),
            numpy_helper.from_array(np.array([1, 16], np.int64), "shape"),
        ],
    )
    model = _save(tmp_path, "fixed.onnx", graph)
    np.save(tmp_path / "x.npy", np.random.default_rng(2).normal(size=(20, 4, 4)).astype("f4"))
    argv = ["quantize", model, "--format", "onnx", "--data", str(tmp_path / "x.npy")]
    assert main([*argv, "--out", str(tmp_path / "q.onnx"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["calibration_samples"] == 20
    # The batch declared free but fixed inside (a Reshape to 1): ONNX Runtime's refusal
    # during calibration is one line naming the step, not an internal error.
    for value in (*graph.input, *graph.output):
        value.type.tensor_type.shape.dim[0].ClearField("dim_value")
        value.type.tensor_type.shape.dim[0].dim_param = "N"
    model = _save(tmp_path, "hidden.onnx", graph)
    argv = ["quantize", model, "--format", "onnx", "--data", str(tmp_path / "x.npy")]
    assert main([*argv, "--out", str(tmp_path / "h.onnx")]) == 2
    assert "ONNX Runtime could not apply static int8 quantization" in capsys.readouterr().err


def test_dim_value_minus_one_is_a_dynamic_dimension(tmp_path, capsys):
    # Paddle2ONNX writes its batch as dim_value -1; ONNX Runtime runs the file.
    weights = np.random.default_rng(3).normal(size=(8, 3)).astype(np.float32)

    def graph(dim: int) -> onnx.GraphProto:
        return helper.make_graph(
            [helper.make_node("MatMul", ["x", "w"], ["y"])],
            "paddle",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [dim, 8])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [dim, 3])],
            [numpy_helper.from_array(weights, "w")],
        )

    def write(name: str, dim: int):
        made = helper.make_model(graph(dim), opset_imports=[helper.make_opsetid("", 13)])
        made.ir_version = 8
        (tmp_path / name).write_bytes(made.SerializeToString())
        return tmp_path / name

    model = write("paddle.onnx", -1)
    assert main(["inspect", str(model)]) == 0
    assert "input  x (N, 8) float32" in capsys.readouterr().out
    fast = ["--runs", "3", "--min-seconds", "0", "--warmup-seconds", "0"]
    argv = ["benchmark", str(model), "--backends", "onnxruntime", "--batch-sizes", "1,4", "--json"]
    assert main([*argv, *fast]) == 0
    assert {r["status"] for r in json.loads(capsys.readouterr().out)["rows"]} == {"ok"}
    np.save(tmp_path / "x.npy", np.ones((10, 8), np.float32))
    argv = ["quantize", str(model), "--format", "onnx", "--data", str(tmp_path / "x.npy")]
    assert main([*argv, "--out", str(tmp_path / "q.onnx")]) == 0
    capsys.readouterr()
    crafted = write("crafted.onnx", -2)  # only -1 is ever written: -2 is not a shape
    assert main(["inspect", str(crafted)]) == 2
    assert "corrupt or crafted" in capsys.readouterr().err


def test_constant_node_weights_are_weights_and_are_quantized(tmp_path, capsys):
    rng = np.random.default_rng(4)
    weights = numpy_helper.from_array(rng.normal(size=(64, 64)).astype(np.float32))
    graph = helper.make_graph(
        [
            helper.make_node("Constant", [], ["w"], value=weights),
            helper.make_node("MatMul", ["x", "w"], ["y"]),
        ],
        "paddleocr",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 64])],
    )
    model = _save(tmp_path, "const.onnx", graph)
    assert main(["inspect", model]) == 0
    assert "weights: float32 1 tensor 16,384 bytes" in capsys.readouterr().out
    np.save(tmp_path / "x.npy", rng.normal(size=(16, 64)).astype(np.float32))
    argv = ["quantize", model, "--format", "onnx", "--data", str(tmp_path / "x.npy")]
    assert main([*argv, "--out", str(tmp_path / "q.onnx"), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["size_ratio"] < 0.5 and payload["warnings"] == []


def test_a_file_larger_than_its_input_or_quantizing_nothing_is_a_warning(tmp_path, capsys):
    # The weighted op sits inside If branches: ONNX Runtime's quantizer leaves it float.
    weights = np.random.default_rng(5).normal(size=(32, 32)).astype(np.float32)

    def branch(tag: str) -> onnx.GraphProto:
        out = helper.make_tensor_value_info(f"y_{tag}", TensorProto.FLOAT, ["N", 32])
        return helper.make_graph(
            [helper.make_node("MatMul", ["x", "w"], [f"y_{tag}"])], tag, [], [out]
        )

    graph = helper.make_graph(
        [
            helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
            helper.make_node("Greater", ["total", "zero"], ["positive"]),
            helper.make_node(
                "If", ["positive"], ["y"], then_branch=branch("a"), else_branch=branch("b")
            ),
        ],
        "lstm_in_if",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 32])],
        [numpy_helper.from_array(weights, "w"), numpy_helper.from_array(np.float32(0), "zero")],
    )
    model = _save(tmp_path, "if.onnx", graph)
    argv = ["quantize", model, "--format", "onnx", "--recipe", "dynamic", "--json"]
    assert main([*argv, "--out", str(tmp_path / "q.onnx")]) == 0
    captured = capsys.readouterr()
    warnings = json.loads(captured.out)["warnings"]
    assert any("nothing in the dynamic file was quantized" in w for w in warnings)
    assert any("inside If/Loop subgraphs" in w for w in warnings)
    assert "WARNING" in captured.err and "nothing in the dynamic file" in captured.err


def test_outputs_that_cannot_be_joined_are_one_line_not_an_internal_error():
    from tfcompress.errors import InvalidDataError
    from tfcompress.models.signature import ModelSignature, TensorSpec
    from tfcompress.runtime.base import Runner

    class Ragged(Runner):  # a padded sequence whose length depends on the call
        backend = "ragged"

        def __init__(self) -> None:
            x, y = TensorSpec((None, 4), name="x"), TensorSpec((None, None), name="y")
            self.signature = ModelSignature((x,), (y,))

        def predict_batch(self, feed):
            return {"y": np.zeros((len(feed["x"]), len(feed["x"]) + 1), np.float32)}

    with pytest.raises(InvalidDataError, match="'y' came back from successive calls as"):
        Ragged().run(np.zeros((10, 4), np.float32), batch_size=8)
    # A state of (?, ?, ?) is placed where the call's samples are, and joined there.
    state = {"s": TensorSpec((None, None, None), name="s")}

    class State(Ragged):
        def __init__(self) -> None:
            super().__init__()
            self.signature = ModelSignature(self.signature.inputs, (state["s"],))

        def predict_batch(self, feed):
            rows = feed["x"][:, 0]
            return {"s": np.broadcast_to(rows[None, :, None], (2, len(rows), 3)).copy()}

    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    out = State().run(x, batch_size=8)["s"]
    assert out.shape == (10, 2, 3) and (out[:, 0, 0] == x[:, 0]).all()


def _conv_file(tmp_path, opset: int) -> str:
    """A Conv at an opset below 13, as Paddle2ONNX and keras2onnx write them."""
    weights = np.random.default_rng(6).normal(size=(8, 1, 3, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])],
        "old_opset",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 6, 6])],
        [numpy_helper.from_array(weights, "w")],
    )
    return _save(tmp_path, f"opset{opset}.onnx", graph, opset=opset)


@pytest.mark.parametrize("opset", [11, 12])
def test_opset_below_13_is_upgraded_for_per_channel_int8(tmp_path, capsys, opset):
    # DequantizeLinear has no axis before opset 13: ONNX Runtime's per-channel output did not
    # load ("Unrecognized attribute: axis") and the command named no fix.
    model = _conv_file(tmp_path, opset)
    given = (tmp_path / f"opset{opset}.onnx").read_bytes()
    np.save(tmp_path / "x.npy", np.random.default_rng(7).normal(size=(12, 1, 8, 8)).astype("f4"))
    argv = ["quantize", model, "--data", str(tmp_path / "x.npy"), "--json"]  # format from .onnx
    assert main([*argv, "--out", str(tmp_path / "q.onnx")]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["format"] == "onnx" and payload["recipe"]["per_channel"] is True
    assert f"opset {opset} upgraded to 13" in payload["warnings"][0]
    assert (tmp_path / f"opset{opset}.onnx").read_bytes() == given  # the input is untouched
    upgraded = onnx.load(str(tmp_path / "q.onnx"))
    assert any(o.domain in ("", "ai.onnx") and o.version >= 13 for o in upgraded.opset_import)


def test_an_opset_that_cannot_be_upgraded_is_quantized_per_tensor(tmp_path, monkeypatch):
    from onnx import version_converter

    def refuse(model, version):
        raise version_converter.ConvertError("no adapter for this op")

    monkeypatch.setattr(version_converter, "convert_version", refuse)
    x = np.random.default_rng(8).normal(size=(12, 1, 8, 8)).astype("f4")
    result = tfcompress.quantize(_conv_file(tmp_path, 11), format="onnx", representative_data=x)
    assert result.recipe.per_channel is False
    assert "weights quantized per tensor" in result.warnings[0]
    assert "no adapter for this op" in result.warnings[0]


def test_an_onnx_model_is_quantized_to_onnx_and_compress_refuses_it_in_one_line(tmp_path, capsys):
    model = _conv_file(tmp_path, 13)
    np.save(tmp_path / "x.npy", np.zeros((4, 1, 8, 8), np.float32))
    data = ["--data", str(tmp_path / "x.npy")]
    assert main(["quantize", model, *data, "--out", str(tmp_path / "q.tflite")]) == 2
    assert "name --out with .onnx" in capsys.readouterr().err
    assert main(["quantize", model, "--format", "tflite", *data, "--out", "q.onnx"]) == 2
    assert "--format onnx" in capsys.readouterr().err
    with pytest.raises(InvalidInputError, match="is an ONNX model"):
        tfcompress.quantize(model, representative_data=tmp_path / "x.npy")
    argv = ["compress", model, *data, "--eval", str(tmp_path / "x.npy"), "--min-snr", "1"]
    code = main([*argv, "--out", str(tmp_path / "c.onnx")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "quantize MODEL.onnx --format onnx" in err
    # the user's own gate (a label-free --min-snr), not a --max-drop that needs labels
    assert "--min-snr 1 --out" in err and "--max-drop" not in err


def test_calibration_out_of_memory_at_a_batch_retries_one_sample_per_run(tmp_path, monkeypatch):
    # DNSMOS (144,160 audio samples per input) ran out of the call's memory in runs of 8 and
    # the command stopped there; activations grow with the batch, so one sample per run fits.
    from tfcompress.errors import ResourceLimitError
    from tfcompress.targets.onnx import ort_quantize

    weights = np.random.default_rng(9).normal(size=(8, 1, 3, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"])],
        "long_input",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8, 6, 6])],
        [numpy_helper.from_array(weights, "w")],
    )
    real, batches = ort_quantize.calibrate_static, []

    def small_memory(model, feeds, **kwargs):
        batches.append(len(feeds[0]["x"]))
        if batches[-1] > 1:
            raise ResourceLimitError("ONNX Runtime ran out of memory running m (its Conv node)")
        return real(model, feeds, **kwargs)

    monkeypatch.setattr(ort_quantize, "calibrate_static", small_memory)
    monkeypatch.setenv("TFCOMPRESS_IN_PROCESS", "1")
    x = np.random.default_rng(10).normal(size=(12, 1, 8, 8)).astype("f4")
    result = tfcompress.quantize(
        _save(tmp_path, "long.onnx", graph), format="onnx", representative_data=x
    )
    assert batches == [ort_quantize.CALIBRATION_BATCH, 1]
    ops = {node.op_type for node in onnx.load_from_string(result.model_content).graph.node}
    assert "QuantizeLinear" in ops and result.calibration_samples == 12


def test_onnx_runtime_quantizes_under_short_names_and_the_file_keeps_the_given_names(tmp_path):
    # tf2onnx names (basic-pitch: a bias "conv1d_25;conv1d_25" shared by 16 Convs beside a
    # Conv output "conv1d_25;conv1d_252") met ONNX Runtime's own "<name><n>" copies of the
    # bias: its int8 file fed a Transpose the bias and did not load. Quantized under short
    # names, the file given back carries the model's names again, each defined once.
    weights = np.random.default_rng(11).normal(size=(4, 4, 3, 3)).astype(np.float32)
    bias = np.random.default_rng(12).normal(size=(4,)).astype(np.float32)
    names = ["m/conv1d_25;m/conv1d_252", "m/c1"]
    nodes = [helper.make_node("Conv", ["x", "w", "m/conv1d_25;m/conv1d_25"], [names[0]])]
    nodes += [helper.make_node("Conv", [names[0], "w", "m/conv1d_25;m/conv1d_25"], [names[1]])]
    nodes += [helper.make_node("Relu", [names[1]], ["y"])]
    graph = helper.make_graph(
        nodes,
        "tf2onnx_names",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 9, 9])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 5, 5])],
        [numpy_helper.from_array(weights, "w"), numpy_helper.from_array(bias, nodes[0].input[2])],
    )
    x = np.random.default_rng(13).normal(size=(16, 4, 9, 9)).astype("f4")
    result = tfcompress.quantize(
        _save(tmp_path, "names.onnx", graph), format="onnx", representative_data=x
    )
    quantized = onnx.load_from_string(result.model_content)
    outputs = [name for node in quantized.graph.node for name in node.output]
    assert names[0] in outputs and len(outputs) == len(set(outputs))
    every = {n for node in quantized.graph.node for n in (*node.input, *node.output)}
    # the model's own tensors keep their names; what ONNX Runtime added keeps short ones
    assert {"x", "y", names[0]} <= every and not any(
        n.startswith("m/") for n in every - {*names, nodes[0].input[2]}
    )
    assert {node.op_type for node in quantized.graph.node} >= {"QuantizeLinear", "Conv"}
    import onnxruntime

    session = onnxruntime.InferenceSession(result.model_content, providers=["CPUExecutionProvider"])
    assert session.run(None, {"x": x[:2]})[0].shape == (2, 4, 5, 5)  # it loads and runs
