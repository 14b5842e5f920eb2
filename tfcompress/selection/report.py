"""The selection report: a table (text or Markdown), ``selection.json`` and ``pareto.png``."""

from __future__ import annotations

import importlib
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfcompress.report.table import format_table

if TYPE_CHECKING:
    from tfcompress.selection.result import CandidateRecord, SelectionResult

FILES = ("selection.json", "selection.md", "pareto.png")
HEADER = (
    "name",
    "family",
    "width",
    "res",
    "params",
    "MACs",
    "size",
    "latency (backend, threads, host)",
    "accuracy",
    "measured / trained on",
    "status",
    "reason",
)


def header(result: SelectionResult) -> list[str]:
    """The columns: :data:`HEADER`, with what the target measures after the size."""
    at = HEADER.index("size") + 1
    labels = [budget.label for budget in _measured(result)]
    return [*HEADER[:at], *labels, *HEADER[at:]]


def _measured(result: SelectionResult) -> list[Any]:
    """The target's budget fields (an arena, flash, Edge TPU segments): measured for all."""
    from tfcompress.targets.base import get_target

    return list(get_target(result.budgets.target).budget_fields)


def table_rows(result: SelectionResult) -> list[list[str]]:
    """One row of cells per candidate, marking the pick (*) and the Pareto front (P)."""
    rows = []
    measured = _measured(result)
    for r in result.candidates:
        marks = ("*" if result.best and r.name == result.best.name else "") + (
            "P" if r.name in result.pareto else ""
        )
        latency = (
            f"{r.latency_ms:.3f} ms ({r.latency_backend}, {r.threads}t, {_place(r)})"
            if r.latency_ms is not None
            else "-"
        )
        rows.append(
            [
                f"{r.name} {marks}".strip(),
                r.family,
                f"{r.width:g}",
                str(r.resolution),
                _count(r.params),
                _count(r.macs),
                f"{r.size_bytes / 1024:.1f} KiB" if r.size_bytes is not None else "-",
                *(_measure(b, r.target_measures) for b in measured),
                latency,
                f"{r.accuracy:.2%}" if r.accuracy is not None else "-",
                f"{_where(r.worker)} / {_where(r.train_worker)}",
                r.status,
                (r.reason or "").replace("|", "/"),
            ]
        )
    return rows


def summary(result: SelectionResult, *, markdown: bool = False) -> str:
    """The table, the budgets and the pick, in words."""
    lines = [
        f"Model selection: {len(result.candidates)} candidates, budgets: {result.budgets}, "
        f"objective: {result.objective}",
        "",
        format_table(header(result), table_rows(result), markdown=markdown),
        "",
        "* the pick, P on the Pareto front (accuracy up, latency down, size down). Latency: "
        "median of the int8 .tflite at batch 1, measured on the host named in its cell.",
        "",
        pick_line(result),
        *(f"note: {note}" for note in result.notes),
    ]
    return "\n".join(lines)


def pick_line(result: SelectionResult) -> str:
    """One sentence: the pick with its numbers, or the closest candidates."""
    best = result.best
    if best is not None:
        return f"Pick: {_describe(best)}."
    closest = "; ".join(_describe(r) for r in result.closest())
    return f"No candidate meets every budget. Closest: {closest or 'none measured'}."


def _describe(record: CandidateRecord) -> str:
    accuracy = f"{record.accuracy:.2%}" if record.accuracy is not None else "untrained"
    size = f"{record.size_bytes:,} B" if record.size_bytes is not None else "? B"
    latency = f"{record.latency_ms:.3f} ms" if record.latency_ms is not None else "? ms"
    text = f"{record.name} ({size}, {latency} on {_place(record)}, accuracy {accuracy})"
    return f"{text} [{record.reason}]" if record.reason and not record.meets_budgets else text


def _place(record: CandidateRecord) -> str:
    """Where the latency was measured: ``device pi5`` (``select --on``), else the host."""
    return f"device {record.device}" if record.device else str(record.host)


def _measure(budget: Any, measures: dict[str, float] | None) -> str:
    value = (measures or {}).get(budget.name)
    return "-" if value is None else budget.shown(value)


def _where(worker: str | None) -> str:
    """A worker as the table shows it: ``127.0.0.1:40001``, ``local``, or ``-`` (not run).

    Example:
        >>> _where("tcp://127.0.0.1:40001"), _where(None)
        ('127.0.0.1:40001', '-')
    """
    return "-" if worker is None else worker.split("://", 1)[-1]


def _count(value: int | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value / 1e3:.1f}k"


