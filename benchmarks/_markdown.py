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
    """CPU model, core count and Python version of this machine."""
    from tfcompress.bench.environment import parse_cpuinfo

    cpuinfo = Path("/proc/cpuinfo")
    model, _ = parse_cpuinfo(cpuinfo.read_text()) if cpuinfo.exists() else ("", ())
    return (
        f"{model or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
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
