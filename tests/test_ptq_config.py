"""quantize takes its config: PTQConfig is what decides the artifact, checked in one place.

``quantize(model, config=PTQConfig(...))`` and the keyword options make the same file (the
keywords only build the config); the result records the config, which makes the file
again; a bad value gets one message whichever way it came in (a keyword, ``config=``, the
CLI flag, a replayed compress report).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import tfcompress
from tfcompress.cli import main
from tfcompress.errors import InvalidInputError
from tfcompress.quantization import PTQConfig, Recipe
from tfcompress.quantization.onnx_ptq import OnnxRecipe

CALIBRATION_MESSAGE = "calibration_samples must be at least 1, got 0; pass e.g. 200 (the default)"
ENGINE_MESSAGE = "unknown engine 'tvm'; choose one of converter, litert-quantizer"


def test_config_and_keywords_make_the_same_file_and_the_result_replays(trained_cnn, mnist_split):
    data = mnist_split.train.x[:64]
    by_keywords = tfcompress.quantize(
        trained_cnn, representative_data=data, per_channel=False, calibration_samples=32, seed=3
    )
    config = PTQConfig(recipe=Recipe("int8", per_channel=False, calibration_samples=32), seed=3)
    by_config = tfcompress.quantize(trained_cnn, config=config, representative_data=data)
    assert by_config.model_content == by_keywords.model_content
    assert by_config.config == by_keywords.config == config
    recorded = json.loads(json.dumps(by_config.to_dict()))
    assert recorded["config"]["recipe"] == recorded["recipe"] and recorded["config"]["seed"] == 3
    replayed = PTQConfig.from_dict(recorded["config"])
    assert replayed == config
    again = tfcompress.quantize(trained_cnn, config=replayed, representative_data=data)
    assert again.model_content == by_config.model_content


def test_onnx_options_live_in_the_onnx_recipe():
    config = PTQConfig.from_options(format="onnx", calibration_method="entropy", opset=15)
    assert config.format == "onnx" and config.recipe == OnnxRecipe(
        "int8", calibration_method="entropy", opset=15
    )
    assert PTQConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    with pytest.raises(InvalidInputError, match=r"makes a \.tflite"):
        PTQConfig(recipe=OnnxRecipe("int8"), target="edgetpu")


def test_target_options_are_the_targets(tmp_path: Path):
    with pytest.raises(InvalidInputError, match="applies to --target edgetpu only"):
        PTQConfig(recipe="int8", target_options={"compiler": "edgetpu_compiler"})
    config = PTQConfig(recipe="int8", target="edgetpu")
    assert (config.recipe.input_type, config.recipe.static_batch) == ("uint8", 1)
    assert dataclasses.replace(config, seed=1).recipe == config.recipe  # shaped once


@pytest.mark.parametrize(
    "given",
    [{"recipe": "int8"}, {"seed": 1}, {"static_batch": 1}, {"target": "edgetpu"}],
)
def test_a_keyword_beside_config_is_refused(given):
    config = PTQConfig(recipe="float16")
    with pytest.raises(InvalidInputError, match=f"config= holds every option.*{next(iter(given))}"):
        tfcompress.quantize("never_read.keras", config=config, **given)


def test_config_of_another_type_is_refused():
    with pytest.raises(InvalidInputError, match=r"config must be a tfcompress\.PTQConfig"):
        tfcompress.quantize("never_read.keras", config={"recipe": "int8"})


def _replayed_error(tmp_path: Path, capfd, recipe: dict) -> str:
    """What ``compress --replay`` says of a report whose chosen PTQ attempt records ``recipe``."""
    report = tmp_path / "compress.json"
    chosen = {"index": 1, "name": "int8", "technique": "ptq", "status": "passed", "why": ""}
    report.write_text(json.dumps({"attempts": [], "chosen": {**chosen, "recipe": recipe}}))
    argv = ["compress", str(tmp_path / "m.keras"), "--data", str(tmp_path / "calib.npz")]
    code = main([*argv, "--replay", str(report), "--out", str(tmp_path / "again.tflite")])
    error = capfd.readouterr().err
    assert code == 2 and len(error.strip().splitlines()) == 1, error
    return error


def _cli_error(tmp_path: Path, capfd, *flags: str) -> str:
    out = tmp_path / "q.tflite"
    code = main(["quantize", str(tmp_path / "m.keras"), *flags, "--out", str(out)])
    error = capfd.readouterr().err
    assert code == 2 and len(error.strip().splitlines()) == 1 and not out.exists(), error
    return error


def test_a_bad_calibration_count_has_one_message_every_way_in(tmp_path: Path, capfd):
    # Nothing is read before the config is checked: the model need not exist.
    for make in (
        lambda: tfcompress.quantize("never_read.keras", calibration_samples=0),
        lambda: tfcompress.quantize(
            "never_read.keras", config=PTQConfig(recipe=Recipe("int8", calibration_samples=0))
        ),
        lambda: PTQConfig.from_dict({"recipe": {"name": "int8", "calibration_samples": 0}}),
    ):
        with pytest.raises(InvalidInputError) as caught:
            make()
        assert str(caught.value) == CALIBRATION_MESSAGE + "."
    assert CALIBRATION_MESSAGE in _cli_error(tmp_path, capfd, "--calibration-samples", "0")
    recipe = {"recipe": {"name": "int8", "calibration_samples": 0}, "seed": 0}
    assert CALIBRATION_MESSAGE in _replayed_error(tmp_path, capfd, recipe)


def test_an_unknown_engine_has_one_message_every_way_in(tmp_path: Path, capfd):
    for make in (
        lambda: tfcompress.quantize("never_read.keras", engine="tvm"),
        lambda: tfcompress.quantize(
            "never_read.keras", config=PTQConfig(recipe="int8", engine="tvm")
        ),
    ):
        with pytest.raises(InvalidInputError) as caught:
            make()
        assert str(caught.value) == ENGINE_MESSAGE + "."
    assert ENGINE_MESSAGE in _cli_error(tmp_path, capfd, "--engine", "tvm")
    recipe = {"recipe": {"name": "int8"}, "seed": 0, "engine": "tvm"}
    assert ENGINE_MESSAGE in _replayed_error(tmp_path, capfd, recipe)


def test_an_unknown_target_has_one_message_every_way_in(tmp_path: Path, capfd):
    message = "unknown target 'tpu9'; choose one of "
    with pytest.raises(InvalidInputError, match=message):
        tfcompress.quantize("never_read.keras", target="tpu9")
    with pytest.raises(InvalidInputError, match=message):
        PTQConfig(recipe="int8", target="tpu9")
    recipe = {"recipe": {"name": "int8"}, "seed": 0, "target": "tpu9"}
    assert message in _replayed_error(tmp_path, capfd, recipe)
