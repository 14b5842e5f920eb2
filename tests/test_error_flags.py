"""An error that advises a flag names a flag the command has.

Two sources of such errors, checked per command: the messages of the command's own CLI
modules (read from the source: tests/_error_flags.py), and the messages each command really
prints on inputs every command meets (a Keras file that would run code, data that does not
fit). ``benchmark`` used to say "pass --unsafe (safe_mode=False)" without having ``--unsafe``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from _error_flags import FLAG, advised_flags, reachable

from tfcompress.cli import SUBCOMMANDS, build_parser, main

COMMAND_FLAGS = {
    name: {option for action in parser._actions for option in action.option_strings}
    for name, parser in next(
        action
        for action in build_parser()._actions
        if action.__class__.__name__ == "_SubParsersAction"
    ).choices.items()
}


@pytest.mark.parametrize("module", SUBCOMMANDS)
def test_the_cli_modules_of_a_command_advise_only_its_flags(module):
    command = module.replace("_", "-")
    own = {m for m in reachable(f"tfcompress.cli.{module}") if m.startswith("tfcompress.cli")}
    wrong = [
        f"{advised.where}: {advised.flag}"
        for advised in advised_flags()
        if advised.module in own
        and advised.module != "tfcompress.cli"  # the top level names top-level flags
        and advised.flag not in COMMAND_FLAGS[command]
        and not _belongs_to_another_command(advised, module)
    ]
    assert not wrong, f"`tfcompress {command}` errors advise flags it does not have: {wrong}"


def _belongs_to_another_command(advised, module: str) -> bool:
    """A message in another command's own module (reached through a shared import)."""
    owner = advised.module.removeprefix("tfcompress.cli.")
    return owner in SUBCOMMANDS and owner != module


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    import keras

    root = tmp_path_factory.mktemp("error_flags")
    inputs = keras.Input((8, 8, 1), name="image")
    doubled = keras.layers.Lambda(lambda t: t * 2.0, name="lam")(inputs)  # runs code on load
    outputs = keras.layers.Dense(3, activation="softmax")(keras.layers.Flatten()(doubled))
    keras.Model(inputs, outputs).save(root / "lambda.keras")
    rng = np.random.default_rng(0)
    x = rng.random((40, 8, 8, 1), dtype=np.float32)
    np.savez(root / "data.npz", x=x, y=rng.integers(0, 3, 40))
    np.savez(root / "wrong.npz", x=x[:, :4], y=rng.integers(0, 3, 40))
    return root


KERAS_COMMANDS = {
    "quantize": ["{m}", "--data", "{d}", "--out", "{o}.tflite"],
    "inspect": ["{m}"],
    "benchmark": ["{m}", "--data", "{d}"],
    "gate": ["{m}", "{m}", "--eval", "{d}"],
    "export-onnx": ["{m}", "--out", "{o}.onnx"],
    "compress": ["{m}", "--data", "{d}", "--eval", "{d}", "--max-drop", "0.01", "--out", "{o}"],
    "qat": ["{m}", "--train", "{d}", "--out", "{o}.tflite"],
    "prune": ["{m}", "--train", "{d}", "--out", "{o}.tflite"],
    "cluster": ["{m}", "--train", "{d}", "--out", "{o}.tflite"],
    "data": ["{d}", "--model", "{m}", "--out-dir", "{o}"],
}


def test_every_command_that_loads_keras_files_has_the_unsafe_it_advises(files, capsys):
    seen = []
    for command, template in KERAS_COMMANDS.items():
        argv = [
            command,
            *(
                a.format(m=files / "lambda.keras", d=files / "data.npz", o=files / f"out_{command}")
                for a in template
            ),
        ]
        assert main(argv) == 2, command
        error = capsys.readouterr().err.strip().splitlines()[-1]
        assert "--unsafe" in error, (command, error)
        _assert_flags_exist(command, error)
        seen.append(command)
    # Every command that takes a Keras model is in the list above.
    loaders = {c for c, flags in COMMAND_FLAGS.items() if "--unsafe" in flags}
    assert loaders <= set(seen)


def _plain(files):
    """A Keras model without code, and its float32 .tflite (made once per module)."""
    import tfcompress

    model = files / "model.keras"
    if not model.exists():
        import keras

        inputs = keras.Input((8, 8, 1), name="image")
        flat = keras.layers.Flatten()(inputs)
        keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(flat)).save(model)
        tfcompress.quantize(tfcompress.load_model(model), recipe="float32").save(
            files / "model.tflite"
        )
    return model


def test_data_errors_advise_flags_the_command_has(files, capsys):
    model = _plain(files)
    wrong = str(files / "wrong.npz")
    for argv in (
        ["gate", str(model), str(files / "model.tflite"), "--eval", wrong],
        ["benchmark", str(files / "model.tflite"), "--data", wrong],
        ["quantize", str(model), "--data", wrong, "--out", str(files / "q.tflite")],
    ):
        assert main(argv) == 2, argv
        error = capsys.readouterr().err.strip().splitlines()[-1]
        assert "has shape (40, 4, 8, 1)" in error, error
        _assert_flags_exist(argv[0], error)


def test_library_messages_are_printed_in_the_flags_of_the_verb(files, capsys):
    model, data = str(_plain(files)), str(files / "data.npz")
    tflite = str(files / "model.tflite")
    for argv, said in (
        (["gate", tflite, tflite, "--eval", data, "--backend", "keras"], "use --backend cpu"),
        (
            [
                "quantize",
                model,
                "--target",
                "gpu",
                "--methods",
                "mse-ranges",
                "--data",
                data,
                "--out",
                str(files / "gpu.tflite"),
            ],
            "use --recipe int8",
        ),
        (["export-onnx", tflite, "--out", str(files / "x.onnx")], "not a .tflite"),
    ):
        assert main(argv) == 2, argv
        error = capsys.readouterr().err.strip().splitlines()[-1]
        assert said in error and not re.search(r"[a-z]=['\"]", error), error
        assert not re.search(r"TFLiteModel|SavedModelDir|OnnxModel", error), error
        _assert_flags_exist(argv[0], error)


def _assert_flags_exist(command: str, error: str) -> None:
    named = set(FLAG.findall(error))
    missing = sorted(named - COMMAND_FLAGS[command])
    assert not missing, f"`tfcompress {command}` advises {missing}, which it lacks: {error}"


def test_the_flag_pattern_reads_flags_and_nothing_else():
    assert FLAG.findall("pass --unsafe (safe_mode=False); or --input-value sr=V") == [
        "--unsafe",
        "--input-value",
    ]
    assert not FLAG.findall("a -- separator, x--y, and ---") and re.compile(FLAG.pattern)
