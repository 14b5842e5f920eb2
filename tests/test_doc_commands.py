"""Every command shown in README.md and docs/*.md runs as typed, against small fixtures.

The commands are collected from the docs (tests/_doc_commands.py says which lines) and run
in the order each doc shows them, in one fresh folder per doc, as a reader types them after
the README's first command: a command can read what an earlier one wrote (``compress ...
--report rep2`` then ``--replay rep2/compress.json``), and one that writes a file an earlier
command of its doc wrote fails as it would for the reader (``already exists``). Files a
command reads that no earlier command wrote are copied in from what ``tfcompress demo
--out-dir`` wrote (run once), or, for the few other models a doc names and says where they
come from, from tests/_doc_fixtures.py. Commands run in this process through
``tfcompress.cli.main(shlex.split(...))``, with TensorFlow loaded once; identical commands
on the same fixtures run once; one real ``python -m tfcompress`` subprocess proves the entry
point.

What a command must do: exit 0, or 1 where a check it asked for can fail on these fixtures
(a gate, ``--require-compatible``); a command whose doc shows ``tfcompress CMD: error:``
must exit 2 with that message (numbers and paths aside). Two adaptations, both about time,
not behaviour: ``benchmark`` commands get ``--runs 3 --min-seconds 0 --warmup-seconds 0``
unless they set them, and a ``| python -m json.tool`` pipe is checked by parsing the
output as JSON. A command that cannot run here is marked in its doc, visibly:
``# not run by the docs test: <reason>`` on the line above it.
"""

from __future__ import annotations

import json
import re
import runpy
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _doc_commands import NOT_RUN, ROOT, DocCommand, collect
from _doc_fixtures import family_of, known, place, share_with_the_run

from tfcompress.cli import main
from tfcompress.demo import STARTER_FILES

pytestmark = pytest.mark.slow  # every documented command, with real training and conversions

COMMANDS = collect()
DOCS = list(dict.fromkeys(c.doc for c in COMMANDS))
FAST = {"--runs": "3", "--min-seconds": "0", "--warmup-seconds": "0"}
# Flags whose value a command writes (not a fixture to provide).
OUTPUT_FLAGS = {"--out", "--report", "--workdir", "--out-dir"}
FILE = re.compile(r"[\w./-]+\.(keras|h5|tflite|onnx|npz|npy|json)$")
# Identical commands on the same fixtures run once: (exit, stdout, stderr, the folder it wrote
# in, None when it read files an earlier command of its doc wrote).
_DONE: dict[tuple[str, str], tuple[int, str, str, Path | None]] = {}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> dict[str, Path]:
    share_with_the_run(tmp_path_factory)  # the digits and two-head models: built once per run
    return {doc: tmp_path_factory.mktemp(Path(doc).stem) for doc in DOCS}


@pytest.mark.parametrize("doc", DOCS)
def test_documented_commands_run_as_typed(doc, workspace, monkeypatch, capsys):
    folder = workspace[doc]
    monkeypatch.chdir(folder)
    written: set[str] = set()
    failures = []
    for command in (c for c in COMMANDS if c.doc == doc):
        if command.not_run is not None:
            continue
        try:
            problem = _run(command, folder, written, capsys)
        except Exception as error:
            problem = f"raised {type(error).__name__}: {error}"
        if problem:
            failures.append(f"{command.where}: `{command.text}`: {problem}")
    assert not failures, "documented commands that do not run as typed:\n" + "\n".join(failures)


def test_every_not_run_mark_gives_a_reason_and_marks_a_command():
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines, 1):
            if line.strip().startswith(NOT_RUN):
                where = f"{path.relative_to(ROOT)}:{number}"
                assert line.strip()[len(NOT_RUN) :].strip(), f"{where}: give the reason"
                following = [c for c in COMMANDS if c.doc == str(path.relative_to(ROOT))]
                assert any(c.line == number + 1 and c.not_run for c in following), (
                    f"{where}: the mark is not right above a command it could apply to"
                )


