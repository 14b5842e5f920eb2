"""Run the commands docs/qat.md, docs/pruning.md and docs/gates.md show; paste their real output.

Run: .venv/bin/python benchmarks/doc_examples.py   (``--render``: only rewrite the blocks)

Every example output in those docs sits between ``<!-- BEGIN example:NAME -->`` and
``<!-- END example:NAME -->``. This script builds the files the commands name (``model.keras``,
``train.npz``, ``val.npz``: the small CNN trained 3 epochs on the bundled MNIST digits, as
docs/qat.md says; the gate models of ``tfcompress/samples/gate_models.py``) in a temporary
folder, runs
each documented command there as a user would (``python -m tfcompress ...``, ``python -m
pytest ...``), records the raw outputs in ``benchmarks/results/doc_examples.json`` and writes
each block from that record. Long outputs are abbreviated visibly (an ``"..."`` key or a
bracketed line says what was left out); no value is typed by hand or rounded here.

The rendering half (:func:`render_blocks`, :func:`json_documents`) needs no TensorFlow, so
``tests/test_doc_examples.py`` checks the docs against the record without re-training.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from _markdown import machine_line, write_block

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "doc_examples.json"
SCRIPT = "benchmarks/doc_examples.py"
WIDTH = 100  # wrap JSON at the docs' line length
TIMEOUT_S = 1800  # each command takes 1-2 minutes on two cores; a hang must not stall `make bench`

# The commands exactly as the docs show them; "python" becomes this interpreter when run.
QAT_COMMAND = (
    "python -m tfcompress qat model.keras --train train.npz --eval val.npz --epochs 1 "
    "--out model_qat.tflite --json"
)
PRUNE_COMMANDS = {
    "prune-json": (
        "python -m tfcompress prune model.keras --train train.npz --eval val.npz "
        "--target-sparsity 0.75 --then int8 --out pruned.tflite --json"
    ),
    "prune-2-4": (
        "python -m tfcompress prune model.keras --train train.npz --eval val.npz --structure 2:4 "
        "--out p24.tflite"
    ),
    "cluster-16": (
        "python -m tfcompress cluster model.keras --train train.npz --eval val.npz --clusters 16 "
        "--then int8 --out c16.tflite"
    ),
}
GATE_COMMAND = "python -m pytest test_gates.py --tfc-gate-report gates.json"

# The test file docs/gates.md describes (one gate passes, one fails, one finds no backend),
# pointed at the files tfcompress/samples/gate_models.py builds.
TEST_GATES = """\
import pytest


@pytest.mark.accuracy_gate(max_drop=0.02)
def test_int8_within_budget(accuracy_gate):
    accuracy_gate("reference.keras", "int8.tflite", "test.npz")


@pytest.mark.accuracy_gate(max_drop=0.05, mode="tolerant")
def test_damaged_model(accuracy_gate):
    accuracy_gate("reference.keras", "damaged.tflite", "test.npz")


@pytest.mark.accuracy_gate(backend="edgetpu")
def test_on_missing_accelerator(accuracy_gate):
    accuracy_gate("reference.keras", "int8.tflite", "test.npz")
