"""Check the harness against LiteRT's own benchmark tool on the same .tflite, one thread.

LiteRT's tool runs models through ``CompiledModel`` on the CPU accelerator, so the check
compares it with the harness on the same runtime path (backend ``cpu-compiled``): agreement
there validates the harness's timing method. The ``cpu`` backend (the ``Interpreter`` with
XNNPACK) is reported beside it for information: it is a different runtime, so it may differ.

Run: .venv/bin/python benchmarks/compare_litert_tool.py MODEL.tflite [MODEL.tflite ...]
Exit 0 when every median agrees within 10%, 1 otherwise. ``run_all.py`` calls
:func:`compare` and records the result in docs/benchmarks.md.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import tfcompress

TOLERANCE = 0.10


def litert_tool_median(model: Path, *, runs: int = 300, threads: int = 1) -> float:
    """Median latency (ms) reported by ``python -m ai_edge_litert.tools.benchmark_litert_model``."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "result.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "ai_edge_litert.tools.benchmark_litert_model",
                f"--model={model}",
                f"--num_threads={threads}",
                f"--num_runs={runs}",
                "--warmup_runs=5",
                f"--result_json={report}",
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        return float(json.loads(report.read_text())["latency"]["median_ms"])


def harness_median(
    model: Path, *, backend: str = "cpu-compiled", runs: int = 300, threads: int = 1
) -> float:
    """Median latency (ms) from ``tfcompress.benchmark`` on ``backend``."""
    result = tfcompress.benchmark(
        [model], backends=(backend,), threads=(threads,), runs=runs, min_seconds=1.0
    )
    row = result.rows[0]
    if not row.ok or row.latency is None:
        raise RuntimeError(f"harness row failed: {row.status}")
    return row.latency.p50


def compare(model: Path, *, repeats: int = 3) -> dict[str, float | bool | str]:
    """Median over ``repeats`` interleaved runs of the tool and the harness (both backends).

    On a shared or virtual machine one run's median moves by 10-30% from the next (the
    tool's own spread is reported as ``tool_spread``), so each side is summarised by the
    median of its per-run medians, taken in alternation so background load hits all sides.
    """
    tool, harness, interpreter = [], [], []
    for _ in range(repeats):
        tool.append(litert_tool_median(model))
        harness.append(harness_median(model))
        interpreter.append(harness_median(model, backend="cpu"))
    tool_ms, harness_ms = statistics.median(tool), statistics.median(harness)
    difference = abs(harness_ms - tool_ms) / tool_ms
    return {
        "model": model.name,
        "litert_tool_median_ms": round(tool_ms, 3),
        "tool_spread": round((max(tool) - min(tool)) / tool_ms, 4),
        "harness_median_ms": round(harness_ms, 3),
        "interpreter_median_ms": round(statistics.median(interpreter), 3),
        "difference": round(difference, 4),
        "agree": difference <= TOLERANCE,
    }


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    results = [compare(Path(p)) for p in paths]
    for r in results:
        verdict = "agree" if r["agree"] else "DISAGREE"
        print(
            f"{r['model']}: LiteRT tool {r['litert_tool_median_ms']} ms, harness (cpu-compiled) "
            f"{r['harness_median_ms']} ms, difference {r['difference']:.1%} -> {verdict} "
            f"(tool's own run-to-run spread {r['tool_spread']:.0%}); "
            f"harness (cpu, Interpreter) {r['interpreter_median_ms']} ms"
        )
    return 0 if all(r["agree"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
