"""What measuring in a worker process costs: p50 latency and wall time, worker vs in-process.

``tfcompress.benchmark`` runs each native runtime in a worker process per runner (so a crash
is an error row, and a time limit can stop a hang). The timing loop runs inside the worker,
so latency should not move; starting the worker costs wall time once per runner (forked
from the zygote on Linux; each round also times the same call with fresh interpreters,
``TFCOMPRESS_NO_ZYGOTE=1``, for comparison). This script measures both on the MNIST CNN
(float32 and int8 ``.tflite``, random weights: latency does not depend on them), LiteRT
``cpu`` backend, one thread, batches 1 and 8.

Method: ``ROUNDS`` interleaved rounds; each round benchmarks the artifacts once in worker
processes and once in this process (order alternating), with the same settings. Per row
(artifact x batch): the ratio of medians worker/in-process per round gives the shift, with
the 95% t-interval of the mean log-ratio over rounds; the harness's own interval is the 95%
prediction interval of one round's in-process p50 (how far the same measurement moves from
one round to the next, relative to its mean). The verdict per row is computed: ``within``
when the shift's interval lies inside the harness's own interval, ``outside`` when it lies
outside, else ``overlaps``.

Run: .venv/bin/python benchmarks/isolation_cost.py  (writes the isolation-cost section of
docs/benchmarks.md; about two minutes on two cores).
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from _markdown import machine_line, write_section
from scipy.stats import t as t_distribution

import tfcompress
from tfcompress._child import NO_ZYGOTE

ROUNDS = 9
BATCHES = (1, 8)
TIMING = {"runs": 100, "min_seconds": 0.5, "warmup_runs": 5, "warmup_seconds": 0.2}


def _artifacts(folder: Path) -> dict[str, Path]:
    from tfcompress.samples.cnn import small_cnn

    model = small_cnn(flavour="keras3")
    calibration = np.random.default_rng(0).random((64, 28, 28, 1), dtype=np.float32)
    result = tfcompress.quantize(model, recipe="int8", representative_data=calibration)
    paths = {"cnn_float32.tflite": folder / "float32.tflite", "cnn_int8.tflite": folder / "i8"}
    paths["cnn_float32.tflite"].write_bytes(result.reference_content)
    paths["cnn_int8.tflite"].write_bytes(result.model_content)
    return paths


def _run(paths: dict[str, Path], *, isolate: bool, zygote: bool = True) -> tuple[dict, float]:
    """One benchmark call; ``zygote=False``: its workers start as fresh interpreters."""
    start = time.perf_counter()
    with _environment(NO_ZYGOTE, None if zygote else "1"):
        result = tfcompress.benchmark(
            paths, batch_sizes=BATCHES, threads=(1,), isolate=isolate, **TIMING
        )
    wall = time.perf_counter() - start
    rows = {(r.artifact, r.batch): r for r in result.rows if r.ok}
    return rows, wall


@contextlib.contextmanager
def _environment(name: str, value: str | None) -> Iterator[None]:
    saved = os.environ.pop(name, None)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)
        if saved is not None:
            os.environ[name] = saved


def _interval(values: list[float], *, one_round: bool = False) -> tuple[float, float, float]:
    """Mean and its 95% t-interval; ``one_round``: where one more round's value would fall.

    The second (a prediction interval, mean +/- t * s * sqrt(1 + 1/n)) is the harness's own
    interval: how far the same measurement moves from one round to the next.
    """
    n = len(values)
    mean = statistics.fmean(values)
    spread = math.sqrt(1.0 + 1.0 / n) if one_round else math.sqrt(1.0 / n)
    half = t_distribution.ppf(0.975, n - 1) * statistics.stdev(values) * spread
    return mean, mean - half, mean + half


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        paths = _artifacts(Path(folder))
        _run(paths, isolate=False)  # warm this process's LiteRT and page cache once
        _, first_wall = _run(paths, isolate=True)  # starts this process's zygote
        worker: list[dict] = []
        local: list[dict] = []
        walls: dict[str, list[float]] = {"worker": [], "in-process": [], "fresh": []}
        for round_ in range(ROUNDS):
            order = (True, False) if round_ % 2 == 0 else (False, True)
            for isolate in order:
                rows, wall = _run(paths, isolate=isolate)
                (worker if isolate else local).append(rows)
                walls["worker" if isolate else "in-process"].append(wall)
            walls["fresh"].append(_run(paths, isolate=True, zygote=False)[1])
    lines = [
        "## Measuring in worker processes: what the isolation costs",
        "",
        "Each native runtime measures in a worker process of its own (a crash is an error row; "
        "a time limit stops a hang), forked on Linux from a zygote that imported the worker's "
        "modules once (`tfcompress/_child/zygote.py`). Script: `benchmarks/isolation_cost.py`.",
        "",
        f"Machine: {machine_line()}. LiteRT `cpu` backend, 1 thread, {ROUNDS} interleaved "
        f"rounds of `tfcompress.benchmark(..., isolate=True/False)` with runs="
        f"{TIMING['runs']}, min_seconds={TIMING['min_seconds']}. The harness's own interval "
        "is where one more in-process round's p50 would fall (95% prediction interval, "
        "relative to the mean); the shift is the mean ratio of p50s worker/in-process per "
        "round with its 95% confidence interval; `within` means that whole interval lies "
        "inside the harness's own one.",
        "",
        "| artifact | batch | p50 in-process (ms) | harness's own interval | p50 in a worker (ms) "
        "| shift worker/in-process (95% CI) | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    centres_inside = 0
    for key in sorted(local[0]):
        here = [rows[key].latency.p50 for rows in local]
        there = [rows[key].latency.p50 for rows in worker]
        mean_here, low_here, high_here = _interval(here, one_round=True)
        own = (low_here / mean_here - 1.0, high_here / mean_here - 1.0)
        logs = [math.log(b / a) for a, b in zip(here, there, strict=True)]
        shift, low, high = (math.exp(v) - 1.0 for v in _interval(logs))
        centres_inside += own[0] <= shift <= own[1]
        if own[0] <= low and high <= own[1]:
            verdict = "within"
        elif high < own[0] or low > own[1]:
            verdict = "outside"
        else:
            verdict = "overlaps"
        verdicts.append(verdict)
        lines.append(
            f"| {key[0]} | {key[1]} | {mean_here:.3f} | {own[0]:+.1%} to {own[1]:+.1%} "
            f"| {statistics.fmean(there):.3f} | {shift:+.1%} ({low:+.1%} to {high:+.1%}) "
            f"| {verdict} |"
        )
    runners = len(local[0]) // len(BATCHES)
    wall_worker, wall_local, wall_fresh = (
        statistics.median(walls[k]) for k in ("worker", "in-process", "fresh")
    )
    per_runner = (wall_worker - wall_local) / runners
    per_fresh = (wall_fresh - wall_local) / runners
    lines += [
        "",
        f"Wall time of one benchmark call ({runners} runners, {len(local[0])} rows), median "
        f"over the rounds: {wall_worker:.2f} s in workers, {wall_local:.2f} s in-process: "
        f"{per_runner * 1000:.0f} ms more per runner (forking its worker and loading the "
        f"model there). With `TFCOMPRESS_NO_ZYGOTE=1` (each worker a fresh interpreter, as "
        f"before the zygote), in the same rounds: {wall_fresh:.2f} s, "
        f"{per_fresh * 1000:.0f} ms more per runner. The first call in the process, which "
        f"starts the zygote, took {first_wall:.2f} s.",
        "",
        f"p50 shift verdicts: {verdicts.count('within')} of {len(verdicts)} rows within the "
        f"harness's own interval, {verdicts.count('overlaps')} overlapping it, "
        f"{verdicts.count('outside')} outside it; the measured shift itself lies inside the "
        f"harness's own interval in {centres_inside} of {len(verdicts)} rows.",
    ]
    path = write_section("isolation-cost", "\n".join(lines))
    print("\n".join(lines))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
