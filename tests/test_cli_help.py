"""`tfcompress --help` and every `tfcompress VERB --help` stay thin: argparse, no library.

Building the parser imports the CLI's own modules, the gate-threshold table and the
exception types, nothing more: no numpy, no TensorFlow, none of the packages the verbs run
(quantization, training, compression, bench, runtime, selection, the zoo...). Each command
runs in a fresh ``python -X importtime -m tfcompress`` process; what it imported is read
from the importtime log and from ``sys.modules`` at exit (``importlib.import_module``, which
loads the verbs' modules, is not in the log). The names the parser offers are plain data in
``tfcompress/cli/_choices.py``; the tests below keep each list equal to its registry.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tfcompress.cli import SUBCOMMANDS, _choices

# Libraries that must not load for --help (each takes from 0.1 s to seconds).
HEAVY = {
    "numpy",
    "tensorflow",
    "keras",
    "tf_keras",
    "tensorflow_model_optimization",
    "ai_edge_litert",
    "tflite_runtime",
    "onnx",
    "onnxruntime",
    "tf2onnx",
    "matplotlib",
    "dask",
    "distributed",
    "scipy",
    "sklearn",
}
# Every tfcompress module --help may import: the CLI's own, and the light leaves it reads.
LIGHT = {
    "tfcompress",
    "tfcompress.errors",
    "tfcompress._compat",
    "tfcompress._compat.heap",  # gc.freeze for the CLI's process; imports gc only
    "tfcompress._declared",  # targets' and methods' declarations, read from source (ast)
    "tfcompress.bench",  # an empty package __init__
    "tfcompress.bench.thresholds",  # the gate thresholds' table: their flags and help
    "tfcompress.cli",
    "tfcompress.cli._choices",
    "tfcompress.cli._devices",  # --on, Dask's --tls-* flags (Dask imported only to connect)
    "tfcompress.cli._gating",
    "tfcompress.cli._interrupt",
    "tfcompress.cli._io",
    "tfcompress.cli._targets",  # --target choices and the targets' flags (from _choices)
    "tfcompress.cli._training",
    "tfcompress.cli.common",
    *(f"tfcompress.cli.{name}" for name in SUBCOMMANDS),
    "tfcompress.training",  # a lazy package __init__ (PEP 562)
    "tfcompress._lazy",  # that package's __getattr__ (importlib, sys, types only)
    "tfcompress.training.configs",  # the fine-tuning flags' defaults: the configs' own
    "tfcompress._config_fields",  # the configs' version and integer checks (errors only)
    "tfcompress.cli._options",  # config flags from the fields' declarations (read by ast)
}
# `python -m tfcompress ARGS...`, writing the modules loaded by exit into the file $DUMP.
_AS_MAIN = """
import atexit, os, runpy, sys
atexit.register(lambda: open(os.environ["DUMP"], "w").write("\\n".join(sorted(sys.modules))))
sys.argv = ["tfcompress", *sys.argv[1:]]
runpy.run_module("tfcompress", run_name="__main__", alter_sys=True)
"""


def _imported(args: list[str], tmp_path: Path) -> tuple[str, set[str]]:
    """Run ``python -X importtime -m tfcompress *args``: (its stdout, every module it loaded)."""
    dump = tmp_path / "modules.txt"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", _AS_MAIN, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DUMP": str(dump), "COLUMNS": "100"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    logged = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    assert "tfcompress.cli" in logged, done.stderr[-3000:]  # the log was read
    return done.stdout, logged | set(dump.read_text().split())


def _commands() -> list[str]:
    return ["", *(name.replace("_", "-") for name in SUBCOMMANDS)]


@pytest.mark.parametrize("command", _commands(), ids=lambda c: c or "tfcompress")
def test_help_imports_only_the_parser(command: str, tmp_path: Path) -> None:
    out, modules = _imported([command, "--help"] if command else ["--help"], tmp_path)
    assert out.startswith(f"usage: tfcompress {command}".rstrip()), out[:200]
    heavy = sorted(HEAVY & {name.split(".")[0] for name in modules})
    assert not heavy, f"tfcompress {command} --help imports {heavy}"
    ours = {name for name in modules if name.split(".")[0] == "tfcompress"}
    beyond = sorted(ours - LIGHT)
    assert not beyond, f"tfcompress {command} --help imports more than the parser: {beyond}"


def test_every_subcommand_is_checked() -> None:
    from tfcompress.cli import build_parser

    (action,) = [a for a in build_parser()._actions if a.dest == "command"]
    assert sorted(action.choices) == sorted(filter(None, _commands()))


@functools.cache
def _registries() -> dict[str, object]:
    """Each list of tfcompress/cli/_choices.py, as its registry builds it."""
    from tfcompress.bench.metrics import metric_names
    from tfcompress.quantization.methods.catalog import METHODS
    from tfcompress.quantization.recipes import FORMATS, list_recipes
    from tfcompress.runtime import backend_flags, list_backends
    from tfcompress.targets.base import ENTRY_POINT_GROUP, builtin_targets, get_target
    from tfcompress.targets.onnx.ort_quantize import CALIBRATION_METHODS
    from tfcompress.testing.settings import GATE_MODES

    budgets = [
        (target, field.name, field.flag, field.help, field.type)
        for target in builtin_targets()
        for field in get_target(target).budget_fields
    ]
    options = [
        (target, option.name, option.flag, option.help, option.type, option.metavar)
        for target in builtin_targets()
        for option in get_target(target).options
    ]
    return {
        "METRICS": tuple(metric_names()),
        "BACKENDS": tuple(list_backends()),
        "BACKEND_FLAGS": tuple(
            (name, f.option, f.flag, f.help, f.value, f.metavar)
            for name in list_backends()
            for f in backend_flags(name)
        ),
        "TARGETS": tuple(builtin_targets()),
        "TARGET_ENTRY_POINT_GROUP": ENTRY_POINT_GROUP,
        "TARGET_OPTIONS": tuple(options),
        "TARGET_BUDGETS": tuple(budgets),
        "RECIPES": tuple(list_recipes(include_float=True)),
        "FORMATS": tuple(FORMATS),
        "METHODS": tuple(METHODS),
        "CALIBRATION_METHODS": tuple(CALIBRATION_METHODS),
        "GATE_MODES": tuple(GATE_MODES),
    }


def _light_lists() -> list[str]:
    """Every list of _choices: its plain ones and those it reads from the classes' source."""
    plain = {n for n in vars(_choices) if n.isupper() and not n.startswith("_")}
    return sorted(plain | set(_choices._DECLARED))