def test_the_readme_python_runs_where_the_demo_wrote_its_files(tmp_path, monkeypatch):
    """README.md's first Python block, as typed, in a folder holding what the demo wrote."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("```python\n", 1)[1].split("```", 1)[0]
    for name in STARTER_FILES:
        place(name, "demo", tmp_path)
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    assert (tmp_path / "model_int8_api.tflite").stat().st_size > 0


def test_the_entry_point_runs_a_documented_command(tmp_path):
    [command] = [c for c in COMMANDS if c.text == "python -m tfcompress zoo 'resnet*'"]
    done = subprocess.run(
        [sys.executable, *shlex.split(command.text)[1:]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == command.error


def _run(command: DocCommand, folder: Path, written: set[str], capsys) -> str | None:
    """Run one command; return what is wrong with it, or None."""
    text, _, pipe = command.text.partition(" | ")
    if pipe and pipe.strip() != "python -m json.tool":
        return f"pipes into {pipe!r}: only `| python -m json.tool` is supported; mark it"
    tokens = shlex.split(text)
    family = family_of(tokens)
    outputs = _outputs(tokens)
    for token in tokens:
        wanted = FILE.match(token) or known(token, family)
        if not wanted or token in outputs or _under(token, written):
            continue
        if not place(token, family, folder):
            return (
                f"needs a file {token!r} ({family} family) that no earlier command in "
                "the doc writes and tests/_doc_fixtures.py does not provide: add it there"
            )
    key = (command.text.replace("python -m tfcompress", "tfcompress"), family)
    fresh = not any(_under(t, written) for t in tokens if t not in outputs)  # fixtures only
    done = _DONE.get(key)
    if done is not None and (not outputs or (fresh and _copied(done[3], outputs, folder))):
        code, out, err, _ = done
    else:
        code, out, err = _execute(tokens, folder, capsys)
        _DONE[key] = (code, out, err, folder if fresh else None)
    written.update(outputs)
    return _judge(command, code, out, err, json_pipe=bool(pipe))


def _copied(earlier: Path | None, outputs: set[str], folder: Path) -> bool:
    """Copy in what the same command wrote in another doc's folder, if it wrote them all.

    Not when this folder holds one of them already: there the command must run (and fail
    with ``already exists``, as it would for the reader).
    """
    if earlier is None or any((folder / name).exists() for name in outputs):
        return False
    if not all((earlier / name).exists() for name in outputs):
        return False  # e.g. export-c's --out NAME writes NAME.h and NAME.cc: run it
    for name in outputs:
        source, target = earlier / name, folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, target)
    return True


def _execute(tokens: list[str], folder: Path, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    if tokens[:3] == ["python", "-m", "tfcompress"] or tokens[0] == "tfcompress":
        argv = tokens[3:] if tokens[0] == "python" else tokens[1:]
        if argv and argv[0] == "benchmark":
            argv += [
                item for flag, value in FAST.items() if flag not in argv for item in (flag, value)
            ]
        code = main(argv)
    elif tokens[:3] == ["python", "-m", "pytest"]:
        done = subprocess.run(
            [sys.executable, *tokens[1:]], cwd=folder, capture_output=True, text=True, check=False
        )
        return done.returncode, done.stdout, done.stderr
    elif tokens[0] == "python" and tokens[1].startswith("examples/"):
        code = _run_example(ROOT / tokens[1], tokens[2:])
    else:
        raise AssertionError(f"no way to run {tokens[0]!r} commands")
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _run_example(script: Path, args: list[str]) -> int:
    saved = sys.argv
    sys.argv = [str(script), *args]
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exit_:
        return int(exit_.code or 0)
    finally:
        sys.argv = saved
    return 0


def _judge(command: DocCommand, code: int, out: str, err: str, *, json_pipe: bool) -> str | None:
    expected = command.error
    if expected is not None:
        actual = next((line for line in err.splitlines() if ": error: " in line), "")
        if code != 2:
            return f"exit {code}, but the doc shows an error (exit 2): {expected}"
        if _comparable(actual) != _comparable(expected):
            return f"its error differs from the doc's:\n  doc: {expected}\n  run: {actual}"
        return None
    if code not in (0, 1):
        last = err.strip().splitlines()[-1:] or ["(nothing on stderr)"]
        return f"exit {code}: {last[0]}"
    if "WARNING:root:" in err:  # a library's warning leaking past tfcompress's own words
        leak = next(line for line in err.splitlines() if "WARNING:root:" in line)
        return f"a library warning reached stderr: {leak}"
    if json_pipe:
        try:
            json.loads(out)
        except json.JSONDecodeError as error:
            return f"its output is not the JSON `python -m json.tool` reads: {error}"
    return None


def _comparable(line: str) -> str:
    """An error line without what depends on the fixtures: numbers and folders of paths."""
    line = re.sub(r"(/[\w.-]+)+/([\w.-]+)", r"\2", line)
    return re.sub(r"\d+(\.\d+)?", "#", line.strip())


def _outputs(tokens: list[str]) -> set[str]:
    found = {tokens[i + 1] for i, t in enumerate(tokens[:-1]) if t in OUTPUT_FLAGS}
    if len(tokens) > 2 and tokens[0] == "python" and tokens[1].startswith("examples/"):
        found.update(t for t in tokens[2:] if not t.startswith("-"))  # its OUT_DIR
    return {t.rstrip("/") for t in found}


def _under(token: str, written: set[str]) -> bool:
    parts = Path(token).parts
    return any(parts[: len(Path(w).parts)] == Path(w).parts for w in written)


def test_fixture_names_cover_the_files_docs_read():
    """Fails fast, before anything runs, with every doc line whose files are unknown."""
    missing = []
    for command in COMMANDS:
        if command.not_run is not None:
            continue
        tokens = shlex.split(command.text.partition(" | ")[0])
        outputs = _outputs(tokens)
        family = family_of(tokens)
        written = {
            o
            for c in COMMANDS
            if c.doc == command.doc and c.line < command.line
            for o in _outputs(shlex.split(c.text.partition(" | ")[0]))
        }
        for token in tokens:
            needed = FILE.match(token) and token not in outputs and not _under(token, written)
            if needed and not known(token, family):
                missing.append(f"{command.where}: {token} ({family} family)")
    assert not missing, "add these to tests/_doc_fixtures.py:\n" + "\n".join(missing)
