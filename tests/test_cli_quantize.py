"""The quantize and inspect commands through main(argv), plus one real subprocess run."""

import json
import subprocess
import sys

import numpy as np
import pytest

import tfcompress
from tfcompress.cli import main
from tfcompress.models import TFLiteModel, load_model
from tfcompress.runtime import create_runner


def run_cli(capfd, *argv):
    code = main([str(a) for a in argv])
    captured = capfd.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("flavour", ["keras3", "tf_keras"])
def test_quantize_int8_with_eval_json(capfd, monkeypatch, tmp_path, model_files, flavour):
    from tfcompress.quantization.methods import apply

    # What the methods reach, whatever they cost: the bound has its own tests (test_auto_budget).
    monkeypatch.setattr(apply, "AUTO_BUDGET", float("inf"))
    out = tmp_path / f"{flavour}_int8.tflite"
    # --methods auto once; tf-keras gets the default, the converter's int8 (eval data alone
    # does not turn the methods on; they run in tests/test_ptq_methods*.py).
    plain = [] if flavour == "tf_keras" else ["--methods", "auto"]
    code, stdout, stderr = run_cli(
        capfd,
        "quantize",
        model_files[flavour],
        "--recipe",
        "int8",
        "--data",
        model_files["calib"],
        "--eval",
        model_files["test"],
        "--out",
        out,
        "--json",
        *plain,
    )
    assert code == 0, stderr
    report = json.loads(stdout)  # stdout holds exactly one JSON object
    assert report["recipe"]["name"] == "int8" and report["output"] == str(out)
    assert report["config"]["recipe"] == report["recipe"]  # the config that made the file
    assert report["size_bytes"] == out.stat().st_size
    assert report["size_ratio"] == pytest.approx(
        report["size_bytes"] / report["reference_size_bytes"], abs=1e-4
    )
    assert report["size_ratio"] <= 0.30
    assert report["accuracy_drop"] <= 0.01
    assert report["accuracy_drop"] == pytest.approx(
        report["reference_accuracy"] - report["accuracy"], abs=1e-6
    )
    with create_runner(load_model(out)) as runner:  # the LiteRT interpreter runs it
        assert runner.predict(np.zeros((2, 28, 28, 1), np.float32)).shape == (2, 10)
    if not plain:
        assert report["methods"] is None
        return
    # --methods auto: the methods are tried and the kept file's weakest output is never less
    # faithful than the converter's int8 on the eval data (docs/quantization.md).
    methods = report["methods"]
    assert methods["searched"] and methods["measured_on"] == "eval samples"
    (plain,) = methods["plain"]["fidelity"]
    kept = next((c for c in methods["candidates"] if c["methods"] == methods["kept"]), None)
    kept_fidelity = (kept or methods["plain"])["fidelity"][0]
    assert kept_fidelity["snr_db"] >= plain["snr_db"]
    # the same ops: within a few hundred bytes of flatbuffer bookkeeping of plain int8
    assert (
        abs(report["size_bytes"] - methods["plain"]["size_bytes"]) <= 0.002 * report["size_bytes"]
    )


def test_quantize_prints_a_table(capfd, tmp_path, model_files):
    code, stdout, _ = run_cli(
        capfd,
        "quantize",
        model_files["keras3"],
        "--recipe",
        "float16",
        "--eval",
        model_files["test"],
        "--out",
        tmp_path / "f16.tflite",
    )
    assert code == 0
    lines = stdout.splitlines()
    assert lines[0].split() == ["variant", "bytes", "ratio", "accuracy", "drop"]
    assert lines[2].startswith("float32") and lines[3].startswith("float16")


def _gate_run(capfd, tmp_path, model_files, calib, test, *options):
    out = tmp_path / f"gate{len(list(tmp_path.iterdir()))}.tflite"
    code, stdout, stderr = run_cli(
        capfd,
        "quantize",
        model_files["keras3"],
        "--data",
        calib,
        "--eval",
        test,
        "--out",
        out,
        "--json",
        "--methods",  # the gate is what these tests judge: on the converter's own int8
        "none",
        *options,
    )
    return code, json.loads(stdout), stderr, out


