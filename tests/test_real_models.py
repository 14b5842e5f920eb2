"""Models shaped like the ones users ship: two inputs and two heads, a segmenter, audio, custom ops.

Trained briefly on the bundled digits (tfcompress.samples.tasks). Every capability of
the measure -> gate half runs on them: quantize, benchmark, evaluate and gate each head with
its metric, with labels and without.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tfcompress
from tfcompress.cli import main
from tfcompress.data import Dataset
from tfcompress.errors import InvalidDataError, InvalidInputError, UnsupportedModelError
from tfcompress.models import load_model, model_signature
from tfcompress.samples.tasks import (
    ink_masks,
    ink_segmenter,
    train_segmenter,
    train_two_head,
    two_head_cnn,
    two_input_data,
)
from tfcompress.testing.output_gates import GateError, assert_gate, check_gate

FAST = {"runs": 3, "min_seconds": 0.0, "warmup_runs": 1, "warmup_seconds": 0.0}


@pytest.fixture(scope="module")
def digits() -> Any:
    return tfcompress.samples.datasets.digits()


@pytest.fixture(scope="module")
def heads(digits: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The two-head model, its int8 .tflite, a damaged box head, and .npz test files."""
    root = tmp_path_factory.mktemp("heads")
    train, test = two_input_data(digits.train), two_input_data(digits.test, seed=1)
    model = train_two_head(two_head_cnn(), train, epochs=4)
    int8 = tfcompress.quantize(model, recipe="int8", representative_data=train)
    damaged = two_head_cnn()
    damaged.set_weights(model.get_weights())
    kernel, bias = damaged.get_layer("box").get_weights()
    damaged.get_layer("box").set_weights([kernel, bias + 1.5])  # every box shifted
    files = {
        "keras": root / "two_head.keras",
        "int8": int8.save(root / "two_head_int8.tflite"),
        "damaged": tfcompress.quantize(damaged, recipe="float32").save(root / "damaged.tflite"),
        "test": root / "test.npz",
        "unlabelled": root / "unlabelled.npz",
    }
    model.save(files["keras"])
    arrays = {"image": test.x["image"], "gain": test.x["gain"]}
    np.savez(files["test"], **arrays, y_cls=test.y["cls"], y_box=test.y["box"])
    np.savez(files["unlabelled"], **arrays)
    return {"model": model, "int8": int8, "test": test, "files": files}


@pytest.fixture(scope="module")
def segmenter(digits: Any) -> dict[str, Any]:
    model = train_segmenter(ink_segmenter(), digits.train.x)
    int8 = tfcompress.quantize(model, recipe="int8", representative_data=digits.train.x)
    broken = ink_segmenter()
    broken.set_weights(model.get_weights())
    kernel, bias = broken.get_layer("mask").get_weights()
    broken.get_layer("mask").set_weights([kernel * 0.2, bias])  # blurs the ink/background cut
    return {"model": model, "int8": int8.model, "broken": broken, "test": digits.test}


def test_quantized_file_keeps_the_keras_names(heads: dict[str, Any]) -> None:
    signature = model_signature(heads["int8"].model)
    assert signature.input_names == ("image", "gain")
    assert set(signature.output_names) == {"cls", "box"}
    assert model_signature(heads["model"]).output_names == ("cls", "box")


def test_runners_return_every_output_by_name(heads: dict[str, Any]) -> None:
    from tfcompress.runtime import create_runner

    x = heads["test"].x
    with create_runner(heads["model"]) as keras_runner, create_runner(heads["int8"].model) as cpu:
        reference, quantized = keras_runner.run(x), cpu.run(x)
    assert reference["cls"].shape == quantized["cls"].shape == (len(heads["test"]), 10)
    assert reference["box"].shape == quantized["box"].shape == (len(heads["test"]), 4)
    assert np.abs(reference["box"] - quantized["box"]).max() < 0.1
    with create_runner(heads["int8"].model) as cpu, pytest.raises(InvalidInputError, match="gain"):
        cpu.run(x["image"])  # one array for two inputs


def test_evaluate_scores_each_head_with_its_metric(heads: dict[str, Any]) -> None:
    files = heads["files"]
    evaluation = tfcompress.evaluate(
        {"keras": files["keras"], "int8": files["int8"]}, files["test"]
    )
    assert [(c.output, c.metric) for c in evaluation.columns] == [
        ("cls", "accuracy"),
        ("box", "snr"),  # regression labels: fidelity by default, mse when named
    ]
    assert evaluation.reference.scores[0] > 0.9  # trained on real digits
    assert evaluation.drop("int8") < 0.02
    named = tfcompress.evaluate(
        [files["keras"], files["int8"]], files["test"], metric="mae", outputs=["box"]
    )
    assert named.columns[0].metric == "mae" and 0 < named.reference.score < 0.1


def test_gate_judges_each_head_and_a_damaged_head_fails_alone(heads: dict[str, Any]) -> None:
    files = heads["files"]
    report = check_gate(files["keras"], files["int8"], files["test"])
    assert report.passed, report.explain()
    assert {(v.output, v.metric) for v in report.verdicts} == {("cls", "accuracy"), ("box", "snr")}
    assert all(v.chosen_because for v in report.verdicts)
    damaged = check_gate(files["keras"], files["damaged"], files["test"])
    assert not damaged.passed
    assert damaged.verdict("cls").passed and not damaged.verdict("box").passed
    on_labels = check_gate(
        files["keras"],
        files["damaged"],
        files["test"],
        outputs=["box"],
        metrics=["mae"],
        max_drop=0.05,
    )
    assert not on_labels.passed and on_labels.verdicts[0].value > 0.05
    with pytest.raises(GateError, match="box"):
        assert_gate(files["keras"], files["damaged"], files["test"])


