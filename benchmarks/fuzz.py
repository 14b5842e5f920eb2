"""A long fuzz campaign against the CLI; its totals go into docs/benchmarks.md.

Run: .venv/bin/python benchmarks/fuzz.py [--cases 2000] [--seed N]   (writes the `fuzz` section)

Every case mutates a seed model or data file with a named strategy, or builds a hostile
command line (see fuzzing/mutations*.py, invocations.py and cases.py), and runs `inspect`,
`benchmark`, `quantize`, `gate`, `compress`, `select` or `zoo` through the real CLI. The
goal is zero crashes, zero hangs and zero contract violations; the section records the seed,
so a campaign can be replayed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from _markdown import machine_line, write_section

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # fuzzing/ is not installed

from fuzzing import run_campaign
from tfcompress.models import probe
from tfcompress.report.table import format_table

RESULTS = Path(__file__).resolve().parent / "results" / "fuzz.json"


def probe_cost_ms(model: Path, *, repeats: int = 7) -> dict[str, float]:
    """Median cost of the crash-containing probe: a fresh child, and a cache hit."""
    content = model.read_bytes()
    cold, cached = [], []
    for _ in range(repeats):
        probe.clear_cache()
        start = time.perf_counter()
        probe.probe_model(content, "tflite", source=model)
        cold.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        probe.probe_model(content, "tflite", source=model)
        cached.append((time.perf_counter() - start) * 1000)
    return {"cold": statistics.median(cold), "cached": statistics.median(cached)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=int(time.strftime("%Y%m%d")))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        result = run_campaign(Path(folder) / "fuzz", cases=args.cases, seed=args.seed)
        probe = probe_cost_ms(Path(folder) / "fuzz" / "seeds" / "seed_int8.tflite")
    record = result.to_dict() | {"probe_ms": probe, "machine": machine_line()}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(record, indent=2) + "\n")
    write_section("fuzz", section(record))
    print(format_table(*_totals_table(record["totals"])))
    print(f"{len(record['violations'])} violations; details in {RESULTS}")
    return 1 if record["violations"] else 0


def _totals_table(totals: dict[str, dict[str, int]]) -> tuple[list[str], list[list[str]]]:
    columns = ["cases", "clean_errors", "accepted", "gate_failed", "interrupted", "crashes"]
    columns += ["hangs", "violations"]
    rows = [[entry, *(str(counts.get(c, 0)) for c in columns)] for entry, counts in totals.items()]
    overall = Counter()
    for counts in totals.values():
        overall.update(counts)
    rows.append(["all", *(str(overall.get(c, 0)) for c in columns)])
    return ["entry point", *(c.replace("_", " ") for c in columns)], rows


def section(record: dict) -> str:
    header, rows = _totals_table(record["totals"])
    table = format_table(header, rows, markdown=True)
    strategies = ", ".join(f"`{name}` x{n}" for name, n in sorted(record["strategies"].items()))
    violations = len(record["violations"])
    crashes = sum(r.get("crashes", 0) for r in record["totals"].values())
    hangs = sum(r.get("hangs", 0) for r in record["totals"].values())
    probe = record["probe_ms"]
    verdict = (
        "Every case kept the contract."
        if not violations
        else f"{violations} cases broke the contract ({crashes} crashes, {hangs} hangs): see "
        "`benchmarks/results/fuzz.json`."
    )
    return f"""## Fuzz campaign: untrusted models, data and options

`benchmarks/fuzz.py --cases {record["cases"]} --seed {record["seed"]}` on {record["machine"]},
{record["seconds"]:.0f} s. Each case runs one CLI entry point on a mutated input or a hostile
command line; a case keeps the contract when it ends in a success (exit 0), a failed check
(exit 1, `gate` and `select` only) or one error line with exit 2 (after only tfcompress's own
progress log lines, if any), with no signal, hang, traceback, leftover output, changed input,
code run or marker file written by a payload (Lambda bytecode or a graph's `WriteFile`), and
no process left running by a compiler (see [security.md](security.md)). "Accepted" counts
mutants that were still valid inputs (e.g. a bit flipped inside a weight).

Cases that set `TFCOMPRESS_*` limits, send a signal or run the pytest plugin run as a process
of their own, in a session and a `TMPDIR` of their own: a bad limit must be exit 2 with one
line; SIGTERM, SIGHUP or SIGINT 0.2-3 s into `benchmark`/`quantize` must end in exit 143/129/130
with one line ("interrupted"; or a clean finish if it ended first), no process left in the
session, nothing in `TMPDIR` and no partial output; `python -m pytest` with hostile
`--tfc-*` options must be pytest's usage error (exit 4, counted as a clean error) with the
gate's inputs unchanged.

{table}

{verdict}

Strategies and how many cases each drew: {strategies}.

Cost of the crash-containing probe (a child process that loads, allocates and runs a `.tflite`
once before this process does): {probe["cold"]:.0f} ms the first time for the 8x8x1 seed model,
{probe["cached"]:.3f} ms when the same bytes are loaded again in the same process.
"""


if __name__ == "__main__":
    raise SystemExit(main())