@pytest.fixture
def gate_inputs(tmp_path, model_files):
    calib = tmp_path / "bad_calib.npz"
    with np.load(model_files["calib"]) as data:
        np.savez(calib, x=data["x"] * 200.0)  # ranges 200x too wide: int8 loses the signal
    test = tmp_path / "small_test.npz"
    with np.load(model_files["test"]) as data:  # few samples: a wide interval
        np.savez(test, x=data["x"][:40], y=data["y"][:40])
    return calib, test


def test_max_drop_failure_exits_1_and_still_writes(capfd, tmp_path, model_files, gate_inputs):
    code, report, stderr, out = _gate_run(
        capfd, tmp_path, model_files, *gate_inputs, "--max-drop", "0.01"
    )
    assert code == 1
    assert report["passed"] is False and report["mode"] == "strict"  # gate's default
    gate = report["gate"]
    assert gate["passed"] is False and gate["mode"] == "strict" and gate["samples"] == 40
    (check,) = gate["checks"]  # one output, its metric chosen from the labels: accuracy
    assert check["metric"] == "accuracy" and check["threshold_name"] == "max_drop"
    assert check["threshold"] == 0.01 and "class ids" in check["chosen_because"]
    assert check["ci_low"] <= check["drop"] <= check["ci_high"]
    assert check["interval"] == "mcnemar"
    assert check["drop"] == pytest.approx(report["accuracy_drop"], abs=1e-6)
    assert "gate FAILED (strict)" in stderr and f"{out} was still written" in stderr
    assert out.stat().st_size == report["size_bytes"]


def test_max_drop_modes_are_the_gates(capfd, tmp_path, model_files, gate_inputs):
    _, strict, _, out = _gate_run(capfd, tmp_path, model_files, *gate_inputs, "--max-drop", "0")
    drop, ci_low = strict["gate"]["checks"][0]["drop"], strict["gate"]["checks"][0]["ci_low"]
    assert ci_low < drop  # 40 samples leave room between the bound and the estimate
    between = f"{(ci_low + drop) / 2:.6f}"
    code, tolerant, _, _ = _gate_run(
        capfd, tmp_path, model_files, *gate_inputs, "--max-drop", between, "--mode", "tolerant"
    )
    assert code == 0 and tolerant["passed"] is True and tolerant["gate"]["mode"] == "tolerant"
    code, proven, _, _ = _gate_run(
        capfd, tmp_path, model_files, *gate_inputs, "--max-drop", between, "--mode", "proven"
    )
    assert code == 1 and proven["passed"] is False
    # the same verdict as `tfcompress gate` / assert_accuracy_drop on the same two files
    from tfcompress.testing.gates import check_accuracy_drop

    reference = tfcompress.quantize(
        load_model(model_files["keras3"]), recipe="float32"
    ).reference_content
    verdict = check_accuracy_drop(
        reference, out, gate_inputs[1], max_drop=float(between), mode="tolerant"
    )
    assert verdict.passed is True
    check = tolerant["gate"]["checks"][0]
    # the JSON keeps 6 significant digits (GateReport.to_dict), so compare at that precision
    assert (verdict.drop, verdict.ci_low, verdict.ci_high) == pytest.approx(
        (check["drop"], check["ci_low"], check["ci_high"]), rel=5e-6, abs=1e-12
    )


def test_inspect_tflite_and_keras(capfd, tmp_path, model_files, int8_result):
    path = int8_result.save(tmp_path / "m.tflite")
    code, stdout, _ = run_cli(capfd, "inspect", path, "--json")
    info = json.loads(stdout)
    assert code == 0 and info["format"] == "tflite"
    assert info["inputs"][0]["dtype"] == "float32"
    assert info["op_histogram"]["CONV_2D"] == 2
    assert info["weight_bytes"] + info["graph_bytes"] == path.stat().st_size
    code, stdout, _ = run_cli(capfd, "inspect", model_files["keras3"])
    assert code == 0 and "225,034 parameters" in stdout