def to_markdown(result: SelectionResult) -> str:
    """``selection.md``: heading, the table, the pick and where it ran."""
    return (
        "# Model selection\n\n"
        + summary(result, markdown=True)
        + f"\n\nRan on: {result.executor}.\n\n![Pareto plot](pareto.png)\n"
    )


def plot_png(result: SelectionResult) -> bytes:
    """Accuracy vs latency: marker area ~ size, front joined, budgets drawn, pick circled.

    Raises:
        MissingDependencyError: matplotlib is not installed.
    """
    from tfcompress.report.plots import pyplot

    plt = pyplot()
    figure, axes = plt.subplots(figsize=(7.5, 5))
    trained = [r for r in result.candidates if r.accuracy is not None and r.latency_ms]
    largest = max([r.size_bytes or 1 for r in trained] + [1])
    for record in trained:
        on_front = record.name in result.pareto
        axes.scatter(
            record.latency_ms,
            record.accuracy,
            s=40 + 600 * (record.size_bytes or 0) / largest,
            alpha=0.75 if on_front else 0.35,
            color="tab:blue" if on_front else "tab:gray",
            edgecolor="black",
            linewidth=0.5,
        )
        if on_front:
            axes.annotate(
                record.name,
                (record.latency_ms, record.accuracy),
                fontsize=8,
                xytext=(6, 6),
                textcoords="offset points",
            )
    front = sorted((r for r in trained if r.name in result.pareto), key=lambda r: r.latency_ms)
    if len(front) > 1:
        axes.plot(
            [r.latency_ms for r in front],
            [r.accuracy for r in front],
            "--",
            color="tab:blue",
            linewidth=1,
            label="Pareto front",
        )
    _budget_lines(axes, result, max((r.latency_ms for r in trained), default=None))
    if result.best is not None and result.best.accuracy is not None:
        axes.scatter(
            result.best.latency_ms,
            result.best.accuracy,
            s=900,
            facecolors="none",
            edgecolors="tab:red",
            linewidth=2,
            label=f"pick: {result.best.name}",
        )
    skipped = sum(1 for r in result.candidates if r.accuracy is None)
    budgets = result.budgets
    axes.set_xlabel(f"int8 latency, ms (p50, {budgets.target}, {budgets.threads} thread(s))")
    axes.set_ylabel("int8 accuracy (eval data)")
    axes.set_title(
        f"Model selection: marker area ~ int8 size; {skipped} untrained candidate(s) not shown"
    )
    axes.grid(alpha=0.3)
    axes.yaxis.set_major_formatter(importlib.import_module("matplotlib.ticker").PercentFormatter(1))
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=8, loc="best", markerscale=0.3)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()


def _budget_lines(axes: Any, result: SelectionResult, slowest: float | None) -> None:
    latency, accuracy = result.budgets.max_latency, result.budgets.min_accuracy
    if latency is not None and slowest is not None and latency > 3 * slowest:
        # A line that far right would squash every point against the left edge: say it.
        axes.set_xlim(0, slowest * 1.3)
        axes.plot([], [], " ", label=f"latency budget {latency:g} ms (off the right edge)")
    elif latency is not None:
        label = f"latency budget {latency:g} ms"
        axes.axvline(latency, color="tab:red", linestyle=":", label=label)
    if accuracy is not None:
        label = f"accuracy budget {accuracy:.0%}"
        axes.axhline(accuracy, color="tab:green", linestyle=":", label=label)


def check_selection_report_dir(directory: Path, *, overwrite: bool) -> list[Path]:
    """Fail before any work when the report could not be written into ``directory``.

    Raises:
        OutputExistsError: ``directory`` is a file, or report files exist without
            ``overwrite``.
        OutputLocationError: The folder (or where it would be created) is not writable.
    """
    from tfcompress.report.writers import check_report_folder

    paths = [directory / name for name in FILES]
    check_report_folder(directory, paths, overwrite=overwrite)
    return paths


def write_report(result: SelectionResult, directory: Path, *, overwrite: bool) -> tuple[Path, ...]:
    """Write the three report files atomically, refusing to replace them without ``overwrite``.

    Raises:
        OutputExistsError: A report file exists and ``overwrite`` is False.
        MissingDependencyError: No matplotlib (nothing is written then).
    """
    from tfcompress.report.writers import write_together

    paths = check_selection_report_dir(directory, overwrite=overwrite)
    png = plot_png(result)  # matplotlib missing: nothing written
    text = json.dumps(result.to_dict(), indent=1, default=str) + "\n"
    contents = {paths[0]: text, paths[1]: to_markdown(result), paths[2]: png}
    return tuple(write_together(directory, contents, overwrite=overwrite))
