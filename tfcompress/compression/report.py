"""The compress report: ``compress.json``, ``compress.md`` and plots of the attempts."""

from __future__ import annotations

import io
import math
import os
from pathlib import Path
from typing import Any

STEM = "compress"
PLOTS = ("size", "latency")  # accuracy vs gzip size, accuracy vs latency


def report_paths(directory: Path) -> list[Path]:
    """Every file a compress report may write into ``directory``."""
    return [directory / f"{STEM}.json", directory / f"{STEM}.md"] + [
        directory / f"{STEM}_{name}.png" for name in PLOTS
    ]


def check_compress_report_dir(directory: str | os.PathLike[str], *, overwrite: bool) -> Path:
    """Fail before the search when the report could not be written into ``directory``.

    Raises:
        OutputExistsError: ``directory`` is a file, or holds report files and not ``overwrite``.
        OutputLocationError: The folder (or where it would be created) is not writable.
    """
    from tfcompress.report.writers import check_report_folder

    folder = Path(directory)
    return check_report_folder(folder, report_paths(folder), overwrite=overwrite)


def to_markdown(result: Any) -> str:
    """The report as Markdown: the attempts table, the choice and why, the findings."""
    lines = ["# Compress report", "", result.table(markdown=True), ""]
    if result.chosen is not None:
        c = result.chosen
        base, who = result.size_baseline
        lines.append(
            f"**Chosen:** `{c.name}`, {c.size_bytes:,} B ({c.gzip_bytes:,} B gzip; {who} "
            f"{base:,} B) for objective `{result.objective}` on target "
            f"`{result.target}`. {c.why}"
        )
        if c.float_layers:
            lines.append(f"\nKept in float: {', '.join(f'`{n}`' for n in c.float_layers)}.")
        speed = result.speed(c)
        if speed:
            lines.append(f"\n{speed[0].upper()}{speed[1:]}.")
    else:
        lines.append(f"**Nothing passed the gate** ({len(result.attempts)} attempts).")
        lines += ["", *(f"* try: {tip}" for tip in result.advice)]
    noted = [a for a in result.attempts if a.notes]
    if noted:
        lines += ["", "Notes per attempt:", ""]
        lines += [f"* `{a.name}`: {'; '.join(a.notes)}" for a in noted]
    lines += ["", f"Stopped: {result.stop_reason}."]
    if result.findings:
        lines += ["", *(f"* {finding}" for finding in result.findings)]
    return "\n".join(lines) + "\n"


def write_compress_report(
    result: Any, directory: str | os.PathLike[str], *, overwrite: bool = False
) -> list[Path]:
    """Write ``compress.json``, ``compress.md`` and the plots that have data, atomically.

    ``directory`` is created when missing; returns the paths written.

    Raises:
        OutputExistsError: Report files exist and not ``overwrite``.
        MissingDependencyError: matplotlib is missing (nothing is written).
    """
    from tfcompress._json import dumps
    from tfcompress.report.writers import write_together

    folder = check_compress_report_dir(directory, overwrite=overwrite)
    # Everything is made before the first file is written: the files then appear within
    # milliseconds of each other, and a failure or a signal takes them all back.
    json_text = dumps(result.to_dict(), indent=2) + "\n"
    markdown, pngs = to_markdown(result), plot_attempts(result)
    contents: dict[Path, str | bytes] = {
        folder / f"{STEM}.json": json_text,
        folder / f"{STEM}.md": markdown,
    }
    contents |= {folder / f"{STEM}_{name}.png": png for name, png in pngs.items()}
    return write_together(folder, contents, overwrite=overwrite)


def plot_attempts(result: Any) -> dict[str, bytes]:
    """PNG bytes by plot name: score vs gzip ``size`` and vs ``latency`` (when measured).

    One point per judged attempt, the gate as a line.
    """
    from tfcompress.report.plots import pyplot

    judged = [a for a in result.attempts if a.value is not None and a.gzip_bytes]
    if not judged:
        return {}
    plt = pyplot()
    pngs = {}
    for name, attribute, label in (
        ("size", "gzip_bytes", "gzip size (bytes)"),
        ("latency", "latency_ms", f"median latency on {result.target} (ms)"),
    ):
        points = [a for a in judged if getattr(a, attribute) is not None]
        if points:
            pngs[name] = _figure(plt, points, attribute, label, result)
    return pngs


def _figure(plt: Any, points: list[Any], attribute: str, label: str, result: Any) -> bytes:
    task = points[0].kind == "task"
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for a in points:
        score = math.nan if a.score is None else a.score
        y = float(score) * 100 if task else float(a.value)
        colour = "tab:green" if a.passed else "tab:red"
        axes.scatter([getattr(a, attribute)], [y], color=colour, zorder=2)
        axes.annotate(a.name, (getattr(a, attribute), y), fontsize=7, xytext=(4, 3),
                      textcoords="offset points")  # fmt: skip
    threshold, reference = points[0].threshold, points[0].reference_score
    gate = None
    if threshold is not None:
        gate = (reference - threshold) * 100 if task and reference is not None else threshold
    if gate is not None and not (task and reference is None):
        axes.axhline(gate, color="tab:gray", linestyle="--", label="gate")
        axes.legend(loc="best")
    axes.set_xlabel(label)
    metric = str(points[0].metric)
    axes.set_ylabel(f"{metric} (%)" if task else metric)
    axes.set_title(f"Attempts: {metric} vs {label.split(' (')[0]} (dashed: the gate)")
    axes.grid(alpha=0.3)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()
