"""The example outputs in docs/ are real, and still match what the code emits.

`benchmarks/doc_examples.py` runs the documented commands, records their raw output in
`benchmarks/results/doc_examples.json` and writes each `example:NAME` block from it. Without
re-training, this file checks that (a) every block is exactly what the script writes from that
record and shows only values the run printed, (b) every JSON key a block shows is a key today's
CLI (`qat`, `prune`) and gate plugin (`--tfc-gate-report`) emit, found by running them for real
with training replaced by a stub result, and (c) every coverage reason docs/qat.md shows is a
string tfcompress can emit. When one fails: rerun `python benchmarks/doc_examples.py`.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tfcompress.errors import BackendUnavailableError
from tfcompress.runtime import base as runtime_base
from tfcompress.runtime.base import Runner
from tfcompress.testing import check_accuracy_drop  # loaded here, not inside the pytester run

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


def _benchmark_module(name: str) -> ModuleType:
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(name)


doc_examples = _benchmark_module("doc_examples")
markdown = _benchmark_module("_markdown")
ABBREVIATED = doc_examples.ABBREVIATED
MISSING = "tfc-doc-missing"


class _MissingRunner(Runner):
    """A backend whose hardware is never present."""

    backend = MISSING

    def __init__(self, model: Any, **_: Any) -> None:
        raise BackendUnavailableError(f"no {MISSING} accelerator found")

    def predict_batch(self, feed: dict) -> dict:  # pragma: no cover - never loads
        raise NotImplementedError


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    return json.loads(doc_examples.RESULTS.read_text())


def block(name: str) -> str:
    body = markdown.read_block(ROOT / doc_examples.BLOCK_DOCS[name], name)
    assert body is not None, f"{doc_examples.BLOCK_DOCS[name]} has no {name} block"
    return body


def key_paths(value: Any, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every key in ``value`` as a path from the top (``[]`` for any list item)."""
    paths: set[tuple[str, ...]] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if key != ABBREVIATED:
                paths.add((*prefix, key))
                paths |= key_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for item in value:
            paths |= key_paths(item, (*prefix, "[]"))
    return paths


def assert_shown_in(shown: Any, raw: Any, where: str = "$") -> None:
    """Every value ``shown`` is the recorded one, or a visible ``...`` abbreviation."""
    if isinstance(shown, dict):
        assert isinstance(raw, dict), where
        for key, item in shown.items():
            if key == ABBREVIATED:
                assert "abbreviated" in item, where
                continue
            assert key in raw, f"{where}.{key} is not in the recorded output"
            assert_shown_in(item, raw[key], f"{where}.{key}")
    elif isinstance(shown, list):
        assert isinstance(raw, list), where
        for index, item in enumerate(shown):
            if isinstance(item, str) and item.startswith(ABBREVIATED) and "abbreviated" in item:
                assert index == len(shown) - 1, f"{where}: only the tail may be cut"
                continue
            assert_shown_in(item, raw[index], f"{where}[{index}]")
    else:
        assert type(shown) is type(raw) and shown == raw, f"{where}: {shown!r} != {raw!r}"


# --- (a) the blocks are the script's output from the recorded run -----------------------------


def test_record_holds_todays_commands(results: dict[str, Any]) -> None:
    runs = results["runs"]
    assert results["date"] and results["machine"] and results["seconds"] > 0
    assert runs["qat-json"]["command"] == doc_examples.QAT_COMMAND
    for name, command in doc_examples.PRUNE_COMMANDS.items():
        assert runs[name]["command"] == command
    assert runs["gate-pytest"]["command"] == doc_examples.GATE_COMMAND
    assert results["setup"]["gates"]["test_gates.py"] == doc_examples.TEST_GATES
    assert [run["returncode"] for run in runs.values()] == [0, 0, 0, 0, 1]


@pytest.mark.parametrize("name", sorted(doc_examples.BLOCK_DOCS))
def test_block_is_what_the_script_writes(name: str, results: dict[str, Any]) -> None:
    doc, expected = doc_examples.render_blocks(results)[name]
    assert doc == doc_examples.BLOCK_DOCS[name]
    assert block(name) == expected.strip(), (
        f"{doc} {name} differs from the recorded run: python benchmarks/doc_examples.py"
    )


