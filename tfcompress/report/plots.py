"""PNG plots of a benchmark: accuracy vs latency (Pareto front), sizes, latency vs batch.

matplotlib is an optional extra (``pip install 'tfcompress[plot]'``), imported on first use
with the non-interactive Agg backend.
"""

from __future__ import annotations

import importlib
import io
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tfcompress.errors import MissingDependencyError

if TYPE_CHECKING:
    from tfcompress.bench.result import BenchmarkResult, BenchmarkRow


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats: lower latency (x) and higher accuracy (y).

    A point is on the front when no other point has latency <= and accuracy >= with at
    least one strictly better. Returned in order of increasing latency.
    """
    return pareto_indices([(x, -y) for x, y in points])


def pareto_indices(points: Sequence[Sequence[float]]) -> list[int]:
    """Indices of the points no other point dominates, every coordinate to be minimised.

    A point is dominated when another is <= on every coordinate and < on at least one. Equal
    points are all kept. Returned in lexicographic order of the points.

    Example:
        >>> pareto_indices([(1, 1, 1), (2, 2, 2), (0, 3, 1), (1, 1, 1)])
        [2, 0, 3]
    """
    front = [
        i
        for i, point in enumerate(points)
        if not any(
            all(o <= p for o, p in zip(other, point, strict=True))
            and any(o < p for o, p in zip(other, point, strict=True))
            for j, other in enumerate(points)
            if j != i
        )
    ]
    return sorted(front, key=lambda i: (tuple(points[i]), i))


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend.

    Raises:
        MissingDependencyError: matplotlib is not installed.
    """
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError as error:
        raise MissingDependencyError(
            "plots need matplotlib; pip install 'tfcompress[plot]' (or leave out the png "
            "report format)."
        ) from error
    matplotlib.use("Agg", force=True)
    return importlib.import_module("matplotlib.pyplot")


def plot_all(result: BenchmarkResult) -> dict[str, bytes]:
    """Render every plot the result has data for, as PNG bytes by name.

    Raises:
        MissingDependencyError: matplotlib is not installed.
    """
    plt = pyplot()
    plots = {}
    for name, draw in (
        ("accuracy_latency", _accuracy_latency),
        ("size", _sizes),
        ("batch", _batch),
    ):
        figure = draw(plt, result)
        if figure is not None:
            buffer = io.BytesIO()
            figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
            plt.close(figure)
            plots[name] = buffer.getvalue()
    return plots


def _label(row: Any) -> str:
    return f"{row.artifact} [{row.backend}, {row.threads}t]"


def _accuracy_latency(plt: Any, result: BenchmarkResult) -> Any:
    # One point per artifact x backend x threads: its smallest batch (a static-batch file's
    # is its own batch), placed at its median latency per sample, so files that compute 1 or
    # 32 samples per call stand on one axis.
    smallest: dict[tuple[str, str, int | None], BenchmarkRow] = {}
    for r in result.rows:
        if r.ok and r.accuracy is not None and r.latency_per_sample_ms is not None:
            key = (r.artifact, r.backend, r.threads)
            if key not in smallest or (r.batch or 0) < (smallest[key].batch or 0):
                smallest[key] = r
    rows = list(smallest.values())
    if not rows:
        return None
    points = [(r.latency_per_sample_ms or 0.0, (r.accuracy or 0.0) * 100) for r in rows]
    front = pareto_front(points)
    figure, axes = plt.subplots(figsize=(7, 4.5))
    axes.scatter([p[0] for p in points], [p[1] for p in points], color="tab:blue", zorder=2)
    for row, (x, y) in zip(rows, points, strict=True):
        axes.annotate(_label(row), (x, y), fontsize=7, xytext=(4, 3), textcoords="offset points")
    axes.plot(
        [points[i][0] for i in front],
        [points[i][1] for i in front],
        color="tab:red",
        marker="o",
        label="Pareto front",
        zorder=3,
    )
    batches = sorted({r.batch for r in rows if r.batch})
    shown = ", ".join(map(str, batches))
    axes.set_xlabel(f"median latency per sample, at batch {shown} (ms)")
    axes.set_ylabel(f"{result.metric} (%)")
    axes.set_title("Accuracy vs latency")
    axes.legend(loc="lower right")
    axes.grid(alpha=0.3)
    return figure


def _sizes(plt: Any, result: BenchmarkResult) -> Any:
    sizes: dict[str, tuple[int, int]] = {}
    for row in result.rows:
        if row.size is not None and row.artifact not in sizes:
            sizes[row.artifact] = (row.size.file_bytes, row.size.gzip_bytes)
    if not sizes:
        return None
    names = list(sizes)
    positions = range(len(names))
    figure, axes = plt.subplots(figsize=(max(5, 1.2 * len(names)), 4))
    axes.bar([p - 0.2 for p in positions], [sizes[n][0] / 1024 for n in names], 0.4, label="file")
    axes.bar([p + 0.2 for p in positions], [sizes[n][1] / 1024 for n in names], 0.4, label="gzip")
    axes.set_xticks(list(positions), names, rotation=30, ha="right", fontsize=8)
    axes.set_ylabel("KiB")
    axes.set_title("Artifact size")
    axes.legend()
    return figure


def _batch(plt: Any, result: BenchmarkResult) -> Any:
    series: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
    for row in result.rows:
        if row.ok and row.latency is not None and row.batch is not None:
            series[_label(row)].append((row.batch, row.latency.p50, row.throughput_per_s or 0))
    if not series or max(len(v) for v in series.values()) < 2:
        return None
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for label, values in series.items():
        values.sort()
        left.plot([v[0] for v in values], [v[1] for v in values], marker="o", label=label)
        right.plot([v[0] for v in values], [v[2] for v in values], marker="o", label=label)
    for axes, title, unit in (
        (left, "Latency per batch", "median ms"),
        (right, "Throughput", "samples / s"),
    ):
        axes.set_xscale("log", base=2)
        axes.set_xlabel("batch size")
        axes.set_ylabel(unit)
        axes.set_title(title)
        axes.grid(alpha=0.3)
    right.legend(fontsize=7)
    return figure