def test_every_light_list_is_compared_with_its_registry() -> None:
    light = set(_light_lists())
    assert light == set(_registries()), "add the new list of cli/_choices.py to _registries()"


@pytest.mark.parametrize("name", _light_lists())
def test_light_list_is_its_registry(name: str) -> None:
    # Same names, same order: --help lists them as the registry does.
    assert getattr(_choices, name) == _registries()[name], (
        f"tfcompress/cli/_choices.py's {name} differs from its registry: update it"
    )


def test_the_opset_flags_are_one_declaration_with_the_exporters_default() -> None:
    import argparse

    from tfcompress.cli import build_parser
    from tfcompress.targets.onnx import DEFAULT_OPSET

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    parsers = sub.choices
    for verb in ("export-onnx", "quantize"):
        action = parsers[verb]._option_string_actions["--opset"]
        assert f"(default {DEFAULT_OPSET})" in action.help and action.default is None
    assert parsers["export-onnx"]._option_string_actions["--opset"].help == (
        parsers["quantize"]._option_string_actions["--opset"].help
    )


def test_a_target_file_declares_its_flags_to_the_parser(tmp_path: Path) -> None:
    # What a new target folder gives --help, read from its source: no list to edit.
    from tfcompress._declared import targets_in

    (tmp_path / "board").mkdir()
    (tmp_path / "board" / "target.py").write_text(
        "@register_target\n"
        "class Board(Target):\n"
        '    name = "board"\n'
        '    options = (TargetOption("port", "--port", "serial port", metavar="DEV"),)\n'
        "    budget_fields = (\n"
        '        BudgetField(name="max_ram", flag="--max-ram", label="RAM", help="bytes",\n'
        "                    measure=len, type=int),\n"
        "    )\n"
    )
    (board,) = targets_in(tmp_path)
    assert board.name == "board"
    assert board.options == (("port", "--port", "serial port", str, "DEV"),)
    assert board.budgets == (("max_ram", "--max-ram", "bytes", int),)


def test_a_declaration_that_is_not_a_literal_is_a_bug_named_by_class(tmp_path: Path) -> None:
    from tfcompress._declared import DeclarationError, targets_in

    (tmp_path / "odd.py").write_text(
        '@register_target\nclass Odd(Target):\n    name = "o" + "dd"\n'
    )
    with pytest.raises(DeclarationError, match=r"Odd\.name is not a literal"):
        targets_in(tmp_path)