def _bad_inputs(tmp_path, model_files, int8_result):
    random_tflite = tmp_path / "random.tflite"
    random_tflite.write_bytes(np.random.default_rng(1).bytes(2048))
    truncated = tmp_path / "truncated.tflite"
    truncated.write_bytes(int8_result.model_content[:5000])
    text_keras = tmp_path / "notes.keras"
    text_keras.write_text("hello")
    wrong_shape = tmp_path / "wrong.npz"
    np.savez(wrong_shape, x=np.zeros((8, 32, 32, 3), np.float32))
    nan_data = tmp_path / "nan.npz"
    np.savez(nan_data, x=np.full((8, 28, 28, 1), np.nan, np.float32))
    empty = tmp_path / "empty.npz"
    np.savez(empty, x=np.zeros((0, 28, 28, 1), np.float32))
    model, calib = model_files["keras3"], model_files["calib"]
    return {
        "missing model": (["quantize", tmp_path / "nope.keras", "--data", calib], "no such file"),
        "random tflite": (["inspect", random_tflite], "TFL3"),
        "truncated tflite": (["inspect", truncated], "truncated or corrupt"),
        "tflite to quantize": (["quantize", truncated, "--recipe", "dynamic"], "corrupt"),
        "text .keras": (["quantize", text_keras, "--data", calib], "not a Keras .keras file"),
        "wrong shape": (["quantize", model, "--data", wrong_shape], "expects (N, 28, 28, 1)"),
        "nan data": (["quantize", model, "--data", nan_data], "NaN or Inf"),
        "empty data": (["quantize", model, "--data", empty], "is empty"),
        "no calibration": (["quantize", model], "pass representative_data"),
        "missing data file": (["quantize", model, "--data", tmp_path / "x.npz"], "no such data"),
        "unknown recipe": (["quantize", model, "--recipe", "int4"], "invalid choice: 'int4'"),
        "bad --calibration-samples": (
            ["quantize", model, "--calibration-samples", "0"],
            "must be at least 1",
        ),
        "eval data of the wrong shape": (
            ["quantize", model, "--data", calib, "--eval", wrong_shape],
            "--eval data",
        ),
        "percent --max-drop": (
            ["quantize", model, "--eval", calib, "--max-drop", "5"],
            "did you mean 0.05",
        ),
        "--max-drop without --eval": (["quantize", model, "--max-drop", "0.01"], "needs --eval"),
        "--mode without --max-drop": (
            ["quantize", model, "--recipe", "dynamic", "--mode", "tolerant"],
            "pass --max-drop too",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing model",
        "random tflite",
        "truncated tflite",
        "tflite to quantize",
        "text .keras",
        "wrong shape",
        "nan data",
        "empty data",
        "no calibration",
        "missing data file",
        "unknown recipe",
        "bad --calibration-samples",
        "eval data of the wrong shape",
        "percent --max-drop",
        "--max-drop without --eval",
        "--mode without --max-drop",
    ],
)
def test_bad_input_is_one_line_exit_2_and_no_output(
    capfd, tmp_path, model_files, int8_result, case
):
    argv, message = _bad_inputs(tmp_path, model_files, int8_result)[case]
    out = tmp_path / "out.tflite"
    if argv[0] == "quantize":
        argv = [*argv, "--out", out]
    code, stdout, stderr = run_cli(capfd, *argv)
    assert code == 2
    assert stdout == ""
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert "error:" in stderr and message in stderr
    assert "Traceback" not in stderr
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


