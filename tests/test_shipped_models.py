"""Models as they ship: state tensors, scalar inputs, static batches, int8 ops that refuse
zeros, and a runtime that aborts, through `inspect`, `benchmark` and `gate` as users type them.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from _shared import kernel_atol
from _shipped_models import FRAME, LAYERS, UNITS, AbortingRunner, build

import tfcompress
from tfcompress.cli import main
from tfcompress.errors import InvalidDataError
from tfcompress.models import load_model, probe
from tfcompress.runtime import base as runtime_base
from tfcompress.runtime import create_runner

FAST = ["--runs", "3", "--min-seconds", "0", "--warmup-seconds", "0"]


@pytest.fixture(scope="module")
def files():
    return build()


@pytest.fixture
def aborting(monkeypatch):
    """The stand-in backend, registered for this test only (its worker imports it itself)."""
    monkeypatch.setitem(runtime_base.BACKENDS, "aborting", AbortingRunner)
    return "aborting"


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def test_inspect_shows_how_each_signature_is_fed(files, capsys):
    for name in ("vad_tflite", "vad_onnx", "vad_savedmodel"):
        assert main(["inspect", str(files[name])]) == 0
        out = capsys.readouterr().out
        assert "input  h (2, N, 16) float32  (batch at dimension 1)" in out
        assert "input  sr () float32  (scalar: one value per call, never batched)" in out
        assert "input  input (N, ?) float32\n" in out
    assert main(["inspect", str(files["rnn_tflite"]), "--json"]) == 0
    assert _json(capsys)["feeding"] == {
        "static_batch": 1,
        "inputs": {"frames": 0},
        "outputs": {"probs": 0},
    }
    assert main(["inspect", str(files["rnn_savedmodel"])]) == 0
    assert "batch: fixed at 1 by the signature" in capsys.readouterr().out


def test_benchmark_streaming_model_without_data_at_several_batches(files, capsys):
    # Before: the scalar sr got a batch dimension and ONNX Runtime's refusal was exit 3.
    argv = ["benchmark", str(files["vad_tflite"]), str(files["vad_onnx"])]
    argv += ["--backends", "cpu,onnxruntime", "--input-shape", "input=Nx64", "--batch-sizes", "1,2"]
    assert main([*argv, "--input-value", "sr=16000", "--json", *FAST]) == 0
    payload = _json(capsys)
    rows = payload["rows"]
    assert [(r["artifact"], r["batch"], r["status"]) for r in rows] == [
        ("vad.tflite", 1, "ok"),
        ("vad.tflite", 2, "ok"),
        ("vad.onnx", 1, "ok"),
        ("vad.onnx", 2, "ok"),
    ]
    assert all(r["backend_details"]["process"] == "worker" for r in rows)
    notes = "\n".join(payload["notes"])
    assert "batched in another dimension than the first: h (2, N, 16)" in notes
    assert "input sr (a scalar) was fed 16000 on every call (--input-value)" in notes
    # Without a value the scalar gets a seeded draw, and the notes say so.
    assert main([*argv, "--json", *FAST]) == 0
    assert "a seeded random draw: set it with --input-value sr=V" in str(_json(capsys)["notes"])


def test_benchmark_and_gate_streaming_model_with_data(files, capsys):
    data = str(files["vad_data"])
    argv = ["benchmark", str(files["vad_tflite"]), "--data", data, "--output", "output"]
    assert main([*argv, "--batch-sizes", "1,4", "--json", *FAST]) == 0
    payload = _json(capsys)
    assert payload["metric"] == "binary_accuracy" and payload["samples"] == 48
    assert {r["accuracy"] for r in payload["rows"]} == {1.0}
    assert "sr (a scalar) was fed 16000 on every call (from the data)" in str(payload["notes"])
    # With labels: SavedModel (TensorFlow) reference, LiteRT candidate.
    gate = ["gate", str(files["vad_savedmodel"]), str(files["vad_tflite"]), "--eval", data]
    assert main([*gate, "--json"]) == 0
    report = _json(capsys)
    checks = {(v["output"], v["metric"]): v for v in report["checks"]}
    assert set(checks) == {("output", "binary_accuracy"), ("hn", "snr")}
    assert checks[("hn", "snr")]["value"] > 60
    assert report["reference_backend"] == "tensorflow (SavedModel signature)"
    # Without labels, the scalar from --input-value; LiteRT reference, ONNX Runtime candidate.
    unlabelled = str(files["vad_unlabelled"])
    gate = ["gate", str(files["vad_tflite"]), str(files["vad_onnx"]), "--eval", unlabelled]
    assert main([*gate, "--input-value", "sr=16000"]) == 0
    out = capsys.readouterr().out
    assert "gate PASSED" in out and "hn      snr" in out and "output  snr" in out
    # ... and without it, the error names the scalar and the flag.
    assert main(gate) == 2
    err = capsys.readouterr().err
    assert "missing 'sr'" in err and "--input-value sr=V" in err


def test_data_in_the_wrong_layout_names_the_input_and_its_batch(files, tmp_path, capsys):
    with np.load(files["vad_data"]) as saved:
        arrays = dict(saved)
    bad = dict(arrays, h=np.moveaxis(arrays["h"], 1, 0))  # (N, 2, 16): batch first
    np.savez(tmp_path / "bad_h.npz", **bad)
    np.savez(tmp_path / "bad_sr.npz", **dict(arrays, sr=np.full(48, 16000.0, np.float32)))
    argv = ["gate", str(files["vad_tflite"]), str(files["vad_onnx"]), "--eval"]
    assert main([*argv, str(tmp_path / "bad_h.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "for input 'h' has shape (48, 2, 16) but the model expects (2, N, 16)" in err
    assert "the batch N is dimension 1" in err
    assert main([*argv, str(tmp_path / "bad_sr.npz")]) == 2
    err = capsys.readouterr().err
    assert "input 'sr' is a scalar (shape ()): the model takes one value per call" in err


def test_batch_dim_declares_a_state_whose_batch_the_signature_fixes(files, tmp_path, capsys):
    # A state exported at batch 1 everywhere: (2, 1, 16) next to a free (N, ?) input.
    import onnx

    model = onnx.load_from_string(files["vad_onnx"].read_bytes())
    for value in (*model.graph.input, *model.graph.output):
        if value.name in {"h", "hn"}:
            value.type.tensor_type.shape.dim[1].ClearField("dim_param")
            value.type.tensor_type.shape.dim[1].dim_value = 1
    fixed = tmp_path / "vad_fixed_state.onnx"
    fixed.write_bytes(model.SerializeToString())
    assert main(["inspect", str(fixed)]) == 0
    assert "input  h (2, 1, 16) float32\n" in capsys.readouterr().out  # no batch it can see
    argv = ["benchmark", str(fixed), "--backends", "onnxruntime", "--input-shape", "input=Nx64"]
    assert main([*argv, "--batch-sizes", "1", "--batch-dim", "h=1", "--json", *FAST]) == 0
    row = _json(capsys)["rows"][0]
    assert row["status"] == "ok" and row["backend_details"]["static_batch"] == 1
    assert main([*argv, "--batch-dim", "h=3"]) == 2
    assert "input 'h' has 3 dimension(s) (2, 1, 16); give one from 0 to 2" in (
        capsys.readouterr().err
    )


def test_static_batch_rnn_is_fed_one_sample_at_a_time(files, capsys):
    from tfcompress.runtime.keras import tensorflow_threads

    threads = str(tensorflow_threads()[0])  # the one count TensorFlow runs in this process
    argv = ["benchmark", str(files["rnn_tflite"]), str(files["rnn_savedmodel"])]
    argv += ["--data", str(files["rnn_data"]), "--backends", "cpu,keras", "--threads", threads]
    assert main([*argv, "--batch-sizes", "1,8", "--json", *FAST]) == 0
    payload = _json(capsys)
    rows = [r for r in payload["rows"] if r["status"] == "ok"]
    assert [(r["artifact"], r["backend"]) for r in rows] == [
        ("rnn.tflite", "cpu"),
        ("rnn.tflite", "cpu"),
        ("rnn_savedmodel", "keras"),
        ("rnn_savedmodel", "keras"),
    ]
    details = [r["backend_details"] for r in rows]
    assert [(d["static_batch"], d["calls"]) for d in details] == [(1, 1), (1, 8)] * 2
    assert {r["accuracy"] for r in rows} == {1.0}
    assert "fixes the batch at 1, so each batch ran as calls of 1 sample(s)" in str(
        payload["notes"]
    )
    # Before: gate fed batches of 64 to the (1, 10, 8) SavedModel signature: exit 3.
    gate = ["gate", str(files["rnn_savedmodel"]), str(files["rnn_tflite"])]
    assert main([*gate, "--eval", str(files["rnn_data"]), "--json"]) == 0
    [verdict] = _json(capsys)["checks"]
    assert verdict["metric"] == "accuracy" and verdict["candidate_score"] == 1.0
    assert main([*gate, "--eval", str(files["rnn_unlabelled"])]) == 0
    assert "probs   agreement" in capsys.readouterr().out


def test_int8_model_whose_div_refuses_zeros_is_not_called_corrupt(files, tmp_path, capsys):
    # The file quantize wrote: its DIV fails on all-zero input, and runs on real frames.
    probe.clear_cache()
    model = load_model(files["norm_int8"])  # before: "truncated or corrupt (or crafted)"
    assert "Node number 3 (DIV)" in probe.zeros_refused(model.content, "tflite")
    data = str(files["norm_data"])
    gate = ["gate", str(files["norm_keras"]), str(files["norm_int8"]), "--eval"]
    assert main([*gate, data, "--max-drop", "0.05", "--mode", "tolerant"]) == 0
    assert "gate PASSED" in capsys.readouterr().out
    unlabelled = tmp_path / "frames.npz"
    with np.load(files["norm_data"]) as saved:
        np.savez(unlabelled, audio=saved["audio"])
    assert main([*gate, str(unlabelled), "--metric", "snr", "--min-snr", "10"]) == 0
    capsys.readouterr()
    assert main(["benchmark", str(files["norm_int8"]), "--data", data, "--json", *FAST]) == 0
    assert _json(capsys)["rows"][0]["accuracy"] > 0.9
    assert main(["inspect", str(files["norm_int8"])]) == 0
    # In this process it runs only after a child ran it on the real inputs; silence in the
    # data is the runtime refusing those values (exit 2), not a corrupt file.
    with np.load(files["norm_data"]) as saved:
        frames = saved["audio"][:4].copy()
    with create_runner(model) as runner:
        assert runner.predict(frames).shape == (4, 4)
    probe.clear_cache()
    load_model(files["norm_int8"])
    frames[1] = 0.0
    with (
        create_runner(model) as runner,
        pytest.raises(InvalidDataError, match=r"DIV.*file is fine"),
    ):
        runner.predict(frames)


def test_a_runtime_that_aborts_is_an_error_row_and_the_run_goes_on(files, aborting, capsys):
    argv = ["benchmark", str(files["vad_tflite"]), "--backends", f"{aborting},cpu"]
    argv += ["--input-shape", "input=Nx64", "--batch-sizes", "1,2", "--json", *FAST]
    assert main(argv) == 2  # a row could not be measured: the documented exit code
    captured = capsys.readouterr()
    rows = json.loads(captured.out)["rows"]
    crashed = [r for r in rows if r["backend"] == aborting]
    assert [r["batch"] for r in crashed] == [1, 2]  # each batch in a fresh worker
    for row in crashed:
        assert "crashed while timing the model" in row["status"]
        assert "killed by SIGABRT" in row["status"]
    assert [r["status"] for r in rows if r["backend"] == "cpu"] == ["ok", "ok"]
    assert "2 of 4 rows could not be measured" in captured.err
    # The gate runs the candidate in a worker too: the abort is exit 2 with its signal (the
    # static batch of 1 makes one invoke per sample).
    gate = ["gate", str(files["rnn_tflite"]), str(files["rnn_tflite"])]
    assert main([*gate, "--eval", str(files["rnn_data"]), "--backend", aborting]) == 2
    err = capsys.readouterr().err
    assert "crashed while running the model" in err and "SIGABRT" in err


def test_a_measurement_past_its_time_limit_is_an_error_row(tmp_path):
    # An ONNX Loop whose trip count comes from the input: on random values it would run
    # for hours; within the limit it is an error row, and the worker is stopped.
    path = tmp_path / "loop.onnx"
    path.write_bytes(_exploding_loop())
    result = tfcompress.benchmark(
        [path], backends=["onnxruntime"], runs=3, min_seconds=0, warmup_seconds=0, timeout=3
    )
    [row] = result.rows
    assert row.status.startswith("error: loop.onnx: ONNX Runtime (onnxruntime backend) did not")
    assert "within 3 s and was stopped" in row.status


def test_the_entry_point_feeds_a_streaming_model(files):
    done = subprocess.run(
        [
            *(sys.executable, "-m", "tfcompress", "benchmark", str(files["vad_tflite"])),
            *("--input-shape", "input=Nx64", "--input-value", "sr=8000", "--batch-sizes", "3"),
            *("--json", *FAST),
        ],
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    [row] = json.loads(done.stdout)["rows"]
    assert row["status"] == "ok" and row["batch"] == 3


def _exploding_loop() -> bytes:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    body = helper.make_graph(
        [
            helper.make_node("Add", ["acc_in", "one"], ["acc_out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [1]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [1]),
        ],
        [numpy_helper.from_array(np.ones(1, np.float32), "one")],
    )
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
        helper.make_node("Mul", ["total", "scale"], ["big"]),
        helper.make_node("Cast", ["big"], ["trips"], to=TensorProto.INT64),
        helper.make_node("Loop", ["trips", "keep", "start"], ["y"], body=body),
    ]
    graph = helper.make_graph(
        nodes,
        "exploding_loop",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        [
            numpy_helper.from_array(np.float32(1e12), "scale"),
            numpy_helper.from_array(np.array(True), "keep"),
            numpy_helper.from_array(np.zeros(1, np.float32), "start"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def test_state_outputs_come_back_batch_first_and_match_across_runtimes(files):
    with np.load(files["vad_data"]) as saved:
        feed = {
            "input": saved["input"][:5],
            "sr": saved["sr"],
            "h": np.moveaxis(saved["h"], 1, 0)[:5],
        }
    outputs = {}
    for name in ("vad_tflite", "vad_onnx"):
        with create_runner(load_model(files[name])) as runner:
            outputs[name] = runner.run(feed, batch_size=2)  # 3 calls, the last one short
    assert outputs["vad_tflite"]["hn"].shape == (5, LAYERS, UNITS)
    expected = outputs["vad_onnx"]["hn"]  # a mean over FRAME samples, then one product
    atol = kernel_atol(expected, terms=FRAME + 1)
    np.testing.assert_allclose(outputs["vad_tflite"]["hn"], expected, atol=atol)


def test_a_backend_no_worker_can_import_is_measured_here_and_says_so(files, monkeypatch):
    from tfcompress.runtime.litert import LiteRTRunner

    class LocalRunner(LiteRTRunner):  # defined in a function: a worker cannot unpickle it
        backend = "local-cpu"

    monkeypatch.setitem(runtime_base.BACKENDS, "local-cpu", LocalRunner)
    result = tfcompress.benchmark(
        files["rnn_tflite"], backends=["local-cpu"], runs=3, min_seconds=0, warmup_seconds=0
    )
    [row] = result.rows
    assert row.ok and row.details["process"] == "in-process"
    assert any("ran in this process (local-cpu)" in note for note in result.notes)


def test_quantize_and_compress_read_a_stateful_model_as_benchmark_does(files, tmp_path, capsys):
    # Before: "the input arrays hold different numbers of samples ('input': 48, 'h': 2)".
    from tfcompress.compression.config import CompressConfig
    from tfcompress.quantization.payoff import payoff_failure

    result = tfcompress.quantize(
        str(files["vad_savedmodel"]), recipe="int8", representative_data=str(files["vad_data"])
    )
    assert result.calibration_samples == 48
    # LiteRT Quantizer calibrates the .tflite in its own layout too (the state's batch in the
    # middle, the scalar from --input-value).
    litert = tfcompress.quantize(
        str(files["vad_tflite"]),
        representative_data=str(files["vad_unlabelled"]),
        input_values={"sr": 16000},
    )
    assert litert.calibration_samples == 48 and litert.config.input_values == {"sr": 16000.0}
    # A 16-unit model: its int8 file carries more quantization parameters than weights.
    assert any("larger than its float32 input" in w for w in result.warnings)
    # compress never returns a post-training file that quantized nothing (nor a larger one).
    assert payoff_failure("ptq", {"name": "int8"}, result.model_content) is None
    why = payoff_failure("ptq", {"recipe": {"name": "int8"}}, result.reference_content)
    assert why is not None and "nothing in the int8 file was quantized" in why
    config = CompressConfig(batch_dims={"h": 1}, input_values={"sr": 16000})
    assert CompressConfig.from_dict(config.to_dict()) == config
    argv = ["compress", str(files["vad_savedmodel"]), "--data", str(files["vad_unlabelled"])]
    argv += ["--eval", str(files["vad_unlabelled"]), "--out", str(tmp_path / "never.tflite")]
    assert main([*argv, "--input-value", "sr=16000", "--batch-dim", "h=3"]) == 2
    assert "input 'h' has 3 dimension(s)" in capsys.readouterr().err


def test_methods_on_a_stateful_model_are_refused_when_asked_and_said_when_skipped(
    files, tmp_path, capsys
):
    # The methods score batch-first samples; this model's state has its batch second.
    from tfcompress.errors import UnsupportedModelError
    from tfcompress.testing.config import GateConfig

    model, data = str(files["vad_savedmodel"]), str(files["vad_data"])
    gated = tfcompress.quantize(
        model, representative_data=data, eval_data=data, gate=GateConfig(thresholds={"min_snr": 99})
    )
    assert gated.methods is None  # nothing tried, and the result says so
    (note,) = [n for n in gated.notes if n.startswith("post-training methods not tried")]
    assert "input h (2, N, 16): batch at dimension 1" in note and "not chosen by the gate" in note
    for methods in ("auto", ["bias-correction"]):  # asked for: refused, auto included
        with pytest.raises(UnsupportedModelError, match="drop --methods"):
            tfcompress.quantize(model, representative_data=data, eval_data=data, methods=methods)
    # The CLI: the gate still judges plain int8 afterwards (exit 1), and --methods auto is
    # one line, exit 2, no file.
    out = tmp_path / "q.tflite"
    argv = ["quantize", model, "--data", data, "--eval", data, "--out", str(out)]
    assert main([*argv, "--min-snr", "99"]) == 1
    assert "post-training methods not tried" in capsys.readouterr().out
    out.unlink()
    assert main([*argv, "--methods", "auto"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is fed otherwise" in err and not out.exists()
    # compress leaves its methods rung out, and says why in its stop reason.
    result = tfcompress.compress(
        model, representative_data=data, eval_data=data, min_snr=99, measure_latency=False
    )
    names = [a.name for a in result.attempts]
    assert "int8" in names and "int8-methods" not in names
    assert "int8-methods left out: the post-training methods score batch-first" in (
        result.stop_reason
    )
