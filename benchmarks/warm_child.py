"""What the warm fine-tuning child saves: three QATs in one process, three ways.

``isolate=True`` fine-tunes in a child process (what the CLI and ``compress`` use). The first
fine-tune of a process starts the child (TensorFlow and tfmot imported there); later ones
reuse it (:mod:`tfcompress._child`). This script times three QATs of the same
model in one process: in a fresh child each time (the warm child closed before each call,
as before it existed), in the warm child, and in process (``isolate=False``). It also checks
that the warm child's exports are byte-identical to the fresh child's.

Model: the digits Dense net of tfcompress/samples/gate_models.py, 400 training samples, one
epoch, batch 32.

Run: .venv/bin/python benchmarks/warm_child.py  (writes the warm-child section of
docs/benchmarks.md; about two minutes on two cores)
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from _markdown import machine_line, write_section

import tfcompress
from tfcompress import _child as warm_child
from tfcompress.report.table import format_table
from tfcompress.samples.datasets import digits
from tfcompress.samples.gate_models import build_gate_models

CALLS = 3


def _times(model: Path, train: tuple, *, isolate: bool, fresh: bool) -> tuple[list[float], set]:
    seconds, contents = [], set()
    for _ in range(CALLS):
        if fresh:
            warm_child.close_warm_child()
        start = time.perf_counter()
        result = tfcompress.qat(model, train_data=train, epochs=1, isolate=isolate)
        seconds.append(time.perf_counter() - start)
        contents.add(result.model_content)
    return seconds, contents


def main() -> None:
    started = time.perf_counter()
    split = digits(seed=0)
    train = (split.train.x[:400], split.train.y[:400])
    with tempfile.TemporaryDirectory() as folder:
        model = build_gate_models(Path(folder))["reference"]
        fresh, fresh_bytes = _times(model, train, isolate=True, fresh=True)
        warm_child.close_warm_child()
        warm, warm_bytes = _times(model, train, isolate=True, fresh=False)
        warm_child.close_warm_child()
        inside, _ = _times(model, train, isolate=False, fresh=False)
    rows = [
        [name, *(f"{s:.1f}s" for s in times), f"{sum(times[1:]) / (CALLS - 1):.1f}s"]
        for name, times in (
            ("a fresh child each time", fresh),
            ("warm child (isolate=True now)", warm),
            ("in process (isolate=False)", inside),
        )
    ]
    identical = fresh_bytes == warm_bytes and len(warm_bytes) == 1
    saved = sum(fresh[1:]) / (CALLS - 1) - sum(warm[1:]) / (CALLS - 1)
    body = "\n".join(
        [
            "## Warm fine-tuning child (issue 21)",
            "",
            f"Measured by `benchmarks/warm_child.py` on {machine_line()} in "
            f"{time.perf_counter() - started:.0f}s: {CALLS} QATs of the digits Dense net "
            "(400 samples, 1 epoch) in one process.",
            "",
            format_table(["how", "1st", "2nd", "3rd", "later ones, mean"], rows),
            "",
            f"* The warm child saves {saved:.1f}s on each fine-tune after the first "
            "(the child's TensorFlow and tfmot imports and first traces).",
            f"* Its exports are {'byte-identical to' if identical else 'NOT identical to'} "
            "those of a fresh child.",
        ]
    )
    print(body)
    write_section("warm_child", body)


if __name__ == "__main__":
    main()
