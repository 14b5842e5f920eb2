"""Every command on every input format, target and backend: it works or says what to do.

The cells are generated from what the CLI and the registries declare (:func:`cells`): the
verbs from the parser, the targets, runtime backends, PTQ methods and metrics from their
registries. A cell works (exit 0, its output exists and is what it says, every option it
passed shows in the result) or is refused in one line (exit 2) whose advised flags exist on
the verb. Never exit 3, never a traceback. The models are tiny and shaped like real ones
(``tests/_matrix_models.py``), built once per test run; the cells that train are few.

``MATRIX_LOG=FILE`` appends each cell's exit code and last line of stderr to FILE: the
matrix as a person reads it (which cells work, which are refused and why).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _matrix_models import FORMATS
from _matrix_models import build as build_models
from _shared import build_once

from tfcompress.cli import build_parser, main

FAST_BENCHMARK = ("--runs", "1", "--min-seconds", "0", "--warmup-seconds", "0")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]")
# The positionals that name the model a verb reads (benchmark takes several, gate two).
MODEL_ARGUMENTS = {"model", "artifacts", "reference"}
# What the cells that train run on: the training verbs train on one Keras format each and
# are refused on the others' formats in a second (tests/test_training*.py train the rest).
TRAINED_ON = {"prune": "keras"}
TRAINING = ("--epochs", "2", "--batch-size", "4")
KERAS_FORMATS = {"keras", "h5", "savedmodel"}
# Only the verbs that take no model: what each is given (zoo lists one family). `demo`
# trains on MNIST whatever it is given (a minute); tests/test_doc_commands.py runs it.
NO_MODEL = {"zoo": ("mobilenet_v1",)}
LEFT_OUT = {"demo"}
# The costly verbs: one cell per format, each with the next target and PTQ method in turn.
CONVERTING = {"quantize", "compress"}
COMPRESS_FAST = ("--no-measure-latency",)
# The flag that names the backend(s) of each verb that runs one: its config field's name.
BACKEND_FLAGS = {"benchmark": "--backends", "gate": "--backend"}
# Where the turns start: cpu's compress search (every recipe) lands on the .tflite, where
# LiteRT Quantizer makes it the shortest; a Keras model gets edgetpu's (integer only).
SHIFT = 1


@dataclass(frozen=True)
class Cell:
    """One command line and what its success must show."""

    verb: str
    model: str | None  # a key of _matrix_models.FORMATS, or None
    extra: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return "-".join(str(p) for p in (self.verb, self.model, *self.extra[1::2]) if p)


@functools.cache
def _verbs() -> dict[str, argparse.ArgumentParser]:
    actions = build_parser()._actions
    return next(a for a in actions if isinstance(a, argparse._SubParsersAction)).choices


def _registries() -> dict[str, list[str]]:
    """The registries' names, through their public accessors (one place to repoint)."""
    from tfcompress.bench.metrics import metric_names
    from tfcompress.quantization.methods.registry import method_names
    from tfcompress.runtime.base import list_backends
    from tfcompress.targets.base import list_targets

    return {
        "target": list_targets(),
        "backend": list_backends(),
        "method": list(method_names()),
        "metric": list(metric_names()),
    }


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def _takes_model(parser: argparse.ArgumentParser) -> bool:
    return any(a.dest in MODEL_ARGUMENTS for a in parser._actions) or "--model" in _options(parser)


def cells() -> list[Cell]:
    """The matrix: every verb on every format; the registries' names spread over the cells.

    Each target goes to every verb with ``--target``, each backend to ``benchmark`` and
    ``gate``, each PTQ method to ``quantize`` and each metric to ``gate``: the costly verbs
    take them in turn on their format cells (a cell per target, not per target x format).
    """
    verbs, names = _verbs(), _registries()
    found = []
    for verb, parser in verbs.items():
        if verb in LEFT_OUT:
            continue
        options = _options(parser)
        if not _takes_model(parser):
            targets = names["target"] if "--target" in options else [None]
            found += [Cell(verb, None, _named("--target", t)) for t in targets]
            continue
        turns = {"--target": names["target"] if "--target" in options else []}
        if verb == "quantize":
            turns["--methods"] = names["method"]
        if verb == "gate":  # top5 needs 5 classes; the models have 3
            turns["--metric"] = [m.replace("top5", "top2") for m in names["metric"]]
        trains = "--epochs" in options
        formats = [m for m in FORMATS if not trains or FORMATS[m] not in KERAS_FORMATS
                   or TRAINED_ON.get(verb) == m]  # fmt: skip
        rounds = max([len(formats)] + [len(v) for v in turns.values() if verb not in CONVERTING])
        for index in range(rounds):
            extra: tuple[str, ...] = ()
            for flag, values in turns.items():
                if values:
                    extra += _named(flag, values[(index + SHIFT) % len(values)])
            found.append(Cell(verb, formats[index % len(formats)], extra))
    for backend in names["backend"]:
        found += [Cell(v, "tflite_dynamic", (f, backend)) for v, f in BACKEND_FLAGS.items()]
    return found


