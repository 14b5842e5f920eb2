"""Untrusted options, paths and files on the command line: one error line and exit 2 each.

Layer errors on models the runtime refuses, a ``.tflite`` with no inputs, an output path in a
symlink loop, time limits of ``inf``, a full temporary folder, the pytest plugin's report and
backend options, and ONNX Runtime's file in ``$TMPDIR``.
"""

from __future__ import annotations

import errno
import os
import pathlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fuzzing.invocations_options import _BAD_LIMITS, _BAD_MEMORY
from tfcompress.cli import main
from tfcompress.errors import InvalidInputError
from tfcompress.models import probe

pytest_plugins = ["pytester"]

FAST = ["--runs", "1", "--min-seconds", "0", "--warmup-seconds", "0"]


def _one_line(capsys: pytest.CaptureFixture[str], command: str) -> str:
    """The one error line; INFO lines of the work done before the refusal are progress."""
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip() and x[:5] != "INFO "]
    assert len(lines) == 1 and lines[0].startswith(f"tfcompress {command}: error:"), lines
    return lines[0]


@pytest.fixture(autouse=True)
def fresh_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TFCOMPRESS_NO_PROBE", raising=False)
    probe.clear_cache()


def _edit(content: bytes, edit: Callable[[Any], None]) -> bytes:
    from tfcompress._compat.litert import flatbuffer_utils

    utils = flatbuffer_utils()
    model = utils.read_model_from_bytearray(bytearray(content))
    edit(model)
    return bytes(utils.convert_object_to_bytearray(model))


def _custom(code_text: str) -> Callable[[Any], None]:
    def edit(model: Any) -> None:
        from tfcompress._compat.litert import flatbuffer_utils

        ops = flatbuffer_utils().schema_fb.BuiltinOperator
        code = model.operatorCodes[model.subgraphs[0].operators[-1].opcodeIndex]
        code.builtinCode = code.deprecatedBuiltinCode = ops.CUSTOM
        code.customCode = code_text

    return edit


def _fill_model(sign: int) -> bytes:
    """A float model whose FILL is sized by the input: ``sign * sum(x)`` elements."""
    import tensorflow as tf

    kernel = tf.constant(np.random.default_rng(0).random((8, 4), dtype=np.float32))

    class Fill(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 8], tf.float32)])
        def f(self, x: Any) -> Any:
            n = sign * tf.cast(tf.reduce_sum(x), tf.int32)
            return tf.matmul(x, kernel) + tf.reduce_sum(tf.fill(tf.stack([n]), 1.0))

    module = Fill()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([module.f.get_concrete_function()])
    return bytes(converter.convert())


def _reversed(model: Any) -> None:
    model.subgraphs[0].operators.reverse()


