"""What measuring through a Dask worker changes: ``benchmark`` here vs ``benchmark --on``.

A scheduler starts on 127.0.0.1 with one worker of the device install (``.venv-device``,
``make device-install``; this interpreter's Dask when there is none, and the block says
which), so the "device" is this machine: any difference in the medians is the cost of the
remote path, not of another CPU. ``ROUNDS`` rounds, each a local run and a run through the
worker of the same two files (an untrained MNIST-sized CNN as float32 and int8
``.tflite``), in alternating order. The block reports, per artifact:

* the median latency (p50) of each run, and whether each remote median lies in the local
  run's interval (mean +- std, the harness's interval of a row) and the other way round;
* how far the local medians of different rounds (different worker processes) spread, for
  scale;
* the wall time of a whole ``benchmark`` call, local and through the worker (connecting,
  sending the artifacts and data, the device describing itself, the round trips).

Run: .venv/bin/python benchmarks/remote_overhead.py  (writes the remote-overhead section of
docs/benchmarks.md and benchmarks/results/remote_overhead.json; a minute or two; with
``--render``, only the section again from that JSON).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _markdown import machine_line, write_section

ROUNDS = 5
RUNS, MIN_SECONDS = 200, 1.0
ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "remote_overhead.json"


def build(folder: Path) -> list[str]:
    import keras

    import tfcompress
    from tfcompress.samples.cnn import small_cnn

    keras.utils.set_random_seed(0)
    model = small_cnn()
    calibration = np.random.default_rng(0).random((64, 28, 28, 1), dtype=np.float32)
    paths = [folder / "cnn_float32.tflite", folder / "cnn_int8.tflite"]
    tfcompress.quantize(model, recipe="float32").save(paths[0])
    tfcompress.quantize(model, recipe="int8", representative_data=calibration).save(paths[1])
    return [str(p) for p in paths]


def start_cluster(logs: Path) -> tuple[str, list[subprocess.Popen], str]:
    device = ROOT / ".venv-device" / "bin"
    bin_dir = device if (device / "dask").exists() else Path(sys.executable).parent
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    processes = []
    for name, argv in (
        ("scheduler", ["scheduler", "--host", "127.0.0.1", "--port", str(port)]),
        ("worker", ["worker", address, "--name", "loopback", "--nthreads", "1"]),
    ):
        with open(logs / f"{name}.log", "wb") as log:
            command = [str(bin_dir / "dask"), *argv, "--no-dashboard"]
            processes.append(subprocess.Popen(command, stdout=log, stderr=log))
        time.sleep(3 if name == "scheduler" else 0)
    from distributed import Client

    with Client(address, timeout="60s", set_as_default=False) as client:
        client.wait_for_workers(1, timeout=120)
    return address, processes, str(bin_dir / "python")


def one_run(paths: list[str], on: str | None) -> tuple[dict[str, dict[str, float]], float]:
    import tfcompress

    start = time.perf_counter()
    result = tfcompress.benchmark(paths, runs=RUNS, min_seconds=MIN_SECONDS, on=on)
    wall = time.perf_counter() - start
    rows = {
        row.artifact: {
            "p50": row.latency.p50,
            "mean": row.latency.mean,
            "std": row.latency.std,
            "runs": row.latency.runs,
        }
        for row in result.rows
        if row.ok and row.latency is not None
    }
    return rows, wall


def main() -> None:
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="tfc-remote-") as folder:
        paths = build(Path(folder))
        address, processes, worker_python = start_cluster(Path(folder))
        rounds = []
        try:
            one_run(paths, None)  # the first run of a process pays its imports: not timed
            one_run(paths, address)
            for number in range(ROUNDS):
                order = ("local", "remote") if number % 2 == 0 else ("remote", "local")
                measured = {}
                for where in order:
                    rows, wall = one_run(paths, address if where == "remote" else None)
                    measured[where] = {"rows": rows, "wall_s": wall}
                rounds.append(measured)
        finally:
            for process in reversed(processes):
                process.terminate()
                process.wait(timeout=30)
    load_after = os.getloadavg()
    record = {
        "machine": machine_line(),
        "worker_python": worker_python,
        "device_install": ".venv-device" in worker_python,
        "rounds": rounds,
        "runs": RUNS,
        "min_seconds": MIN_SECONDS,
        "load_average_1min": [load_before[0], load_after[0]],
        "dask": _version("distributed"),
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(record, indent=1) + "\n")
    write_section("remote-overhead", render(record, [Path(p).name for p in paths]))
    print(render(record, [Path(p).name for p in paths]))


def render(record: dict, names: list[str]) -> str:
    rounds = record["rounds"]
    lines = [
        "## Measuring through a Dask worker",
        "",
        f"Measured by `benchmarks/remote_overhead.py` on {record['machine']}: a scheduler on "
        f"127.0.0.1 and one worker ({'the device install, ' if record['device_install'] else ''}"
        f"`{Path(record['worker_python']).parent.parent.name}`, one thread) on the same machine, "
        f"so the device is this CPU. {len(rounds)} rounds, each a local `benchmark` and one "
        f"with `--on`, in alternating order, of the same two files (at least {record['runs']} "
        f"runs and {record['min_seconds']:g} s per row, 1 thread, batch 1); load average "
        f"{record['load_average_1min'][0]:.2f} before, {record['load_average_1min'][1]:.2f} "
        "after. A remote median agrees with the local one when each lies in the other run's "
        "interval (mean +- std, the harness's interval of a row).",
        "",
        "| artifact | round | local p50 ms | remote p50 ms | difference | local mean +- std | "
        "remote mean +- std | agree |",
        "|---|---|---|---|---|---|---|---|",
    ]
    agreed = total = 0
    for name in names:
        for number, measured in enumerate(rounds, 1):
            here, there = measured["local"]["rows"][name], measured["remote"]["rows"][name]
            ok = _within(here, there["p50"]) and _within(there, here["p50"])
            agreed, total = agreed + ok, total + 1
            lines.append(
                f"| {name} | {number} | {here['p50']:.4f} | {there['p50']:.4f} | "
                f"{(there['p50'] / here['p50'] - 1) * 100:+.2f}% | "
                f"{here['mean']:.4f} +- {here['std']:.4f} | "
                f"{there['mean']:.4f} +- {there['std']:.4f} | {'yes' if ok else 'no'} |"
            )
    lower = sum(
        m["remote"]["rows"][name]["p50"] < m["local"]["rows"][name]["p50"]
        for name in names
        for m in rounds
    )
    lines += [
        "",
        f"The medians agreed in {agreed} of {total} comparisons; the remote median was the "
        f"lower one in {lower} of {total}.",
    ]
    for name in names:
        local = [m["local"]["rows"][name]["p50"] for m in rounds]
        remote = [m["remote"]["rows"][name]["p50"] for m in rounds]
        spread = (max(local) - min(local)) / statistics.median(local) * 100
        shift = (statistics.median(remote) / statistics.median(local) - 1) * 100
        lines.append(
            f"{name}: the median of the remote medians is {shift:+.2f}% from the median of the "
            f"local ones; the local medians of the {len(local)} rounds (each its own worker "
            f"process) spread over {spread:.2f}% of their median."
        )
    local_wall = [m["local"]["wall_s"] for m in rounds]
    remote_wall = [m["remote"]["wall_s"] for m in rounds]
    lines += [
        "",
        f"Wall time of one `benchmark` call of both files: {statistics.median(local_wall):.2f} s "
        f"here, {statistics.median(remote_wall):.2f} s through the worker (medians of "
        f"{len(rounds)} rounds): the remote path adds "
        f"{statistics.median(remote_wall) - statistics.median(local_wall):+.2f} s per call "
        "(connecting, sending the files and data once, the device describing itself, one "
        "round trip per row), none of it inside a timed run.",
    ]
    return "\n".join(lines)


def _within(stats: dict[str, float], value: float) -> bool:
    return stats["mean"] - stats["std"] <= value <= stats["mean"] + stats["std"]


def _version(name: str) -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "missing"


if __name__ == "__main__":
    if sys.argv[1:] == ["--render"]:  # the section again from the last results, no new run
        saved = json.loads(RESULTS.read_text())
        names = list(saved["rounds"][0]["local"]["rows"])
        write_section("remote-overhead", render(saved, names))
    else:
        main()