def _named(flag: str, value: str | None) -> tuple[str, ...]:
    return () if value is None else (flag, value)


# The JSON key a result shows each option's value under.
SHOWN_AS = {"--target": "target", "--backend": "backend", "--backends": "backend",
            "--methods": "methods",
            "--metric": "metric"}  # fmt: skip


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_once(tmp_path_factory, "matrix_models", build_models)


def _argv(
    cell: Cell, parser: argparse.ArgumentParser, files: dict[str, Path], out: Path
) -> list[str]:
    options = _options(parser)
    data = files[f"{cell.model}_data"] if cell.model else files["keras_data"]
    argv: list[str] = [cell.verb]
    for action in parser._actions:
        if action.option_strings or action.dest in {"help", "command"}:
            continue
        if action.dest in MODEL_ARGUMENTS:
            argv.append(str(files[cell.model]))
            if cell.verb == "gate":  # the same model as reference and candidate
                argv.append(str(files[cell.model]))
        elif action.dest == "source":
            argv.append(str(data))
    fill = {
        "--out": str(out),
        "--out-dir": str(out.parent / "made"),
        "--data": str(data),
        "--eval": str(data),
        "--train": str(data),
    }
    for action in parser._actions:
        flag = next((s for s in action.option_strings if s in fill), None)
        # every file a verb reads or writes, but training data only where it is required
        if flag and (action.required or flag != "--train"):
            argv += [flag, fill[flag]]
    if "--model" in options and cell.model:
        argv += ["--model", str(files[cell.model])]
    if cell.verb == "benchmark":
        argv += FAST_BENCHMARK
    if "--epochs" in options:
        argv += TRAINING if "--batch-size" in options else TRAINING[:2]
    if cell.verb == "compress":
        argv += COMPRESS_FAST
    argv += NO_MODEL.get(cell.verb, ())
    if cell.model == "h5" and "--custom-objects" in options:
        argv += ["--custom-objects", str(files["layers"])]
    if "--json" in options:
        argv.append("--json")
    return [*argv, *cell.extra]


CELLS = cells()


@pytest.mark.parametrize("cell", CELLS, ids=[c.id for c in CELLS])
def test_cell_works_or_says_what_to_do(cell: Cell, files, tmp_path, capsys) -> None:
    parser = _verbs()[cell.verb]
    onnx = cell.verb == "export-onnx" or (cell.model and FORMATS[cell.model] == "onnx")
    suffix = "" if cell.verb == "export-c" else ".onnx" if onnx else ".tflite"
    out = tmp_path / f"out{suffix}"
    argv = _argv(cell, parser, files, out)
    code = main(argv)
    captured = capsys.readouterr()
    if os.environ.get("MATRIX_LOG"):  # what each cell did, for a person reading the matrix
        with open(os.environ["MATRIX_LOG"], "a") as log:
            log.write(f"{cell.id}: {code}: {captured.err.strip().splitlines()[-1:]}\n")
    assert "Traceback" not in captured.err, captured.err
    assert code in (0, 2), f"{argv}: exit {code}: {captured.err[-2000:]}"
    if code == 2:
        _assert_one_line_naming_what_to_do(cell.verb, parser, captured.err)
        return
    _assert_output(cell, argv, out, captured.out)


