"""The Edge TPU linter on every zoo model: what compiler 16 would map, and where it splits.

Run: .venv/bin/python benchmarks/edgetpu_zoo.py
     (writes the `edgetpu_zoo` section of docs/benchmarks.md and
     benchmarks/results/edgetpu_zoo.json)

Each registered zoo model (random weights: compatibility does not depend on them) is built
at 96x96x3 with 10 classes and width 0.5, converted with ``quantize(target="edgetpu")``
(full int8, uint8 I/O, batch 1, calibrated on 16 random images) and checked by
``tfcompress.edgetpu.check``. No Edge TPU software is involved; the words of the section are
computed from the reports.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from _markdown import machine_line, write_section

import tfcompress
from tfcompress.report.table import format_table
from tfcompress.targets.edgetpu import Effect
from tfcompress.zoo import create_model, list_models

RESULTS = Path(__file__).resolve().parent / "results" / "edgetpu_zoo.json"
INPUT_SHAPE = (96, 96, 3)
WIDTH = 0.5
CLASSES = 10


def lint(name: str, calibration: np.ndarray) -> dict[str, Any]:
    """Convert one zoo model the Edge TPU way and keep the linter's report as data."""
    model = create_model(name, input_shape=INPUT_SHAPE, num_classes=CLASSES, width_multiplier=WIDTH)
    result = tfcompress.quantize(model, representative_data=calibration, target="edgetpu")
    report = result.edgetpu.linter
    blocking = [f for f in report.findings if f.effect is not Effect.INFO]
    return {
        "model": name,
        "int8_bytes": result.size_bytes,
        "ops_total": report.ops_total,
        "ops_mapped": report.ops_mapped,
        "macs_mapped_fraction": report.macs_mapped_fraction,
        "segments_predicted": report.segments_predicted,
        "first_unmapped_op": (
            None
            if report.first_unmapped_op is None
            else f"#{report.first_unmapped_op.index} {report.first_unmapped_op.type}"
        ),
        "rules": sorted({f.rule for f in blocking}),
        "compatible": report.compatible,
        "compiler": result.edgetpu.compiler_status,
    }


def main() -> None:
    start = time.perf_counter()
    calibration = np.random.default_rng(0).random((16, *INPUT_SHAPE), dtype=np.float32)
    rows = [lint(name, calibration) for name in list_models()]
    seconds = time.perf_counter() - start
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": machine_line(), "rows": rows}, indent=2) + "\n")
    write_section("edgetpu_zoo", section(rows, seconds))
    print(section(rows, seconds))


def section(rows: list[dict[str, Any]], seconds: float) -> str:
    header = ["model", "int8 bytes", "ops on TPU", "MACs on TPU", "segments", "splits at", "rules"]
    table = format_table(
        header,
        [
            [
                r["model"],
                f"{r['int8_bytes']:,}",
                f"{r['ops_mapped']}/{r['ops_total']}",
                "-" if r["macs_mapped_fraction"] is None else f"{r['macs_mapped_fraction']:.1%}",
                str(r["segments_predicted"]),
                r["first_unmapped_op"] or "-",
                ", ".join(r["rules"]) or "-",
            ]
            for r in rows
        ],
        markdown=True,
    )
    whole = [r["model"] for r in rows if r["compatible"]]
    split_ops = Counter(r["first_unmapped_op"].split()[1] for r in rows if r["first_unmapped_op"])
    verdict = f"{len(whole)} of {len(rows)} zoo models are predicted to run whole on the Edge TPU"
    verdict += f" ({', '.join(whole)})" if whole else ""
    if split_ops:
        verdict += "; the others split at " + ", ".join(
            f"{op} ({count} model{'s' if count > 1 else ''})" for op, count in split_ops.items()
        )
    return "\n".join(
        [
            "## Edge TPU linter on the zoo models",
            "",
            f"Machine: {machine_line()}. Script: `benchmarks/edgetpu_zoo.py` ({seconds:.0f}s). "
            f"Each zoo model at {'x'.join(map(str, INPUT_SHAPE))}, {CLASSES} classes, width "
            f'{WIDTH}, random weights, converted with `quantize(target="edgetpu")` (int8, '
            "uint8 I/O, batch 1) and checked by `tfcompress.edgetpu.check` (the rules of "
            "edgetpu_compiler 16; no compiler ran: "
            f"{', '.join(sorted({r['compiler'] for r in rows}))}).",
            "",
            table,
            "",
            verdict + ".",
        ]
    )


if __name__ == "__main__":
    main()
