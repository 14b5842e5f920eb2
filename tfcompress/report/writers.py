"""Write a benchmark result as JSON, CSV, Markdown and PNG plots, each atomically."""

from __future__ import annotations

import csv
import io
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfcompress.errors import InvalidInputError, OutputExistsError, OutputLocationError
from tfcompress.models.saving import check_writable_folder, write_bytes_atomic, write_text_atomic
from tfcompress.report.schema import LATENCY_KEYS, ROW_KEYS

if TYPE_CHECKING:
    from tfcompress.bench.result import BenchmarkResult

logger = logging.getLogger(__name__)

FORMATS = ("json", "csv", "md", "png")
STEM = "benchmark"


def write_report(
    result: BenchmarkResult,
    directory: Path,
    *,
    formats: Sequence[str] = FORMATS,
    overwrite: bool = True,
) -> list[Path]:
    """Write ``benchmark.json``, ``benchmark.csv``, ``benchmark.md`` and plots into ``directory``.

    Args:
        result: What to write.
        directory: Output folder (created when missing).
        formats: A subset of ``json``, ``csv``, ``md``, ``png``.
        overwrite: Replace files of the same names.

    Returns:
        The files written.

    Raises:
        InvalidInputError: Unknown format, or ``directory`` is a file.
        MissingDependencyError: ``png`` without matplotlib.

    Example:
        >>> write_report(result, Path("reports"), formats=("json", "md"))  # doctest: +SKIP
        [PosixPath('reports/benchmark.json'), PosixPath('reports/benchmark.md')]
    """
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise InvalidInputError(f"unknown report format(s) {unknown}; choose from {FORMATS}.")
    if directory.exists() and not directory.is_dir():
        raise InvalidInputError(f"{directory}: is a file; give a folder for the reports.")
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    if "png" in formats:  # first: a missing matplotlib fails before anything is written
        from tfcompress.report.plots import plot_all

        plots = plot_all(result)
    if "json" in formats:
        text = json.dumps(result.to_dict(), indent=2, default=str) + "\n"
        written.append(_write(directory / f"{STEM}.json", text, overwrite))
    if "csv" in formats:
        written.append(_write(directory / f"{STEM}.csv", to_csv(result), overwrite))
    if "md" in formats:
        written.append(_write(directory / f"{STEM}.md", to_markdown(result), overwrite))
    if "png" in formats:
        for name, data in plots.items():
            path = directory / f"{STEM}_{name}.png"
            written.append(write_bytes_atomic(path, data, overwrite=overwrite))
    logger.info("wrote %s", ", ".join(str(p) for p in written))
    return written


def check_report_dir(directory: Path) -> Path:
    """Fail now, before a long benchmark, when reports could not be written into ``directory``.

    Nothing is created: a missing folder's nearest existing ancestor must accept new files.

    Raises:
        OutputExistsError: ``directory`` is a file.
        OutputLocationError: The folder (or where it would be created) is not writable.

    Example:
        >>> check_report_dir(Path("reports"))  # doctest: +SKIP
        PosixPath('reports')
    """
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise OutputExistsError(f"{directory}: is a file; give a folder for the reports.")
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise OutputLocationError(
            f"{directory}: cannot create the report folder under {existing}, which is a file."
        )
    check_writable_folder(existing, what=directory)
    return directory


def _write(path: Path, text: str, overwrite: bool) -> Path:
    return write_text_atomic(path, text, overwrite=overwrite)


def csv_columns() -> list[str]:
    """CSV header: the row keys with ``latency_ms`` flattened to ``latency_<stat>_ms``."""
    columns: list[str] = []
    for key in ROW_KEYS:
        if key == "latency_ms":
            columns += ["latency_runs" if k == "runs" else f"latency_{k}_ms" for k in LATENCY_KEYS]
        elif key != "backend_details":
            columns.append(key)
    return columns


def to_csv(result: BenchmarkResult) -> str:
    """One CSV line per row (latency flattened; backend details left to the JSON)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=csv_columns(), lineterminator="\n")
    writer.writeheader()
    for row in result.to_dict()["rows"]:
        flat: dict[str, Any] = {k: v for k, v in row.items() if k in writer.fieldnames}
        latency = row.get("latency_ms") or {}
        for key in LATENCY_KEYS:
            column = "latency_runs" if key == "runs" else f"latency_{key}_ms"
            flat[column] = latency.get(key)
        writer.writerow(flat)
    return buffer.getvalue()


def to_markdown(result: BenchmarkResult, *, heading: str = "Benchmark") -> str:
    """A Markdown page: the table, the notes, the environment and the method."""
    env = result.environment
    settings = result.settings
    lines = [
        f"# {heading}",
        "",
        result.table(markdown=True),
        "",
        f"Latency is per call of `batch` samples; `x ref` is the median-latency speed-up over "
        f"`{result.reference}` at the same threads and batch.",
    ]
    if result.samples:
        lines.append(f"{result.metric} on {result.samples} labelled samples.")
    if result.notes:
        lines += ["", "## Findings", "", *(f"- {note}" for note in result.notes)]
    lines += [
        "",
        "## Environment",
        "",
        "```",
        str(env),
        "```",
        "",
        "## Method",
        "",
        f"First call timed alone; then at least {settings.get('warmup_runs')} warm-up runs "
        f"and {settings.get('warmup_seconds')} s; then at least {settings.get('runs')} timed "
        f"runs and {settings.get('min_seconds')} s (LiteRT benchmark_model's method). "
        "Std is the population standard deviation; percentiles interpolate linearly.",
        "",
    ]
    return "\n".join(lines)
