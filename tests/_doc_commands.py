"""Every command line shown in README.md and docs/*.md, collected for tests/test_doc_commands.py.

Collected: each line of a ```bash (or sh/shell) block that runs ``python -m tfcompress``,
``tfcompress``, ``python -m pytest`` or ``python examples/...`` (``\\`` continuations
joined, a trailing ``# comment`` dropped), and each ``$ `` line of any block that runs one.
In a ``$`` block, the lines up to the next ``$`` are what the command printed: a first
line ``tfcompress CMD: error: ...`` means the command fails with exit 2 and that message.

A command that cannot run here is marked in the doc itself, visibly, by a comment line
right above it in its block: ``# not run by the docs test: <reason>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = re.compile(r"^(python -m tfcompress|tfcompress|python -m pytest|python examples/\S+)(\s|$)")
NOT_RUN = "# not run by the docs test:"
SHELL_BLOCKS = {"bash", "sh", "shell"}


@dataclass(frozen=True)
class DocCommand:
    """One command as a doc shows it."""

    doc: str  # path relative to the repository, e.g. "docs/gates.md"
    line: int  # 1-based line of the command's first line
    text: str  # the command, continuations joined
    output: tuple[str, ...] = ()  # what the doc shows it printed ($ blocks)
    not_run: str | None = None  # the reason given in the doc, when it is not run

    @property
    def where(self) -> str:
        """``docs/gates.md:181``, for messages."""
        return f"{self.doc}:{self.line}"

    @property
    def error(self) -> str | None:
        """The error line the doc shows (``tfcompress gate: error: ...``), if any."""
        first = next((line for line in self.output if line.strip()), "")
        return first if re.match(r"^tfcompress [\w-]+: error: ", first) else None


def doc_files() -> list[Path]:
    """README.md, then docs/*.md in name order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def collect(paths: list[Path] | None = None) -> list[DocCommand]:
    """Every command of every doc, in document order."""
    found: list[DocCommand] = []
    for path in paths or doc_files():
        found += _from_doc(path, str(path.relative_to(ROOT)))
    return found


def _from_doc(path: Path, name: str) -> list[DocCommand]:
    lines = path.read_text(encoding="utf-8").splitlines()
    commands: list[DocCommand] = []
    language: str | None = None
    reason: str | None = None
    index = 0
    while index < len(lines):
        raw = lines[index]
        stripped = raw.strip()
        if stripped.startswith("```"):
            language = None if language is not None else (stripped[3:].strip() or "")
            reason = None
            index += 1
            continue
        if language is None:
            index += 1
            continue
        if stripped.startswith(NOT_RUN):
            reason = stripped[len(NOT_RUN) :].strip() or "(no reason given)"
            index += 1
            continue
        start = index
        text, index = _joined(lines, index)
        if text.startswith("$ ") and RUNS.match(text[2:]):
            output, index = _output(lines, index)
            commands.append(DocCommand(name, start + 1, _without_comment(text[2:]), output, reason))
            reason = None
        elif language in SHELL_BLOCKS and RUNS.match(text):
            commands.append(DocCommand(name, start + 1, _without_comment(text), (), reason))
            reason = None
    return commands


def _joined(lines: list[str], index: int) -> tuple[str, int]:
    """The logical line at ``index`` (``\\`` continuations joined) and the index after it."""
    parts = [lines[index].strip()]
    index += 1
    while parts[-1].endswith("\\") and index < len(lines):
        parts[-1] = parts[-1][:-1].rstrip()
        parts.append(lines[index].strip())
        index += 1
    return " ".join(parts), index


def _output(lines: list[str], index: int) -> tuple[tuple[str, ...], int]:
    shown = []
    while index < len(lines):
        line = lines[index]
        if line.strip().startswith(("$ ", "```", NOT_RUN)):
            break
        shown.append(line)
        index += 1
    return tuple(shown), index


def _without_comment(text: str) -> str:
    """The command without a trailing ``# comment`` (outside quotes)."""
    quote = None
    for position, char in enumerate(text):
        if char in "'\"" and quote in (None, char):
            quote = None if quote else char
        elif char == "#" and quote is None and position and text[position - 1].isspace():
            return text[:position].rstrip()
    return text
