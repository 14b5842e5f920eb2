"""A long fuzz campaign against the CLI; its totals go into docs/benchmarks.md.

Run: .venv/bin/python benchmarks/fuzz.py [--cases 2000] [--seed N]   (writes the `fuzz` section)
     .venv/bin/python benchmarks/fuzz.py --classes round4 --cases 616   (the `fuzz-round4` one)

``--classes`` runs only the strategies of those classes (a strategy's name up to its first
dot: ``mcu``, ``export_c``, ``target``, ``on``, ``replay``, ``echo``, ``env``, ``signal``...;
``round4`` is every class of issue 43's campaign, fuzzing/invocations_round4.py) and writes
its counts per class into a section of its own, named after the classes.

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
    parser.add_argument(
        "--classes",
        type=lambda text: [part for part in text.split(",") if part],
        default=[],
        help="only these strategy classes, comma-separated (round4: all of round 4's)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "fuzz"
        result = run_campaign(root, cases=args.cases, seed=args.seed, classes=args.classes)
        probe = probe_cost_ms(root / "seeds" / "seed_int8.tflite") if not args.classes else None
    record = result.to_dict() | {"probe_ms": probe, "machine": machine_line()}
    name = "fuzz" + "".join(f"-{c}" for c in args.classes)
    results = RESULTS.with_name(f"{name}.json")
    results.parent.mkdir(exist_ok=True)
    results.write_text(json.dumps(record, indent=2) + "\n")
    if args.classes:
        write_section(name, class_section(record, args.classes))
        print(format_table(*_totals_table(record["classes"], "class")))
    else:
        write_section("fuzz", section(record))
        print(format_table(*_totals_table(record["totals"])))
    print(f"{len(record['violations'])} violations; details in {results}")
    return 1 if record["violations"] else 0


def _totals_table(
    totals: dict[str, dict[str, int]], kind: str = "entry point"
) -> tuple[list[str], list[list[str]]]:
    columns = ["cases", "clean_errors", "accepted", "gate_failed", "interrupted", "crashes"]
    columns += ["hangs", "violations"]
    rows = [[entry, *(str(counts.get(c, 0)) for c in columns)] for entry, counts in totals.items()]
    overall = Counter()
    for counts in totals.values():
        overall.update(counts)
    rows.append(["all", *(str(overall.get(c, 0)) for c in columns)])
    return [kind, *(c.replace("_", " ") for c in columns)], rows


def class_section(record: dict, classes: list[str]) -> str:
    """The counts per class of a campaign run with ``--classes`` (round 4's, say)."""
    table = format_table(*_totals_table(record["classes"], "class"), markdown=True)
    violations = record["violations"]
    found = Counter(v["strategy"] for v in violations)
    verdict = (
        "Every case kept the contract."
        if not violations
        else f"{len(violations)} cases broke the contract: "
        + ", ".join(f"`{name}` x{n}" for name, n in sorted(found.items()))
        + " (details: `benchmarks/results/"
        + f"fuzz-{'-'.join(classes)}.json`)."
    )
    return f"""## Fuzz campaign, classes {", ".join(classes)}

`benchmarks/fuzz.py --classes {",".join(classes)} --cases {record["cases"]} --seed \
{record["seed"]}` on {record["machine"]}, {record["seconds"]:.0f} s. Judged as the campaign
above, and also: no stderr line longer than 4,500 characters (a quoted value is cut past
1,000), an `export-c` that exits 0 wrote both files and its `.cc` compiles as C++11 with
nothing of `--out` in it, the long-value cases end within 30 s (sizes and durations parse in
linear time), and the `mcu` cases run with a 3 GiB data segment limit on the CLI itself.

{table}

{verdict}
"""


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
