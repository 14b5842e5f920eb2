"""benchmark, check_gate and select_model take their config, as quantize and compress do.

``verb(..., config=XConfig(...))`` and the keyword options ask for the same thing (the
keywords only build the config); the CLI builds the config from its flags; the result
records it and ``XConfig.from_dict`` reads the record back; a bad value gets one message
whichever way it came in (a keyword, ``config=``, a recorded config, the CLI flag); a
keyword next to ``config=`` is one line. Nothing is read before the config is checked, so
the bad-value tests name files that do not exist.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tfcompress
from tfcompress.cli import main
from tfcompress.errors import InvalidInputError
from tfcompress.testing import GateSettings

NEVER = "never_read"
FAST = {"runs": 3, "min_seconds": 0.0, "warmup_seconds": 0.0}


def _one_message(make) -> str:
    with pytest.raises(InvalidInputError) as caught:
        make()
    message = str(caught.value)
    assert len(message.splitlines()) == 1, message
    return message


def _cli_error(capfd, *argv: str) -> str:
    code = main(list(argv))
    error = capfd.readouterr().err
    assert code == 2 and len(error.strip().splitlines()) == 1, error
    return error


def _every_way_in(capfd, ways, argv: list[str], message: str) -> None:
    for make in ways:
        assert _one_message(make) == message
    assert message in _cli_error(capfd, *argv)


# benchmark


@pytest.mark.parametrize(
    ("option", "value", "flag", "message"),
    [
        ("runs", 0, ["--runs", "0"], "runs must be an integer >= 1, got 0."),
        ("threads", (0,), ["--threads", "0"], "threads must be integers >= 1, got [0]."),
        ("metric", "snr", ["--metric", "snr"], "snr compares a model with a reference"),
    ],
)
def test_benchmark_a_bad_value_has_one_message_every_way_in(capfd, option, value, flag, message):
    config = tfcompress.BenchmarkConfig
    ways = [
        lambda: tfcompress.benchmark(f"{NEVER}.tflite", **{option: value}),
        lambda: tfcompress.benchmark(f"{NEVER}.tflite", config=config(**{option: value})),
        lambda: config.from_dict({option: list(value) if isinstance(value, tuple) else value}),
    ]
    for make in ways:
        assert _one_message(make).startswith(message)
    assert message in _cli_error(capfd, "benchmark", f"{NEVER}.tflite", *flag)


def test_benchmark_a_keyword_beside_config_is_one_line():
    message = _one_message(
        lambda: tfcompress.benchmark(
            f"{NEVER}.tflite", config=tfcompress.BenchmarkConfig(), threads=(2,)
        )
    )
    assert message.startswith("config= holds every option of what to measure") and (
        "drop threads" in message
    )


def test_benchmark_records_the_config_the_keywords_and_the_flags_build(gate_model_files, capfd):
    int8 = str(gate_model_files["int8"])
    expected = tfcompress.BenchmarkConfig(**FAST, metric="accuracy")
    by_keywords = tfcompress.benchmark(
        int8, data=gate_model_files["test"], metric="accuracy", **FAST
    )
    assert by_keywords.config == expected and by_keywords.rows[0].ok
    recorded = json.loads(json.dumps(by_keywords.to_dict()))["config"]
    assert tfcompress.BenchmarkConfig.from_dict(recorded) == expected
    argv = ["benchmark", int8, "--data", str(gate_model_files["test"]), "--metric", "accuracy"]
    code = main([*argv, "--runs", "3", "--min-seconds", "0", "--warmup-seconds", "0", "--json"])
    assert code == 0
    printed = json.loads(capfd.readouterr().out)
    assert tfcompress.BenchmarkConfig.from_dict(printed["config"]) == expected


# check_gate


@pytest.mark.parametrize(
    ("option", "value", "flag", "message"),
    [
        (
            "confidence",
            1.5,
            ["--confidence", "1.5"],
            "confidence must lie strictly between 0 and 1 (e.g. 0.95), got 1.5.",
        ),
        ("threads", 0, ["--threads", "0"], "threads must be a positive integer, got 0."),
    ],
)
def test_gate_a_bad_value_has_one_message_every_way_in(capfd, option, value, flag, message):
    config = tfcompress.GateConfig
    if option == "confidence":  # how verdicts are judged: the GateSettings the config holds
        in_config = lambda: config(settings=GateSettings(confidence=value))  # noqa: E731
        recorded = {"settings": {"confidence": value}}
    else:
        in_config = lambda: config(threads=value)  # noqa: E731
        recorded = {option: value}
    ways = [
        lambda: tfcompress.check_gate(
            f"{NEVER}.keras", f"{NEVER}.tflite", NEVER, **{option: value}
        ),
        in_config,
        lambda: config.from_dict(recorded),
    ]
    argv = ["gate", f"{NEVER}.keras", f"{NEVER}.tflite", "--eval", f"{NEVER}.npz", *flag]
    _every_way_in(capfd, ways, argv, message)


def test_gate_a_keyword_beside_config_is_one_line():
    message = _one_message(
        lambda: tfcompress.check_gate(
            f"{NEVER}.keras", f"{NEVER}.tflite", NEVER, config=tfcompress.GateConfig(), min_snr=30
        )
    )
    assert message.startswith("config= holds every option of what the gate checks") and (
        "drop min_snr" in message
    )


def test_gate_records_the_config_the_keywords_and_the_flags_build(gate_model_files, capfd):
    files = {name: str(path) for name, path in gate_model_files.items()}
    expected = tfcompress.GateConfig.from_options(metrics=["agreement"], min_agreement=0.9)
    report = tfcompress.check_gate(
        files["reference"], files["int8"], files["test"], metrics="agreement", min_agreement=0.9
    )
    assert report.config == expected and report.passed
    again = tfcompress.check_gate(files["reference"], files["int8"], files["test"], config=expected)
    assert again.to_dict() == report.to_dict()
    recorded = json.loads(json.dumps(report.to_dict()))["config"]
    assert tfcompress.GateConfig.from_dict(recorded) == expected
    argv = ["gate", files["reference"], files["int8"], "--eval", files["test"], "--json"]
    assert main([*argv, "--metric", "agreement", "--min-agreement", "0.9"]) == 0
    printed = json.loads(capfd.readouterr().out)
    assert tfcompress.GateConfig.from_dict(printed["config"]) == expected


# select_model (the run that records its config is in test_selection.py: it trains)


def test_select_a_bad_value_has_one_message_every_way_in(capfd):
    config = tfcompress.SelectionConfig
    message = "epochs must be a whole number >= 1, got 0."
    ways = [
        lambda: tfcompress.select_model(train_data=NEVER, eval_data=NEVER, epochs=0),
        lambda: tfcompress.select_model(train_data=NEVER, eval_data=NEVER, config=config(epochs=0)),
        lambda: config.from_dict({"epochs": 0}),
    ]
    argv = ["select", "--train", f"{NEVER}.npz", "--eval", f"{NEVER}.npz", "--epochs", "0"]
    _every_way_in(capfd, ways, argv, message)


def test_select_a_keyword_beside_config_is_one_line():
    message = _one_message(
        lambda: tfcompress.select_model(
            train_data=NEVER, eval_data=NEVER, config=tfcompress.SelectionConfig(), seed=3
        )
    )
    assert message.startswith("config= holds every option of what the selection") and (
        "drop seed" in message
    )


def test_configs_of_another_verb_are_refused(tmp_path: Path):
    with pytest.raises(InvalidInputError, match=r"config must be a tfcompress\.BenchmarkConfig"):
        tfcompress.benchmark(f"{NEVER}.tflite", config=tfcompress.GateConfig())
    with pytest.raises(InvalidInputError, match=r"config must be a tfcompress\.SelectionConfig"):
        tfcompress.select_model(train_data=NEVER, eval_data=NEVER, config={"epochs": 1})


def test_check_gate_typed_options_name_every_threshold():
    from tfcompress.bench.thresholds import threshold_names
    from tfcompress.testing.config import CheckGateOptions

    assert set(threshold_names()) <= set(CheckGateOptions.__annotations__)
