"""What ``tfcompress --help`` costs: wall time and modules imported, per command.

Every ``--help`` builds the whole parser (all subcommands), so this is what a user pays
before any command does work, and all a typo costs. Since issue 30 the parser imports only
the CLI's own modules (the choices are plain data in ``tfcompress/cli/_choices.py``, or read
from the registered classes' source by ``tfcompress/_declared.py``); the library loads
inside the command that runs. For ``tfcompress --help`` and each
``tfcompress VERB --help``, this script measures:

* wall time of ``python -m tfcompress ... --help`` in a fresh process, median (and range) of
  ``RUNS`` runs, the commands interleaved so a busy moment of the machine is spread out;
* the tfcompress modules in ``sys.modules`` at exit, and whether numpy was imported.

``--baseline REV`` measures the package as it was at git revision REV too (extracted with
``git archive`` into a temporary folder), in the same rounds.

Run: .venv/bin/python benchmarks/cli_help.py [--baseline REV]  (writes the cli_help section
of docs/benchmarks.md; about a minute on two cores).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from _markdown import machine_line, write_section

ROOT = Path(__file__).resolve().parent.parent
RUNS = 7
# `python -m tfcompress ARGS...`, printing the modules loaded by exit into the file $DUMP.
_AS_MAIN = """
import atexit, os, runpy, sys
def _dump():
    with open(os.environ["DUMP"], "w") as f:
        f.write("\\n".join(sorted(sys.modules)))
atexit.register(_dump)
sys.argv = ["tfcompress", *sys.argv[1:]]
runpy.run_module("tfcompress", run_name="__main__", alter_sys=True)
"""


def _commands(tree: Path) -> list[str]:
    """``""`` (the top level) and every subcommand, as the tree's CLI lists them."""
    code = "from tfcompress.cli import SUBCOMMANDS; print(' '.join(SUBCOMMANDS))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, check=True
    )
    return ["", *(name.replace("_", "-") for name in done.stdout.split())]


def _argv(command: str) -> list[str]:
    return [command, "--help"] if command else ["--help"]


def _wall(tree: Path, command: str) -> float:
    """Seconds of one ``python -m tfcompress COMMAND --help`` (cwd: the tree measured)."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "tfcompress", *_argv(command)],
        cwd=tree,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
    )
    return time.perf_counter() - start


def _modules(tree: Path, command: str) -> tuple[int, bool]:
    """(tfcompress modules imported, numpy imported) by ``COMMAND --help``."""
    with tempfile.TemporaryDirectory() as folder:
        dump = Path(folder) / "modules.txt"
        subprocess.run(
            [sys.executable, "-c", _AS_MAIN, *_argv(command)],
            cwd=tree,
            env={**os.environ, "DUMP": str(dump)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
        )
        names = dump.read_text().split()
    ours = [name for name in names if name.split(".")[0] == "tfcompress"]
    return len(ours), "numpy" in names


def _extract(revision: str, folder: Path) -> Path:
    """The package at ``revision``, in ``folder`` (imported from there: it is the cwd)."""
    archive = folder / "tree.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "archive", revision, "tfcompress"], cwd=ROOT, stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    return folder


def _cell(times: list[float], count: int, numpy: bool) -> str:
    spread = f"{min(times):.2f}-{max(times):.2f}"
    return f"{statistics.median(times):>6.2f}s ({spread})  {count:>4}{' +numpy' if numpy else ''}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", metavar="REV", help="also measure tfcompress at REV")
    options = parser.parse_args()
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        trees = {"now": ROOT}
        if options.baseline:
            before = _extract(options.baseline, Path(folder))
            trees = {f"before ({options.baseline})": before, **trees}
        commands = _commands(ROOT)
        times: dict[tuple[str, str], list[float]] = {(t, c): [] for t in trees for c in commands}
        for _ in range(RUNS):
            for command in commands:
                for label, tree in trees.items():
                    times[label, command].append(_wall(tree, command))
        counts = {(label, c): _modules(tree, c) for label, tree in trees.items() for c in commands}
    load_after = os.getloadavg()[0]
    width = 38
    header = f"{'command':<30}" + "".join(f"  {label[:width]:<{width}}" for label in trees)
    lines = [
        f"Measured by `benchmarks/cli_help.py` on {machine_line()} in "
        f"{time.perf_counter() - started:.0f}s: `python -m tfcompress ... --help` in a fresh "
        f"process, median (min-max) of {RUNS} runs, then the tfcompress modules it imported. "
        f"Load average {load_before:.1f} before, {load_after:.1f} after"
        + (
            " (the machine was shared: other jobs ran)."
            if max(load_before, load_after) > 1.5
            else "."
        ),
        "",
        header.rstrip(),
        "-" * 30 + "".join("  " + "-" * width for _ in trees),
    ]
    for command in commands:
        shown = f"tfcompress {command} --help".replace("  ", " ")
        cells = [_cell(times[t, command], *counts[t, command]) for t in trees]
        lines.append((f"{shown:<30}" + "".join(f"  {cell:<{width}}" for cell in cells)).rstrip())
    worst = max(statistics.median(times["now", c]) for c in commands)
    lines += [
        "",
        f"* The slowest `--help` takes {worst:.2f}s (median). The parser imports the CLI's own "
        "modules, the gate-threshold table and the error types; `tests/test_cli_help.py` "
        "keeps it that way (no numpy, no TensorFlow, none of the packages the verbs run).",
    ]
    body = "## Start-up of the command line (issue 30)\n\n" + "\n".join(lines)
    path = write_section("cli_help", body)
    print(body)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