def _assert_one_line_naming_what_to_do(verb: str, parser, err: str) -> str:
    prefix = f"tfcompress {verb}: error: "
    lines = [line for line in err.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, err
    assert err.rstrip().endswith(lines[0]), err  # the last word, nothing after it
    # A command the message quotes (`tfcompress quantize ... --target mcu`) takes its flags.
    verbs = _verbs()
    said, *quoted = re.split(r"tfcompress ([a-z-]+)", lines[0][len(prefix) :])
    for speaker, words in [(verb, said), *zip(quoted[::2], quoted[1::2], strict=True)]:
        assert speaker in verbs, f"names a command tfcompress lacks: {lines[0]}"
        missing = set(FLAG.findall(words)) - _options(verbs[speaker])
        assert not missing, f"advises {missing}, which `{speaker}` lacks: {lines[0]}"
    return lines[0]


def _assert_output(cell: Cell, argv: list[str], out: Path, stdout: str) -> None:
    if "--out" in argv:
        if out.suffix == ".tflite":
            assert out.read_bytes()[4:8] == b"TFL3"
        elif out.suffix == ".onnx":
            import onnx

            onnx.checker.check_model(onnx.load(str(out)))
        else:
            assert out.with_suffix(".cc").stat().st_size > 0
    if "--json" in argv:
        result = json.loads(stdout)
        for flag, value in zip(cell.extra[::2], cell.extra[1::2], strict=True):
            key = SHOWN_AS[flag]
            assert value in _values(result, key), f"{key}={value} not in {stdout[:2000]}"


def _values(result: Any, key: str) -> Iterator[str]:
    """Every value under ``key`` anywhere in the JSON result, as text."""
    if isinstance(result, dict):
        for name, value in result.items():
            if name == key:
                yield from (value if isinstance(value, list) else [value])
            yield from _values(value, key)
    elif isinstance(result, list):
        for value in result:
            yield from _values(value, key)


def _crashing_tflite() -> bytes:
    """A valid int8 ``.tflite`` LiteRT 2.3 dies on (SIGSEGV): QUANTIZE to a scale of 1e-45.

    A denormal scale passes the structural checks (it is finite and positive); LiteRT's
    QUANTIZE kernel then segfaults when the file first runs, on zeros, in the load probe.
    """
    from _tflite_craft import build, op, tensor

    return build(
        [tensor([1, 8], "FLOAT32"), tensor([1, 8], scale=1e-45), tensor([1, 8], "FLOAT32")],
        [op("QUANTIZE", [0], [1]), op("DEQUANTIZE", [1], [2])],
    )


@pytest.fixture(scope="module")
def crashing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("crashing") / "crashes.tflite"
    path.write_bytes(_crashing_tflite())
    return path


def test_benchmark_measures_the_others_beside_an_artifact_that_crashes_litert(
    files, crashing, capsys
) -> None:
    good = files["tflite_dynamic"]
    code = main(["benchmark", str(good), str(crashing), "--backends", "cpu", "--json",
                 *FAST_BENCHMARK])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 2  # a row failed (docs/benchmarking.md)
    rows = {row["artifact"]: row["status"] for row in json.loads(captured.out)["rows"]}
    assert rows[good.name] == "ok"
    assert rows[crashing.name].startswith("error: ") and "crashed (SIGSEGV)" in rows[crashing.name]
    _assert_one_line_naming_what_to_do("benchmark", _verbs()["benchmark"], captured.err)


@pytest.mark.parametrize("json_flag", [True, False], ids=["json", "table"])
def test_gate_reports_the_artifact_that_crashes_litert_as_its_row(
    files, crashing, capsys, json_flag
) -> None:
    argv = ["gate", str(files["keras"]), str(crashing), "--eval", str(files["keras_data"])]
    code = main(argv + ["--json"] * json_flag)
    captured = capsys.readouterr()
    assert code == 2  # an error, not a failed gate (docs/gates.md)
    line = _assert_one_line_naming_what_to_do("gate", _verbs()["gate"], captured.err)
    assert "crashed (SIGSEGV)" in line and crashing.name in line
    if json_flag:
        report = json.loads(captured.out)
        assert report["passed"] is False and report["checks"] == []
        (row,) = report["errors"]
        assert row["role"] == "candidate" and row["artifact"] == crashing.name
        assert "crashed (SIGSEGV)" in row["status"]
    else:
        assert f"candidate {crashing.name}: error: " in captured.out
