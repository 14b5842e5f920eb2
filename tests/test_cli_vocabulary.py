"""Every CLI choice list is its registry: a recipe, target or backend added once shows up here.

The commands build ``choices`` and help lists from light copies of the registries' names
(``tfcompress/cli/_choices.py``, so ``--help`` imports none of them); this file reads each
parser back and compares with the registry itself, so a copy that goes stale fails here.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from tfcompress.cli import build_parser


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def _choices(command: str, flag: str) -> list[str]:
    action = _subparsers()[command]._option_string_actions[flag]
    if action.choices is None:  # checked against the registry when read: shown as {a,b,c}
        return action.metavar.strip("{}").split(",")
    return list(action.choices)


def _registries() -> list[tuple[str, str, list[str]]]:
    from tfcompress.compression.candidates import OBJECTIVES as COMPRESS_OBJECTIVES
    from tfcompress.quantization.recipes import FORMATS, list_io_types, list_recipes
    from tfcompress.runtime import list_backends
    from tfcompress.selection.config import OBJECTIVES as SELECT_OBJECTIVES
    from tfcompress.targets.base import list_targets
    from tfcompress.targets.onnx.ort_quantize import CALIBRATION_METHODS
    from tfcompress.testing.settings import GATE_MODES
    from tfcompress.testing.stats import INTERVAL_METHODS
    from tfcompress.training.configs import EXPORT_RECIPES, SCHEDULES
    from tfcompress.training.qat import PRESERVE

    rows = [
        ("quantize", "--recipe", list_recipes(include_float=True)),
        ("quantize", "--input-type", list_io_types()),
        ("quantize", "--output-type", list_io_types()),
        ("quantize", "--format", list(FORMATS)),
        ("quantize", "--calibration-method", list(CALIBRATION_METHODS)),
        ("quantize", "--target", list_targets()),
        ("compress", "--target", list_targets()),
        ("compress", "--objective", list(COMPRESS_OBJECTIVES)),
        ("select", "--target", list_targets()),
        ("select", "--objective", list(SELECT_OBJECTIVES)),
        ("gate", "--interval", ["auto", *INTERVAL_METHODS]),
        ("gate", "--backend", list_backends()),
        ("prune", "--schedule", list(SCHEDULES)),
        ("qat", "--preserve", list(PRESERVE)),
    ]
    for command in ("gate", "quantize", "qat", "prune", "cluster", "compress"):
        rows.append((command, "--mode", list(GATE_MODES)))
    for command in ("prune", "cluster"):
        rows.append((command, "--then", list(EXPORT_RECIPES)))
    return rows


@pytest.mark.parametrize(("command", "flag", "registry"), _registries())
def test_choices_are_the_registry(command: str, flag: str, registry: list[str]) -> None:
    assert _choices(command, flag) == registry


def test_help_lists_every_backend() -> None:
    from tfcompress.runtime import list_backends

    help_text = _subparsers()["benchmark"]._option_string_actions["--backends"].help
    assert all(name in help_text for name in list_backends()), help_text


def test_building_every_parser_imports_no_tensorflow() -> None:
    # The parser's names are plain data (cli/_choices.py), so --help stays light; what it
    # imports is pinned module by module in tests/test_cli_help.py.
    code = (
        "import sys; from tfcompress.cli import build_parser; build_parser(); "
        "print(sorted({'tensorflow', 'keras', 'onnxruntime'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stderr[-2000:]