def test_no_example_block_outside_the_script() -> None:
    found = {
        (path.relative_to(ROOT).as_posix(), name)
        for path in sorted((ROOT / "docs").glob("*.md"))
        for name in markdown.block_names(path, "example:")
    }
    assert found == {(doc, name) for name, doc in doc_examples.BLOCK_DOCS.items()}


def test_shown_json_values_are_the_recorded_ones(results: dict[str, Any]) -> None:
    runs = results["runs"]
    for name in ("qat-json", "prune-json"):
        (shown,) = doc_examples.json_documents(block(f"example:{name}"))
        assert ABBREVIATED in shown  # cut visibly, not silently
        assert_shown_in(shown, json.loads(runs[name]["stdout"]), name)
    (shown,) = doc_examples.json_documents(block("example:gate-report"))
    assert_shown_in(shown, json.loads(runs["gate-pytest"]["files"]["gates.json"]), "gates.json")


def test_gate_text_blocks_are_lines_pytest_printed(results: dict[str, Any]) -> None:
    # Trailing blanks are dropped in the docs (editors strip them), nothing else.
    printed = {line.rstrip() for line in results["runs"]["gate-pytest"]["stdout"].splitlines()}
    for name in ("example:gate-failure", "example:gate-summary"):
        fenced = block(name).split("```")[1].strip("\n").splitlines()
        assert fenced and set(fenced) <= printed, name
    failure = block("example:gate-failure")
    assert "GateError: gate FAILED (tolerant)" in failure
    assert "interval: mcnemar" in failure


def test_json_documents_reads_wrapped_and_abbreviated_json() -> None:
    record = {"output": "x.tflite", "accuracy": 0.912345, "layers": [{"a": "b" * 90}], "z": 1}
    shown = doc_examples.abbreviate(record, ("output", "accuracy", "layers"))
    text = doc_examples.format_json(shown, width=40)
    assert len(text.splitlines()) > 1
    assert doc_examples.json_documents(f"```console\n$ cmd\n{text}\n```") == [shown]
    assert shown[ABBREVIATED] == "1 more key, abbreviated"


# --- (b) every key a block shows is one the code emits today -----------------------------------


