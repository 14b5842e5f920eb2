"""Budget-driven model selection on the MNIST subset, with 1 and with 2 Dask workers.

Run: .venv/bin/python benchmarks/selection.py
     (writes the `selection` section of docs/benchmarks.md, docs/img/selection_pareto.png and
     benchmarks/results/selection.json)
     .venv/bin/python benchmarks/selection.py --quick
     (a tiny run that proves the script works: prints the section, writes nothing under docs/)

The same selection (same candidates, data, budgets and seed, a fresh work folder each time)
runs on a dask.distributed.LocalCluster of 1 and then 2 worker processes (1 thread each);
the wall time of each select_model call is measured (cluster start-up excluded and reported
apart). The Pareto table and plot come from the 1-worker run, whose latencies were measured
with no other candidate running beside them. Every sentence of the section is computed from
these measurements.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow; workers inherit it

from _markdown import machine_line, write_section

import tfcompress
from tfcompress.report.table import format_table
from tfcompress.selection import Budgets, SelectionResult
from tfcompress.selection.report import plot_png

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "selection.json"
PLOT = ROOT.parent / "docs" / "img" / "selection_pareto.png"

FULL = {
    "families": ("mobilenet_v2", "mobilenet_v3_small", "mixnet_s"),
    "widths": (0.35, 0.5, 0.75),
    "train": 2000,
    "val": 1000,
    "epochs": 3,
    "runs": 50,
    "min_seconds": 0.5,
    "max_size": 800_000,
    "min_accuracy": 0.5,
}
QUICK = {
    "families": ("mobilenet_v2",),
    "widths": (0.35, 0.5),
    "train": 200,
    "val": 100,
    "epochs": 1,
    "runs": 5,
    "min_seconds": 0.05,
    "max_size": 700_000,
    "min_accuracy": 0.0,
}


Run = tuple[SelectionResult, float, float]  # result, cluster start-up s, selection wall s


def run_once(workers: int, plan: dict[str, Any], budgets: Budgets) -> Run:
    """One selection on a fresh LocalCluster of ``workers`` processes: result, start-up, wall."""
    from distributed import Client, LocalCluster

    split = tfcompress.samples.datasets.mnist()
    started = time.perf_counter()
    with (
        LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
        tempfile.TemporaryDirectory() as workdir,
    ):
        client.wait_for_workers(workers)
        ready = time.perf_counter()
        result = tfcompress.select_model(
            train_data=(split.train.x[: plan["train"]], split.train.y[: plan["train"]]),
            eval_data=(split.test.x[: plan["val"]], split.test.y[: plan["val"]]),
            budgets=budgets,
            families=plan["families"],
            width_multipliers=plan["widths"],
            resolutions=(32,),
            epochs=plan["epochs"],
            executor=client,
            workdir=workdir,
            latency_runs=plan["runs"],
            latency_seconds=plan["min_seconds"],
        )
        done = time.perf_counter()
    return result, ready - started, done - ready


def section(plan: dict[str, Any], runs: dict[int, Run]) -> str:
    """The Markdown section, every number and comparison from ``runs``."""
    one, startup_1, wall_1 = runs[1]
    _, startup_2, wall_2 = runs[2]
    header = ["candidate", "params", "MACs", "int8 size", "p50 latency", "int8 accuracy", "status"]
    rows = [
        [
            f"{r.name}{' (pick)' if one.best and r.name == one.best.name else ''}"
            f"{' (Pareto)' if r.name in one.pareto else ''}",
            f"{r.params:,}" if r.params else "-",
            f"{r.macs:,}" if r.macs else "-",
            f"{r.size_bytes:,} B" if r.size_bytes else "-",
            f"{r.latency_ms:.3f} ms" if r.latency_ms else "-",
            f"{r.accuracy:.2%}" if r.accuracy is not None else "-",
            r.status + (f": {r.reason}" if r.reason else ""),
        ]
        for r in one.candidates
    ]
    trained = sum(r.status == "trained" for r in one.candidates)
    over = sum(r.status == "over_budget" for r in one.candidates)
    faster = wall_1 / wall_2 if wall_2 > 0 else float("nan")
    verdict = "faster" if faster > 1 else "not faster"
    pick = (
        f"The pick: {one.best.name} ({one.best.accuracy:.2%} int8 accuracy, "
        f"{one.best.size_bytes:,} B, {one.best.latency_ms:.3f} ms)."
        if one.best
        else "No candidate met every budget."
    )
    hosts = sorted({r.host for r in one.candidates if r.host})
    return "\n".join(
        [
            "## Model selection (`tfcompress.select_model`) with 1 and 2 Dask workers",
            "",
            f"Machine: {machine_line()}. Script: `benchmarks/selection.py`. "
            f"{len(one.candidates)} candidates ({', '.join(plan['families'])} x widths "
            f"{', '.join(f'{w:g}' for w in plan['widths'])} at 32x32), {plan['train']} "
            f"training and {plan['val']} validation MNIST digits, {plan['epochs']} epoch(s); "
            f"budgets: {one.budgets}. {over} candidate(s) over the size or latency budget were "
            f"measured but never trained; {trained} were trained.",
            "",
            "| Dask workers | cluster start-up | selection wall time |",
            "|---:|---:|---:|",
            f"| 1 | {startup_1:.1f} s | {wall_1:.1f} s |",
            f"| 2 | {startup_2:.1f} s | {wall_2:.1f} s |",
            "",
            f"With 2 workers the selection was {verdict} ({faster:.2f}x the speed of 1 worker) "
            "on this machine. Latency below comes from the 1-worker run (no other candidate "
            f"running beside it), measured on {', '.join(hosts)}: int8 .tflite, batch 1, "
            f"{one.budgets.target}, {one.budgets.threads} thread(s), median.",
            "",
            format_table(header, rows, markdown=True),
            "",
            pick,
            "",
            "![Accuracy vs latency of the trained candidates](img/selection_pareto.png)",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny run; docs/ untouched")
    parser.add_argument("--max-size", type=int, help="bytes (default 800000; quick 700000)")
    parser.add_argument("--max-latency", type=float, default=5.0, help="ms (5)")
    parser.add_argument("--min-accuracy", type=float, help="fraction (default 0.5; quick 0)")
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    budgets = Budgets(
        max_size=args.max_size or plan["max_size"],
        max_latency=args.max_latency,
        min_accuracy=plan["min_accuracy"] if args.min_accuracy is None else args.min_accuracy,
    )
    runs = {workers: run_once(workers, plan, budgets) for workers in (1, 2)}
    body = section(plan, runs)
    if args.quick:
        print(body)
        return
    PLOT.parent.mkdir(parents=True, exist_ok=True)
    PLOT.write_bytes(plot_png(runs[1][0]))
    RESULTS.parent.mkdir(exist_ok=True)
    record = {
        str(w): {"startup_s": s, "wall_s": t, "result": r.to_dict()}
        for w, (r, s, t) in runs.items()
    }
    RESULTS.write_text(json.dumps(record, indent=1, default=str) + "\n")
    print(f"wrote {write_section('selection', body)}, {PLOT} and {RESULTS}")


if __name__ == "__main__":
    main()