def test_eval_data_without_labels(capfd, tmp_path, model_files):
    unlabelled = tmp_path / "unlabelled.npz"
    np.savez(unlabelled, x=np.zeros((4, 28, 28, 1), np.float32))
    out = tmp_path / "o.tflite"
    code, stdout, stderr = run_cli(
        capfd,
        "quantize",
        model_files["keras3"],
        "--recipe",
        "dynamic",
        "--eval",
        unlabelled,
        "--out",
        out,
    )
    # Without labels the artifact is scored by fidelity to the float model, and says so.
    assert code == 0, stderr
    assert "agreement" in stdout and "no labels for output" in stdout and out.exists()


def test_existing_output_needs_force(capfd, tmp_path, model_files):
    out = tmp_path / "exists.tflite"
    out.write_bytes(b"keep me")
    args = ["quantize", model_files["keras3"], "--recipe", "dynamic", "--out", out]
    code, _, stderr = run_cli(capfd, *args)
    assert code == 2 and "already exists; pass --force" in stderr
    assert out.read_bytes() == b"keep me"
    code, _, _ = run_cli(capfd, *args, "--force")
    assert code == 0 and TFLiteModel(out.read_bytes()).size_bytes > 0


def test_output_may_not_overwrite_the_input(capfd, model_files):
    code, _, stderr = run_cli(
        capfd,
        "quantize",
        model_files["keras3"],
        "--recipe",
        "dynamic",
        "--out",
        model_files["keras3"],
        "--force",
    )
    assert code == 2 and "overwrite an input" in stderr
    assert load_model(model_files["keras3"]) is not None


def test_python_dash_m_subprocess(tmp_path, model_files):
    out = tmp_path / "sub.tflite"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tfcompress",
            "quantize",
            str(model_files["tf_keras"]),
            "--recipe",
            "int8",
            "--data",
            str(model_files["calib"]),
            "--out",
            str(out),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["size_bytes"] == out.stat().st_size
    assert "Traceback" not in done.stderr


# --- --format onnx and export-onnx -------------------------------------------------------


def test_quantize_format_onnx_with_eval_and_gate(capfd, tmp_path, model_files):
    out = tmp_path / "cnn_int8.onnx"
    code, stdout, stderr = run_cli(
        capfd,
        "quantize",
        model_files["keras3"],
        "--format",
        "onnx",
        "--recipe",
        "int8",
        "--calibration-method",
        "entropy",
        "--data",
        model_files["calib"],
        "--eval",
        model_files["test"],
        "--max-drop",
        "0.01",
        "--out",
        out,
        "--json",
    )
    assert code == 0, stderr
    report = json.loads(stdout)
    assert report["format"] == "onnx" and report["recipe"]["calibration_method"] == "entropy"
    assert report["config"] == {
        "recipe": report["recipe"],
        "seed": 0,
        "format": "onnx",
        "version": 1,
    }
    assert report["size_bytes"] == out.stat().st_size and report["size_ratio"] <= 0.35
    assert report["passed"] is True and report["accuracy_drop"] <= 0.01
    assert [row["backend"] for row in report["evaluation"]["rows"]] == ["onnxruntime"] * 2
    assert report["export_check"]["passed"] is True and report["recipe"]["opset"] == 17
    assert load_model(out).content[:1] == b"\x08"  # an ONNX ModelProto


def test_quantize_format_onnx_gate_failure_exits_1(capfd, tmp_path, model_files, gate_inputs):
    out = tmp_path / "gated.onnx"
    code, stdout, stderr = run_cli(
        capfd,
        "quantize",
        model_files["keras3"],
        "--format",
        "onnx",
        "--recipe",
        "dynamic",
        "--eval",
        gate_inputs[1],
        "--min-snr",
        "200",  # no int8 model is that close to float32
        "--out",
        out,
    )
    assert code == 1 and "gate FAILED" in stdout and out.exists()
    assert f"{out} was still written" in stderr


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--format", "onnx", "--recipe", "int16x8"], "'int16x8' is .tflite only"),
        (["--format", "onnx", "--input-type", "int8"], "applies to .tflite only"),
        (["--calibration-method", "entropy"], "--calibration-method applies to --format onnx"),
        (["--format", "onnx", "--opset", "30"], "choose 13 to 18"),
    ],
)
def test_onnx_refusals_are_one_line_exit_2(capfd, tmp_path, model_files, options, message):
    out = tmp_path / ("out.onnx" if "onnx" in options else "out.tflite")
    code, stdout, stderr = run_cli(
        capfd,
        "quantize",
        model_files["keras3"],
        "--data",
        model_files["calib"],
        *options,
        "--out",
        out,
    )
    assert code == 2 and stdout == "" and message in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert not out.exists()