"""

# Which doc holds each block. The test checks every example block in these docs is listed.
BLOCK_DOCS = {
    "example:qat-json": "docs/qat.md",
    "example:qat-coverage": "docs/qat.md",
    "example:prune-json": "docs/pruning.md",
    "example:gate-failure": "docs/gates.md",
    "example:gate-summary": "docs/gates.md",
    "example:gate-report": "docs/gates.md",
}

# Keys of the CLI's --json record worth a reader's eye; the rest are counted under "...".
QAT_KEYS = (
    "output",
    "technique",
    "recipe",
    "size_bytes",
    "gzip_bytes",
    "accuracy",
    "keras_accuracy",
    "reference_accuracy",
    "accuracy_drop",
    "skipped_layers",
)
PRUNE_KEYS = (
    "output",
    "technique",
    "recipe",
    "size_bytes",
    "gzip_bytes",
    "reference_size_bytes",
    "reference_gzip_bytes",
    "float32_gzip_bytes",
    "sparsity",
    "accuracy",
    "reference_accuracy",
    "accuracy_drop",
    "skipped_layers",
)
GATE_SUMMARY_KEYS = ("test", "index", "status", "passed", "drop", "ci_low", "ci_high", "reason")
HUMAN_HEAD_LINES = 2  # result headline and sizes: the lines pruning.md's prose is about
ABBREVIATED = "..."  # the key (or list item prefix) that marks what an example leaves out


# --- rendering: pure functions of the recorded results -----------------------------------------


def format_json(value: Any, *, indent: int = 0, width: int = WIDTH) -> str:
    """Compact JSON (the CLI's one-line form) wrapped between items at ``width`` columns.

    Args:
        value: JSON-ready data.
        indent: Column the text starts at (for nested values).
        width: Line length to wrap at.

    Returns:
        Valid JSON: only whitespace between tokens differs from ``json.dumps(value)``.
    """
    flat = json.dumps(value, ensure_ascii=False)
    if indent + len(flat) <= width or not isinstance(value, dict | list) or not value:
        return flat
    pad = " " * (indent + 1)
    if isinstance(value, list):
        items = [format_json(item, indent=indent + 1, width=width) for item in value]
        return "[" + (",\n" + pad).join(items) + "]"
    lines: list[str] = []
    line = "{"
    for position, (key, item) in enumerate(value.items()):
        head = json.dumps(key, ensure_ascii=False) + ": "
        tail = "}" if position == len(value) - 1 else ","
        piece = f"{head}{json.dumps(item, ensure_ascii=False)}{tail}"
        if line.strip() not in {"", "{"} and _end(line, lines, indent) + 1 + len(piece) > width:
            lines.append(line)
            line = pad
        separator = " " if line.strip() not in {"", "{"} else ""
        text = format_json(
            item, indent=_end(line, lines, indent) + len(separator) + len(head), width=width
        )
        line = f"{line}{separator}{head}{text}{tail}"
        if "\n" in text:  # a wrapped container ends its line
            lines.append(line)
            line = pad
    if line.strip():
        lines.append(line)
    return "\n".join(lines)


def _end(line: str, done: Sequence[str], indent: int) -> int:
    """Column after ``line`` (the first line starts at ``indent``, later ones hold their pad)."""
    return (0 if done else indent) + len(line)


def abbreviate(record: Mapping[str, Any], keep: Sequence[str]) -> dict[str, Any]:
    """``record`` with only the ``keep`` keys (in the record's order) and an ``"..."`` key.

    Values are copied verbatim; the ``"..."`` entry says how many keys were left out.
    """
    shown = {key: value for key, value in record.items() if key in keep}
    left_out = len(record) - len(shown)
    if left_out:
        shown[ABBREVIATED] = f"{left_out} more key{'s' if left_out != 1 else ''}, abbreviated"
    return shown


def json_documents(body: str) -> list[Any]:
    """Every JSON object shown in a doc block (one that starts on a line beginning with ``{``).

    Args:
        body: The text of a block, fences and prose included.

    Returns:
        The parsed objects, in order.

    Raises:
        ValueError: A ``{`` line starts something that never parses as JSON.
    """
    documents: list[Any] = []
    lines = body.splitlines()
    index = 0
    while index < len(lines):
        if not lines[index].startswith("{"):
            index += 1
            continue
        for end in range(index + 1, len(lines) + 1):
            try:
                documents.append(json.loads("\n".join(lines[index:end])))
            except json.JSONDecodeError:
                continue
            index = end
            break
        else:
            raise ValueError(f"unparsable JSON from line {index + 1}: {lines[index][:60]}")
    return documents


def _prose(text: str) -> str:
    """A sentence of a block, wrapped like the hand-written lines around it."""
    return textwrap.fill(text, WIDTH, break_long_words=False, break_on_hyphens=False)


def _ran_on(results: Mapping[str, Any]) -> str:
    return f"on {results['machine']}, {results['date']}"


def _console(commands: Sequence[tuple[str, str]]) -> str:
    lines = ["```console"]
    for command, output in commands:
        lines += [f"$ {command}", *output.splitlines()]
    return "\n".join([*lines, "```"])


def _human_excerpt(stdout: str) -> str:
    """The headline lines of a human-readable result and its last line, the rest counted."""
    lines = stdout.rstrip("\n").splitlines()
    if len(lines) <= HUMAN_HEAD_LINES + 1:
        return "\n".join(lines)
    left_out = len(lines) - HUMAN_HEAD_LINES - 1
    marker = f"[... {left_out} lines abbreviated: coverage and per-kernel tables ...]"
    return "\n".join([*lines[:HUMAN_HEAD_LINES], marker, lines[-1]])


def _cli_record(run: Mapping[str, Any]) -> dict[str, Any]:
    (line,) = run["stdout"].splitlines()  # --json prints exactly one line
    return json.loads(line)


def _kept(shown: Mapping[str, Any]) -> int:
    return len(shown) - (ABBREVIATED in shown)


def _abbreviated_note(
    record: Mapping[str, Any], shown: Mapping[str, Any], results: Mapping[str, Any]
) -> str:
    return (
        f"Real output of that command (`{SCRIPT}`, {_ran_on(results)}), wrapped; "
        f'{_kept(shown)} of its {len(record)} keys shown, `"{ABBREVIATED}"` stands for the rest '
        "(all of it is in `benchmarks/results/doc_examples.json`)."
    )


def render_qat_json(results: Mapping[str, Any]) -> str:
    """The ``qat --json`` console block of docs/qat.md."""
    run = results["runs"]["qat-json"]
    record = _cli_record(run)
    shown = abbreviate(record, QAT_KEYS)
    console = _console([(run["command"], format_json(shown))])
    return f"{console}\n\n{_prose(_abbreviated_note(record, shown, results))}"


def render_prune_json(results: Mapping[str, Any]) -> str:
    """The ``prune``/``cluster`` console block of docs/pruning.md."""
    runs = results["runs"]
    record = _cli_record(runs["prune-json"])
    shown = abbreviate(record, PRUNE_KEYS)
    console = _console(
        [
            (runs["prune-json"]["command"], format_json(shown)),
            *(
                (runs[name]["command"], _human_excerpt(runs[name]["stdout"]))
                for name in ("prune-2-4", "cluster-16")
            ),
        ]
    )
    note = (
        f"Real output of these commands (`{SCRIPT}`, {_ran_on(results)}). The JSON is wrapped, "
        f'with {_kept(shown)} of its {len(record)} keys shown (`"{ABBREVIATED}"` stands for '
        "the rest); the human-readable reports are cut where marked. Everything is in "
        "`benchmarks/results/doc_examples.json`."
    )
    return f"{console}\n\n{_prose(note)}"


def _markdown_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def render_qat_coverage(results: Mapping[str, Any]) -> str:
    """The coverage table of docs/qat.md: ``result.coverage`` as ``tfcompress.qat`` made it."""
    coverage = results["coverage"]
    rows = [_markdown_row(["layer", "kind", "status", "reason"]), "|---|---|---|---|"]
    rows += [
        _markdown_row([r["layer"], r["kind"], r["status"], r["reason"]]) for r in coverage["rows"]
    ]
    note = (
        f"`result.coverage` of `{coverage['call']}` on that model (`{SCRIPT}`, {_ran_on(results)})."
    )
    return "\n".join(rows) + f"\n\n{_prose(note)}"


def _gate_lead(results: Mapping[str, Any]) -> str:
    return (
        f"From `{results['runs']['gate-pytest']['command']}` on the digits test models of "
        f"`tfcompress/samples/gate_models.py` (the three tests of `TEST_GATES` in `{SCRIPT}`, "
        f"{_ran_on(results)}):"
    )


def render_gate_failure(results: Mapping[str, Any]) -> str:
    """The ``E   ...`` lines pytest printed for the failing gate."""
    stdout = results["runs"]["gate-pytest"]["stdout"]
    # Trailing blanks go: pytest pads its blank "E" lines, and editors strip them on save.
    lines = [line.rstrip() for line in stdout.splitlines() if line.startswith("E")]
    lines = [line for line in lines if line == "E" or line.startswith("E   ")]
    return "\n".join([_prose(_gate_lead(results)), "", "```", *lines, "```"])


def render_gate_summary(results: Mapping[str, Any]) -> str:
    """The ``tfcompress accuracy gates`` section of the same pytest run."""
    lines = results["runs"]["gate-pytest"]["stdout"].splitlines()
    start = next(i for i, line in enumerate(lines) if " tfcompress accuracy gates " in line)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("=")), len(lines))
    return "\n".join(["```", *(line.rstrip() for line in lines[start:end]), "```"])


def render_gate_report(results: Mapping[str, Any]) -> str:
    """The ``--tfc-gate-report`` JSON of the same run: the failed gate whole, others cut."""
    report = json.loads(results["runs"]["gate-pytest"]["files"]["gates.json"])
    gates = []
    for gate in report["gates"]:
        if gate["status"] != "failed":
            gates.append(abbreviate(gate, GATE_SUMMARY_KEYS))
            continue
        shown = dict(gate)
        classes = shown.get("per_class") or []
        if len(classes) > 1:
            shown["per_class"] = [
                classes[0],
                f"{ABBREVIATED} {len(classes) - 1} more classes, abbreviated",
            ]
        gates.append(shown)
    shown_report = {**report, "gates": gates}
    note = (
        "The file is written with `indent=2`; here it is wrapped compactly, the passing and "
        f'skipped gates cut to a few keys (`"{ABBREVIATED}"` counts the rest) and `per_class` '
        "to its worst class. Nothing else is changed; the whole file is in "
        "`benchmarks/results/doc_examples.json`."
    )
    return "\n".join(["```json", format_json(shown_report), "```", "", _prose(note)])


RENDERERS = {
    "example:qat-json": render_qat_json,
    "example:qat-coverage": render_qat_coverage,
    "example:prune-json": render_prune_json,
    "example:gate-failure": render_gate_failure,
    "example:gate-summary": render_gate_summary,
    "example:gate-report": render_gate_report,
}


def render_blocks(results: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """Every example block, from the recorded results.

    Args:
        results: The content of ``benchmarks/results/doc_examples.json``.

    Returns:
        ``{block name: (doc path relative to the repository, block body)}``.
    """
    return {name: (BLOCK_DOCS[name], render(results)) for name, render in RENDERERS.items()}


# --- running: build the files, run the commands, record ----------------------------------------


def _environment() -> dict[str, str]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "COLUMNS": "80"}
    # A user's pytest options would change the gate run's output; the doc shows the default.
    env.pop("PYTEST_ADDOPTS", None)
    return env


def run_command(
    command: str, cwd: Path, *, expect: int, files: Sequence[str] = ()
) -> dict[str, Any]:
    """Run one documented command in ``cwd`` with this interpreter as ``python``.

    Args:
        command: The command as the doc shows it.
        cwd: The folder holding the files it names.
        expect: The exit code the doc's example shows (1 for a failing gate run).
        files: Outputs to record besides stdout, relative to ``cwd``.

    Returns:
        The command, exit code, wall seconds, stdout and the named files' text.

    Raises:
        RuntimeError: The command exited otherwise than expected (stderr's tail attached).
    """
    argv = shlex.split(command)
    argv[0] = sys.executable  # "python" in the doc is whatever runs tfcompress
    start = time.perf_counter()
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=_environment(),
        capture_output=True,
        text=True,
        check=False,
        timeout=TIMEOUT_S,
    )
    seconds = time.perf_counter() - start
    if done.returncode != expect:
        raise RuntimeError(
            f"{command!r} exited {done.returncode}, expected {expect}:\n"
            f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
        )
    print(f"{seconds:6.1f} s  {command}", file=sys.stderr)
    return {
        "command": command,
        "returncode": done.returncode,
        "seconds": round(seconds, 1),
        "stdout": done.stdout,
        "files": {name: (cwd / name).read_text() for name in files},
    }


def prepare_mnist(folder: Path) -> dict[str, Any]:
    """``model.keras``, ``train.npz`` and ``val.npz`` as docs/qat.md describes them."""
    import numpy as np

    from tfcompress.samples.cnn import small_cnn, train_classifier
    from tfcompress.samples.datasets import mnist

    folder.mkdir(parents=True)
    split = mnist(test_fraction=0.25, seed=0)
    model = train_classifier(small_cnn(flavour="keras3"), split.train, epochs=3)
    model.save(folder / "model.keras")
    np.savez(folder / "train.npz", x=split.train.x, y=split.train.y)
    np.savez(folder / "val.npz", x=split.test.x, y=split.test.y)
    return {
        "data": "tfcompress.samples.datasets.mnist(test_fraction=0.25, seed=0)",
        "model": 'train_classifier(small_cnn(flavour="keras3"), split.train, epochs=3)',
        "files": {
            "model.keras": "the trained model",
            "train.npz": f"split.train ({len(split.train)} digits)",
            "val.npz": f"split.test ({len(split.test)} held-out digits)",
        },
    }


def prepare_gates(folder: Path) -> dict[str, Any]:
    """The gate models (``tfcompress/samples/gate_models.py``) and ``test_gates.py``."""
    # The prose of docs/gates.md describes exactly these models, so build them with the tests'
    # own builder rather than a copy that could drift.
    from tfcompress.samples.gate_models import build_gate_models

    folder.mkdir(parents=True)
    build_gate_models(folder)
    (folder / "test_gates.py").write_text(TEST_GATES)
    return {
        "models": "tfcompress.samples.gate_models.build_gate_models()",
        "test_gates.py": TEST_GATES,
    }


def residual_model() -> tuple[Any, Any]:
    """The residual model with a PReLU of tests/test_training.py, trained the same way.

    Returns:
        The trained Keras 3 model and the MNIST split it was trained on.
    """
    from tfcompress.samples.cnn import residual_cnn, train_classifier
    from tfcompress.samples.datasets import mnist

    # As the residual_model fixture of tests/test_training.py trains it.
    split = mnist(test_fraction=0.25, seed=0)
    model = residual_cnn()
    return train_classifier(model, split.train.take(2000), epochs=2), split


def residual_coverage() -> dict[str, Any]:
    """QAT on the residual model, as tests/test_training.py runs it; its coverage rows."""
    import tfcompress

    start = time.perf_counter()
    model, split = residual_model()
    result = tfcompress.qat(
        model, train_data=split.train.take(1000), eval_data=split.test.take(400), epochs=1
    )
    print(f"{time.perf_counter() - start:6.1f} s  residual model QAT", file=sys.stderr)
    return {
        "call": "tfcompress.qat(model, train_data=split.train.take(1000), "
        "eval_data=split.test.take(400), epochs=1)",
        "rows": [row.to_dict() for row in result.coverage],
        "skipped_layers": result.skipped_layers,
    }


def write_blocks(results: Mapping[str, Any]) -> None:
    """Write every example block of ``results`` into its doc."""
    for name, (doc, body) in render_blocks(results).items():
        write_block(ROOT / doc, name, body)


def main(argv: Sequence[str] | None = None) -> None:
    """Build, run, record, and write every example block (``--render``: only the writing).

    Args:
        argv: Command-line arguments (``sys.argv[1:]`` when None).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--render",
        action="store_true",
        help=f"rewrite the blocks from {RESULTS.relative_to(ROOT)} without running anything",
    )
    if parser.parse_args(argv).render:
        write_blocks(json.loads(RESULTS.read_text()))
        return
    start = time.perf_counter()
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tfc_doc_examples_") as tmp:
        root = Path(tmp)
        coverage = residual_coverage()
        mnist_setup = prepare_mnist(root / "mnist")
        gate_setup = prepare_gates(root / "gates")
        runs["qat-json"] = run_command(QAT_COMMAND, root / "mnist", expect=0)
        for name, command in PRUNE_COMMANDS.items():
            runs[name] = run_command(command, root / "mnist", expect=0)
        # One gate of three fails on purpose, so pytest exits 1.
        runs["gate-pytest"] = run_command(
            GATE_COMMAND, root / "gates", expect=1, files=("gates.json",)
        )
    results = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine_line(),
        "seconds": round(time.perf_counter() - start, 1),
        "script": SCRIPT,
        "setup": {"mnist": mnist_setup, "gates": gate_setup},
        "coverage": coverage,
        "runs": runs,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    write_blocks(results)
    print(f"{results['seconds']:6.1f} s  in all; wrote {RESULTS}", file=sys.stderr)


if __name__ == "__main__":
    main()
