"""Plain-text tables for terminals and Markdown files."""

from __future__ import annotations

from collections.abc import Sequence


def format_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, markdown: bool = False
) -> str:
    """Align ``rows`` under ``header``; numbers (cells starting with a digit/sign) right-aligned."""
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]
    numeric = [
        all(str(r[i])[:1].isdigit() or str(r[i])[:1] in "+-" for r in rows) if rows else False
        for i in range(len(header))
    ]

    def line(cells: Sequence[str]) -> str:
        padded = [
            str(c).rjust(w) if num else str(c).ljust(w)
            for c, w, num in zip(cells, widths, numeric, strict=True)
        ]
        return "| " + " | ".join(padded) + " |" if markdown else "  ".join(padded).rstrip()

    rule = (
        "|"
        + "|".join(
            ("-" * (w + 1) + ":") if n else ("-" * (w + 2))
            for w, n in zip(widths, numeric, strict=True)
        )
        + "|"
        if markdown
        else "  ".join("-" * w for w in widths)
    )
    return "\n".join([line(header), rule, *(line(r) for r in rows)])