@pytest.fixture(scope="module")
def tiny_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny untrained Dense net, a float32 .tflite of it and 40 labelled 8x8 samples."""
    import keras

    import tfcompress

    root = tmp_path_factory.mktemp("doc_examples")
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((8, 8, 1)), keras.layers.Flatten(), keras.layers.Dense(10, "softmax")],
        name="tiny",
    )
    rng = np.random.default_rng(0)
    files = {
        "model": root / "tiny.keras",
        "candidate": root / "tiny.tflite",
        "data": root / "data.npz",
    }
    model.save(files["model"])
    tfcompress.quantize(model, recipe="float32").save(files["candidate"])
    np.savez(files["data"], x=rng.random((40, 8, 8, 1), np.float32), y=np.arange(40) % 10)
    # Run a gate once here so LiteRT is imported outside the in-process pytester run below
    # (which unloads what it imported).
    check_accuracy_drop(files["model"], files["candidate"], files["data"])
    return files


def _stub_training_result(technique: str) -> Any:
    from tfcompress.training.coverage import LayerCoverage
    from tfcompress.training.result import TrainingResult
    from tfcompress.training.sparsity import WeightSparsity

    return TrainingResult(
        technique=technique,
        options={"epochs": 1},
        source="tiny",
        recipe="int8",
        model_content=b"stub",
        reference_content=b"stub",
        float_content=b"stub",
        accuracy=0.5,
        keras_accuracy=0.5,
        reference_accuracy=0.5,
        eval_samples=40,
        coverage=(
            LayerCoverage("dense", "Dense", "pruned"),
            LayerCoverage("prelu", "PReLU", "skipped", "stub reason"),
        ),
        weights=(WeightSparsity("kernel", "dense", "dense", "int8", (10, 64), 0.5, 3),),
        train_samples=40,
        train_seconds=0.1,
        losses=(0.1,),
        bridge_difference=0.0,
    )


@pytest.mark.parametrize(("command", "name"), [("qat", "qat-json"), ("prune", "prune-json")])
def test_shown_cli_keys_are_emitted(
    command: str,
    name: str,
    tiny_files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    from tfcompress.cli import main

    # The real CLI (argparse, model loading, output and JSON) with the training stubbed out:
    # the keys come from TrainingResult.to_dict() and the CLI, whatever training produced.
    # The verb lives in tfcompress/training/<command>.py (the package's attribute of that name
    # is the function itself, so the module is looked up by its import name).
    module = importlib.import_module(f"tfcompress.training.{command}")
    monkeypatch.setattr(module, command, lambda model, **_: _stub_training_result(command))
    data = str(tiny_files["data"])
    out = tmp_path / "out.tflite"
    argv = [command, str(tiny_files["model"]), "--train", data, "--eval", data]
    code = main([*argv, "--out", str(out), "--json"])
    captured = capfd.readouterr()
    assert code == 0, captured.err
    emitted = key_paths(json.loads(captured.out))
    (shown,) = doc_examples.json_documents(block(f"example:{name}"))
    assert key_paths(shown) <= emitted, sorted(key_paths(shown) - emitted)


def test_shown_gate_report_keys_are_emitted(
    pytester: pytest.Pytester, tiny_files: dict[str, Path]
) -> None:
    paths = {key: str(path) for key, path in tiny_files.items()}
    pytester.makepyfile(
        test_tiny=f"""
        import pytest


        @pytest.mark.accuracy_gate(max_drop=0.5, mode="strict")
        def test_pass(accuracy_gate):
            accuracy_gate({paths["model"]!r}, {paths["candidate"]!r}, {paths["data"]!r})


        @pytest.mark.accuracy_gate(backend={MISSING!r})
        def test_skip(accuracy_gate):
            accuracy_gate({paths["model"]!r}, {paths["candidate"]!r}, {paths["data"]!r})
        """
    )
    # A backend that is never available, so the skipped record is emitted on every machine.
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(runtime_base.BACKENDS, MISSING, _MissingRunner)
        result = pytester.runpytest("--tfc-gate-report=gates.json", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=1)
    emitted = key_paths(json.loads((pytester.path / "gates.json").read_text()))
    (shown,) = doc_examples.json_documents(block("example:gate-report"))
    assert key_paths(shown) <= emitted, sorted(key_paths(shown) - emitted)


# --- (c) every coverage reason shown is one the code can emit ---------------------------------


def reason_templates() -> list[re.Pattern[str]]:
    """The strings (f-strings as patterns) in the modules that write coverage reasons."""
    patterns: list[re.Pattern[str]] = []
    for module in ("coverage", "qat"):
        tree = ast.parse((ROOT / "tfcompress" / "training" / f"{module}.py").read_text())
        parts_of_fstrings = {
            id(part)
            for node in ast.walk(tree)
            if isinstance(node, ast.JoinedStr)
            for part in node.values
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                pattern = "".join(
                    re.escape(part.value) if isinstance(part, ast.Constant) else r"\S+"
                    for part in node.values
                )
                patterns.append(re.compile(pattern))
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value
                and id(node) not in parts_of_fstrings
            ):
                patterns.append(re.compile(re.escape(node.value)))
    return patterns


def test_shown_coverage_reasons_are_emitted_by_the_code() -> None:
    rows = [
        [cell.strip() for cell in line.strip("|").split(" | ")]
        for line in block("example:qat-coverage").splitlines()
        if line.startswith("| ") and not line.startswith("| layer |")
    ]
    assert rows and all(len(row) == 4 for row in rows)
    reasons = {row[3] for row in rows if row[3]}
    assert {row[2] for row in rows if row[3]} == {"skipped"}  # only skipped rows give a reason
    assert reasons, "the example shows no skipped layer, so it checks nothing"
    templates = reason_templates()
    for reason in reasons:
        assert any(t.fullmatch(reason) for t in templates), f"no code emits {reason!r}"


def test_write_block_replaces_only_its_block(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("intro\n<!-- BEGIN example:a -->\nold\n<!-- END example:a -->\noutro\n")
    markdown.write_block(doc, "example:a", "new\nlines\n")
    assert doc.read_text() == (
        "intro\n<!-- BEGIN example:a -->\nnew\nlines\n<!-- END example:a -->\noutro\n"
    )
    assert markdown.read_block(doc, "example:a") == "new\nlines"
    assert markdown.block_names(doc, "example:") == ["example:a"]
    with pytest.raises(ValueError, match="expected one"):
        markdown.write_block(doc, "example:b", "text")  # never appended at a guessed place