def _no_inputs(model: Any) -> None:
    model.subgraphs[0].inputs = []


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A float Dense model and its hostile variants, plus data that sums above 0."""
    import keras
    import tensorflow as tf

    root = tmp_path_factory.mktemp("untrusted_options")
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(4, activation="relu"), keras.layers.Dense(3)]
    )
    base = bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    contents = {
        "float": base,
        "custom": _edit(base, _custom("NotARealOp")),
        "flex": _edit(base, _custom("FlexAddV2")),
        "fill": _fill_model(-1),  # zeros fill 0 elements (the probe passes), samples < 0
        "order": _edit(_fill_model(1), _reversed),  # the dynamic FILL output read first
        "no_inputs": _edit(base, _no_inputs),
    }
    found = {name: root / f"{name}.tflite" for name in contents}
    for name, content in contents.items():
        found[name].write_bytes(content)
    found["data"] = root / "data.npz"
    np.savez(found["data"], x=np.random.default_rng(0).random((8, 8), dtype=np.float32) * 100)
    found["keras"] = root / "model.keras"
    model.save(found["keras"])
    return found


# 1. --layer-errors on a model the interpreter refuses ----------------------------------


@pytest.mark.parametrize(
    ("case", "op"),
    [
        ("custom", "NotARealOp"),
        ("flex", "Flex"),
        ("fill", "FILL"),
        ("order", "lacks data"),
    ],
)
def test_layer_errors_on_a_model_the_runtime_refuses_is_one_line(files, tmp_path, capsys, case, op):
    out = tmp_path / "out.tflite"
    argv = ["quantize", str(files[case]), "--recipe", "dynamic", "--data", str(files["data"])]
    assert main([*argv, "--layer-errors", "--out", str(out)]) == 2
    line = _one_line(capsys, "quantize")
    assert "--layer-errors: the LiteRT interpreter" in line and op in line, line
    assert "drop --layer-errors" in line and not out.exists()


# 2. a .tflite whose main subgraph lists no inputs --------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["inspect", "{model}"],
        ["gate", "{model}", "{model}", "--eval", "{data}"],
        ["benchmark", "{model}", *FAST],
        ["quantize", "{model}", "--recipe", "dynamic", "--out", "{out}"],
    ],
)
def test_tflite_without_inputs_is_refused_in_one_line(files, tmp_path, capsys, command):
    names = {"model": files["no_inputs"], "data": files["data"], "out": tmp_path / "o.tflite"}
    assert main([part.format(**names) for part in command]) == 2
    assert "its main subgraph lists no input tensors" in _one_line(capsys, command[0])


# 3. --out in a symlink loop -------------------------------------------------------------


@pytest.mark.parametrize("name", ["loop", "loop/model.tflite"])
def test_output_in_a_symlink_loop_is_one_line(files, tmp_path, capsys, name):
    (tmp_path / "loop").symlink_to("loop")
    argv = ["quantize", str(files["float"]), "--recipe", "dynamic", "--force"]
    assert main([*argv, "--out", str(tmp_path / name)]) == 2
    assert "symbolic link loop" in _one_line(capsys, "quantize")


# 4. time limits from the environment and --timeout ---------------------------------------

BAD_SECONDS = ["inf", "nan", "1e308", "-1"]


@pytest.mark.parametrize("value", BAD_SECONDS)
def test_the_one_time_limit_out_of_range_is_one_line_for_the_probe(
    files, capsys, monkeypatch, value
):
    # The probe has no limit of its own: TFCOMPRESS_TIMEOUT, checked before it starts.
    monkeypatch.setenv("TFCOMPRESS_TIMEOUT", value)
    assert main(["inspect", str(files["float"])]) == 2
    line = _one_line(capsys, "inspect")
    assert f"TFCOMPRESS_TIMEOUT={value!r}" in line and "at most 604800" in line, line


@pytest.mark.parametrize(
    ("variable", "value"),
    [("TFCOMPRESS_TIMEOUT", v) for v in _BAD_LIMITS]
    + [("TFCOMPRESS_MEMORY_LIMIT", v) for v in _BAD_MEMORY],
)
def test_every_hostile_limit_is_one_line_before_a_child_starts(
    files, capsys, monkeypatch, variable, value
):
    # The fuzz campaign's env.* values (its long run sends them to fresh processes).
    monkeypatch.setenv(variable, value)
    assert main(["inspect", str(files["float"])]) == 2
    line = _one_line(capsys, "inspect")
    assert variable in line and len(line) < 600 and "\x1b" not in line, line


@pytest.mark.parametrize("value", BAD_SECONDS)
def test_a_compiler_timeout_out_of_range_is_refused(files, monkeypatch, value):
    from tfcompress.targets.edgetpu.compiler import compile_for_edgetpu

    with pytest.raises(InvalidInputError, match=r"timeout .* is not a time limit.*604800"):
        compile_for_edgetpu(files["float"], compiler=sys.executable, timeout=float(value))


def test_benchmark_timeout_beyond_a_week_is_one_line(files, capsys):
    assert main(["benchmark", str(files["float"]), *FAST, "--timeout", "1e300"]) == 2
    assert "at most a week (604800 s)" in _one_line(capsys, "benchmark")


# 5. a full temporary folder --------------------------------------------------------------


def test_full_temporary_folder_is_one_line(files, capsys, monkeypatch):
    real = pathlib.Path.write_bytes

    def full(self: Path, data: Any) -> int:
        if "tfcompress-checked-" in str(self):  # the private copy of the checked model
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real(self, data)

    monkeypatch.setattr(pathlib.Path, "write_bytes", full)
    assert main(["inspect", str(files["keras"])]) == 2
    line = _one_line(capsys, "inspect")
    assert "no space left in the temporary folder" in line and "set TMPDIR" in line, line


# 6. the pytest plugin --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "ini"), [(("--tfc-backend", "bogus"), ""), ((), "tfc_backend = bogus")]
)
def test_unknown_backend_is_one_usage_error_at_start(pytester, options, ini):
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile("def test_one(accuracy_gate):\n    pass\n\ndef test_two():\n    pass\n")
    result = pytester.runpytest(*options, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    message = " ".join(result.stderr.str().split())
    assert "unknown backend 'bogus'; choose one of" in message and "cpu" in message
    assert "passed" not in result.stdout.str() and "failed" not in result.stdout.str()


@pytest.mark.parametrize("role", ["reference", "candidate", "data"])
def test_gate_report_never_replaces_a_gate_input(pytester, role):
    names = {"reference": "model.keras", "candidate": "model.tflite", "data": "test.npz"}
    for name in names.values():
        pytester.path.joinpath(name).write_bytes(b"precious " + name.encode())
    pytester.makepyfile(
        f"""
        def test_gate(accuracy_gate):
            accuracy_gate({names["reference"]!r}, {names["candidate"]!r}, {names["data"]!r})
        """
    )
    result = pytester.runpytest(f"--tfc-gate-report={names[role]}", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = " ".join(result.stdout.str().split())
    assert f"is this gate's {role}" in output and "would replace it" in output
    assert "The report was not written" in output
    for name in names.values():
        assert pytester.path.joinpath(name).read_bytes() == b"precious " + name.encode()


# 7. ONNX export leaves nothing in $TMPDIR -------------------------------------------------


@pytest.mark.parametrize("verb", ["export-onnx", "benchmark"])
def test_tracing_a_keras_model_leaves_nothing_in_tmpdir(files, tmp_path, verb):
    """Autograph's modules go to $TMPDIR; with bytecode written (as a user runs Python, not
    with PYTHONDONTWRITEBYTECODE) their ``__pycache__`` was left there."""
    pytest.importorskip("tf2onnx")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    out = tmp_path / "model.onnx"
    env = {**os.environ, "TMPDIR": str(temporary), "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    command = [sys.executable, "-m", "tfcompress", verb, str(files["keras"])]
    flags = ["--out", str(out)] if verb == "export-onnx" else ["--runs", "5", "--min-seconds", "0"]
    done = subprocess.run([*command, *flags], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(p.name for p in temporary.iterdir()) == []
    assert out.is_file() or verb != "export-onnx"