def test_output_suffix_must_match_the_format(capfd, tmp_path, model_files):
    code, _, stderr = run_cli(
        capfd,
        "quantize",
        model_files["keras3"],
        "--recipe",
        "dynamic",
        "--format",
        "tflite",
        "--out",
        tmp_path / "m.onnx",
    )
    # Without --format an .onnx --out means ONNX; named, the contradiction is refused.
    assert code == 2 and "pass --format onnx" in stderr


def test_export_onnx_writes_a_verified_model(capfd, tmp_path, model_files):
    out = tmp_path / "cnn.onnx"
    code, stdout, stderr = run_cli(
        capfd,
        "export-onnx",
        model_files["keras3"],
        "--out",
        out,
        "--opset",
        "15",
        "--data",
        model_files["test"],
        "--json",
    )
    assert code == 0, stderr
    report = json.loads(stdout)
    assert report["output"] == str(out) and report["size_bytes"] == out.stat().st_size
    assert report["opset"] == 15 and report["verification"]["inputs"] == "data"
    assert report["verification"]["passed"] and report["verification"]["samples"] == 64
    with create_runner(load_model(out)) as runner:  # ONNX Runtime runs it
        assert runner.predict(np.zeros((2, 28, 28, 1), np.float32)).shape == (2, 10)


def test_export_onnx_of_an_unsupported_op_is_exit_2_and_no_output(capfd, tmp_path):
    import keras

    inputs = keras.Input((6,), name="x")
    outputs = keras.layers.Dense(2, activation="gelu", name="exact_gelu")(inputs)
    source = tmp_path / "gelu.keras"
    keras.Model(inputs, outputs).save(source)
    out = tmp_path / "gelu.onnx"
    code, stdout, stderr = run_cli(capfd, "export-onnx", source, "--out", out)
    assert code == 2 and stdout == ""
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert "tf2onnx cannot convert" in stderr and "Erfc" in stderr and "Traceback" not in stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gelu.keras"]  # no partial output


def test_seed_picks_the_calibration_subset_same_seed_same_bytes(capfd, tmp_path, model_files):
    """--seed reaches the config (and so the report); the same seed makes the same bytes."""
    runs = {}
    for name, chosen in (("a", 3), ("b", 3), ("c", 4)):
        out = tmp_path / f"{name}.tflite"
        code, stdout, stderr = run_cli(
            capfd, "quantize", model_files["keras3"], "--data", model_files["calib"],
            "--calibration-samples", 16, "--seed", chosen, "--out", out, "--json",
        )  # fmt: skip
        assert code == 0, stderr
        runs[name] = (json.loads(stdout)["config"]["seed"], out.read_bytes())
    assert [runs[n][0] for n in "abc"] == [3, 3, 4]
    assert runs["a"][1] == runs["b"][1]


def test_compress_takes_seed_into_its_config():
    from tfcompress.cli import build_parser
    from tfcompress.cli.compress import compress_config

    args = build_parser().parse_args(
        ["compress", "m.keras", "--data", "c.npz", "--out", "o.tflite", "--seed", "9"]
    )
    assert compress_config(args).seed == 9
    assert compress_config(build_parser().parse_args(["compress", "m.keras", "--data", "c.npz",
                                                     "--out", "o.tflite"])).seed == 0  # fmt: skip