def test_unlabelled_data_gates_by_fidelity(heads: dict[str, Any]) -> None:
    files = heads["files"]
    report = check_gate(files["keras"], files["int8"], files["unlabelled"])
    assert {(v.output, v.metric) for v in report.verdicts} == {("cls", "agreement"), ("box", "snr")}
    assert report.passed, report.explain()
    assert report.verdict("box").value > 25  # dB: int8 keeps the box head close to float
    with pytest.raises(InvalidDataError, match="labels"):
        check_gate(files["keras"], files["int8"], files["unlabelled"], metrics=["accuracy"])


def test_gate_cli_one_verdict_per_head(heads: dict[str, Any], capfd: pytest.CaptureFixture) -> None:
    files = heads["files"]
    code = main(["gate", str(files["keras"]), str(files["damaged"]), "--eval", str(files["test"])])
    out = capfd.readouterr().out
    assert code == 1 and out.startswith("gate FAILED (strict): 1 of 2 checks")
    assert "metrics chosen for you" in out
    code = main(
        [
            "gate",
            str(files["keras"]),
            str(files["int8"]),
            "--eval",
            str(files["unlabelled"]),
            "--min-snr",
            "25",
            "--json",
        ]
    )
    report = json.loads(capfd.readouterr().out)
    assert code == 0 and report["passed"]
    assert {c["output"]: c["metric"] for c in report["checks"]} == {"box": "snr", "cls": "snr"}
    assert all(c["threshold"] == 25 for c in report["checks"])


def test_benchmark_needs_no_data_and_scores_a_named_head(heads: dict[str, Any]) -> None:
    files = heads["files"]
    result = tfcompress.benchmark([files["keras"], files["int8"]], **FAST)
    rows = {r.artifact: r for r in result.rows}
    assert rows["two_head_int8.tflite"].ok and rows["two_head_int8.tflite"].latency.runs >= 3
    # TensorFlow runs one thread count per process: the keras row ran, or says why not
    keras_row = rows["two_head.keras"]
    assert keras_row.ok or keras_row.status.startswith("unavailable: the keras backend")
    scored = tfcompress.benchmark(files["int8"], data=files["test"], output="cls", **FAST)
    assert scored.metric == "accuracy" and scored.rows[0].accuracy > 0.9
    unscored = tfcompress.benchmark(files["int8"], data=files["test"], **FAST)
    assert unscored.rows[0].accuracy is None
    assert any("--output NAME" in note for note in unscored.notes)


def test_segmenter_gated_with_miou_and_without_labels(segmenter: dict[str, Any]) -> None:
    test = segmenter["test"]
    labelled = Dataset(test.x, ink_masks(test.x))
    report = check_gate(segmenter["model"], segmenter["int8"], labelled)
    (verdict,) = report.verdicts
    assert verdict.metric == "miou" and verdict.reference_score > 0.9
    assert report.passed, report.explain()
    assert check_gate(segmenter["model"], segmenter["int8"], test.x).verdicts[0].metric == "snr"
    broken = check_gate(segmenter["model"], segmenter["broken"], labelled)
    assert not broken.passed and broken.verdicts[0].value > 0.01
    with pytest.raises(InvalidInputError, match="miou"):  # a mask is never scored as accuracy
        check_gate(segmenter["model"], segmenter["int8"], labelled, metrics=["accuracy"])


@pytest.fixture(scope="module")
def audio_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import keras

    audio = keras.Input((None, 1), name="audio")
    x = keras.layers.Conv1D(8, 9, strides=4, activation="relu")(audio)
    x = keras.layers.GlobalAveragePooling1D()(x)
    model = keras.Model(audio, keras.layers.Dense(3, activation="softmax", name="kw")(x))
    path = tmp_path_factory.mktemp("audio") / "kws.tflite"
    return tfcompress.quantize(model, recipe="float32").save(path)


def test_audio_with_unknown_length(audio_file: Path, capfd: pytest.CaptureFixture) -> None:
    with pytest.raises(InvalidDataError, match=r"audio=Nx\?x1"):
        tfcompress.benchmark(audio_file, **FAST)
    result = tfcompress.benchmark(audio_file, input_shapes={"audio": (1, 16000, 1)}, **FAST)
    assert result.rows[0].ok
    code = main(["benchmark", str(audio_file), "--input-shape", "audio=1x8000x1", "--runs", "3"])
    assert code == 0 and "kws.tflite" in capfd.readouterr().out
    clips = np.random.default_rng(0).normal(size=(6, 4000, 1)).astype(np.float32)
    report = check_gate(audio_file, audio_file, clips)
    assert report.passed and report.verdicts[0].metric == "agreement"
    with pytest.raises(InvalidInputError, match="batch"):
        tfcompress.benchmark(audio_file, input_shapes={"audio": (2, 100, 1)}, **FAST)


def test_custom_op_runner_names_the_op(heads: dict[str, Any]) -> None:
    from tfcompress._compat.litert import flatbuffer_utils
    from tfcompress.runtime import create_runner

    utils = flatbuffer_utils()
    ops = utils.schema_fb.BuiltinOperator
    model = utils.read_model_from_bytearray(bytearray(heads["int8"].model_content))
    for code in model.operatorCodes:
        if code.builtinCode == ops.CONV_2D:
            code.builtinCode = code.deprecatedBuiltinCode = ops.CUSTOM
            code.customCode = b"Convolution2DTransposeBias"
    content = bytes(utils.convert_object_to_bytearray(model))
    with pytest.raises(UnsupportedModelError, match=r"custom op.*Convolution2DTransposeBias"):
        create_runner(content)
    assert load_model  # the file itself loads: only running it needs the op
