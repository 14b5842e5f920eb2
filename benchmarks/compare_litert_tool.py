"""Check the harness against LiteRT's own benchmark tool on the same .tflite, one thread.

LiteRT's tool runs models through ``CompiledModel`` on the CPU accelerator, so the check
compares it with the harness on the same runtime path (backend ``cpu-compiled``), both pinned
to one thread. Agreement is measured, not asserted: each of ``repeats`` interleaved rounds
times the tool and the harness back to back (300 calls each), giving one ratio harness/tool
per round; the verdict comes from the 95% t-interval of the mean log-ratio over the rounds,
widened by half of the tool's 0.01 ms rounding step:

* ``agree``: the whole interval lies inside [1 - TOLERANCE, 1 + TOLERANCE];
* ``disagree``: the whole interval lies outside it;
* ``inconclusive``: neither (too noisy, or the tool's 0.01 ms rounding is coarser than the
  bound on a tiny model): no claim is made either way.

The ``cpu`` backend (the ``Interpreter`` with XNNPACK) is reported beside it for information:
it is a different runtime, so it may differ.

Run: .venv/bin/python benchmarks/compare_litert_tool.py MODEL.tflite [MODEL.tflite ...]
Exit 0 when no model disagrees, 1 otherwise. ``run_all.py`` calls :func:`compare` and
records the result in docs/benchmarks.md.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from scipy.stats import t as t_distribution

import tfcompress

TOLERANCE = 0.10
REPEATS = 7
TOOL_ROUNDING_MS = 0.01  # the tool writes medians with two decimals


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


def compare(model: Path, *, repeats: int = REPEATS) -> dict[str, object]:
    """Ratio harness/tool over ``repeats`` interleaved rounds, with its 95% interval.

    Rounds alternate tool, harness (``cpu-compiled``) and harness (``cpu``) so background
    load hits every side alike. The verdict claims agreement only when the whole interval
    is inside the tolerance.
    """
    if repeats < 2:
        raise ValueError(f"an interval needs at least 2 rounds, got {repeats}")
    tool, harness, interpreter = [], [], []
    for _ in range(repeats):
        tool.append(litert_tool_median(model))
        harness.append(harness_median(model))
        interpreter.append(harness_median(model, backend="cpu"))
    logs = [math.log(h / t) for h, t in zip(harness, tool, strict=True) if t > 0]
    mean, spread = statistics.fmean(logs), statistics.stdev(logs)
    half = float(t_distribution.ppf(0.975, len(logs) - 1)) * spread / math.sqrt(len(logs))
    tool_ms = statistics.median(tool)
    # The tool prints medians rounded to 0.01 ms: its true median lies within half a step,
    # which widens the interval (by ~6% each way on a 0.08 ms model).
    step = TOOL_ROUNDING_MS / 2
    low = math.exp(mean - half) * tool_ms / (tool_ms + step)
    high = math.exp(mean + half) * tool_ms / max(tool_ms - step, step)
    if low >= 1 - TOLERANCE and high <= 1 + TOLERANCE:
        verdict = "agree"
    elif high < 1 - TOLERANCE or low > 1 + TOLERANCE:
        verdict = "disagree"
    else:
        verdict = "inconclusive"
    return {
        "model": model.name,
        "repeats": repeats,
        "litert_tool_median_ms": round(tool_ms, 3),
        "harness_median_ms": round(statistics.median(harness), 3),
        "interpreter_median_ms": round(statistics.median(interpreter), 3),
        "tool_spread": round((max(tool) - min(tool)) / tool_ms, 4),
        "ratio": round(math.exp(mean), 4),
        "ratio_low": round(low, 4),
        "ratio_high": round(high, 4),
        "rounding_share": round(TOOL_ROUNDING_MS / tool_ms, 4) if tool_ms else None,
        "verdict": verdict,
    }


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    results = [compare(Path(p)) for p in paths]
    for r in results:
        print(
            f"{r['model']}: harness/tool ratio {r['ratio']:.3f} (95% interval "
            f"{r['ratio_low']:.3f}-{r['ratio_high']:.3f} over {r['repeats']} rounds) -> "
            f"{r['verdict']} within {TOLERANCE:.0%}; tool median {r['litert_tool_median_ms']} ms, "
            f"harness (cpu-compiled) {r['harness_median_ms']} ms, harness (cpu, Interpreter) "
            f"{r['interpreter_median_ms']} ms"
        )
    return 1 if any(r["verdict"] == "disagree" for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
