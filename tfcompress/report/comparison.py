"""The float-vs-compressed table that `quantize` and `demo` print."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tfcompress.report.table import format_table


@dataclass(frozen=True)
class VariantRow:
    """One artifact in a comparison: its size and (optionally) its accuracy."""

    name: str
    size_bytes: int | None
    accuracy: float | None = None


def comparison_table(rows: Sequence[VariantRow], *, markdown: bool = False) -> str:
    """Bytes, size ratio, accuracy and drop of each row against the first (the reference)."""
    reference = rows[0]
    with_accuracy = any(r.accuracy is not None for r in rows)
    header = ["variant", "bytes", "ratio"] + (["accuracy", "drop"] if with_accuracy else [])
    cells = []
    for row in rows:
        line = [
            row.name,
            "-" if row.size_bytes is None else f"{row.size_bytes:,}",
            _ratio(row.size_bytes, reference.size_bytes),
        ]
        if with_accuracy:
            line += _accuracy_cells(row.accuracy, reference.accuracy)
        cells.append(line)
    return format_table(header, cells, markdown=markdown)


def _ratio(size: int | None, reference: int | None) -> str:
    return "-" if not size or not reference else f"{size / reference:.3f}"


def _accuracy_cells(accuracy: float | None, reference: float | None) -> list[str]:
    if accuracy is None:
        return ["-", "-"]
    drop = "-" if reference is None else f"{(reference - accuracy) * 100:+.2f} pt"
    return [f"{accuracy:.2%}", drop]
