"""Write one marked section of docs/benchmarks.md without touching the others."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

BENCHMARKS_MD = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
HEADER = (
    "# Benchmarks\n\nNumbers measured by the scripts in `benchmarks/`; each section says how.\n"
)


def machine_line() -> str:
    """CPU model, its vector flags, core count and Python version of this machine.

    The flags matter: on an AVX2-only CPU (no AVX-512 VNNI) int8 convolutions can run
    slower than float32, which turns latency verdicts around.
    """
    from tfcompress.bench.environment import parse_cpuinfo

    cpuinfo = Path("/proc/cpuinfo")
    model, flags = parse_cpuinfo(cpuinfo.read_text()) if cpuinfo.exists() else ("", None)
    shown = "" if flags is None else f" ({', '.join(flags) or 'no tracked vector flags'})"
    return (
        f"{model or platform.machine()}{shown}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )


def write_section(name: str, body: str) -> Path:
    """Replace the text between ``<!-- BEGIN name -->`` and ``<!-- END name -->``."""
    text = BENCHMARKS_MD.read_text() if BENCHMARKS_MD.exists() else HEADER
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    block = f"{begin}\n{body.strip()}\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else f"{text}\n{block}\n"
    BENCHMARKS_MD.parent.mkdir(exist_ok=True)
    tmp = BENCHMARKS_MD.with_suffix(".md.tmp")
    tmp.write_text(text)
    tmp.replace(BENCHMARKS_MD)
    return BENCHMARKS_MD


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"


def _block_pattern(name: str) -> re.Pattern[str]:
    begin, end = _markers(name)
    return re.compile(re.escape(begin) + r"\n(.*?)\n?" + re.escape(end), re.DOTALL)


def read_block(path: Path, name: str) -> str | None:
    """The text between ``<!-- BEGIN name -->`` and ``<!-- END name -->`` in ``path``.

    Args:
        path: A Markdown file.
        name: The marker name, e.g. ``example:qat-json``.

    Returns:
        The body without the marker lines, or None when the file has no such block.
    """
    match = _block_pattern(name).search(path.read_text())
    return match.group(1) if match else None


def block_names(path: Path, prefix: str = "") -> list[str]:
    """Names of the marked blocks in ``path`` that start with ``prefix``, in file order."""
    names = re.findall(r"<!-- BEGIN (\S+) -->", path.read_text())
    return [name for name in names if name.startswith(prefix)]


def write_block(path: Path, name: str, body: str) -> Path:
    """Replace the text between ``<!-- BEGIN name -->`` and ``<!-- END name -->`` in ``path``.

    Unlike :func:`write_section`, a missing block is an error rather than appended: a block's
    place in a hand-written doc is chosen by hand, once. The file is re-read just before the
    write and replaced atomically, so edits others make elsewhere in it are kept.

    Args:
        path: A Markdown file that already holds the two marker lines.
        name: The marker name, e.g. ``example:qat-json``.
        body: The new text between the markers.

    Returns:
        ``path``.

    Raises:
        ValueError: ``path`` has no such block, or has it more than once.
    """
    text = path.read_text()
    pattern = _block_pattern(name)
    found = len(pattern.findall(text))
    if found != 1:
        begin, end = _markers(name)
        raise ValueError(f"{path} holds {found} '{begin}' ... '{end}' blocks; expected one.")
    begin, end = _markers(name)
    text = pattern.sub(lambda _: f"{begin}\n{body.strip()}\n{end}", text)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path
