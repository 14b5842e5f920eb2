"""What TensorFlow in the caller and in the converter's child costs a command (issue 40).

``quantize MODEL.keras`` and ``compress MODEL.keras`` run the converter (and compress the
Keras reference too) in the converter's child: the caller checks the file as bytes and
never imports TensorFlow. This script runs both commands on the files ``tfcompress demo
--quick`` writes (the MNIST CNN, 500 calibration digits), three ways, interleaved:

* ``before``: the ``tfcompress`` package of another checkout (``--before DIR``, a folder
  holding it, e.g. ``git archive 8fb6a85 tfcompress | tar -x -C DIR``);
* ``after``: this checkout, the default (children);
* ``in process``: this checkout with ``TFCOMPRESS_IN_PROCESS=1`` (TensorFlow once, here).

CPU is user + system seconds of the command and of every process it started: this script is
their child subreaper (Linux), so orphans are reaped and counted too. Each tree's bytecode is
compiled before the first timed round (a user's install has it). The machine is shared: the
load average is stated with the medians.

Run: .venv/bin/python benchmarks/tf_once.py [--before DIR] [--rounds 3]  (writes the tf_once
section of docs/benchmarks.md; about ten minutes on two cores).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _markdown import machine_line, write_section

HERE = Path(__file__).resolve().parent.parent
COMMANDS = {
    "quantize": "quantize model.keras --recipe int8 --data calib.npz --out q.tflite --force",
    "compress": "compress model.keras --data calib.npz --eval test.npz --max-drop 0.01 "
    "--out c.tflite --force",
}


def _run(tree: Path, command: str, folder: Path, in_process: bool) -> tuple[float, float]:
    """Wall and CPU seconds (with every descendant) of one command."""
    drop = ("PYTHONDONTWRITEBYTECODE", "TFCOMPRESS_IN_PROCESS")  # bytecode as users have it
    env = {k: v for k, v in os.environ.items() if k not in drop} | {"PYTHONPATH": str(tree)}
    if in_process:
        env["TFCOMPRESS_IN_PROCESS"] = "1"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    argv = [sys.executable, "-m", "tfcompress", *command.split()]
    done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    _reap_orphans()
    if done.returncode != 0:
        raise SystemExit(f"{tree} {command}: exit {done.returncode}\n{done.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _reap_orphans(seconds: float = 30.0) -> None:
    """Wait for what the command left (children die with it): their CPU counts too."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.05)


def _subreaper() -> None:
    with_libc = ctypes.CDLL(None, use_errno=True)
    with_libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a folder holding another tfcompress")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    _subreaper()
    started = time.perf_counter()
    arms = [("after", HERE, False), ("in process", HERE, True)]
    if args.before is not None:
        arms.insert(0, ("before", args.before.resolve(), False))
    with tempfile.TemporaryDirectory(prefix="tf-once-") as name:
        folder = Path(name)
        demo = [sys.executable, "-m", "tfcompress", "demo", "--quick", "--out-dir", name]
        subprocess.run(demo, env={**os.environ, "PYTHONPATH": str(HERE)}, check=True,
                       capture_output=True)  # fmt: skip
        for _, tree, in_process in arms:  # bytecode compiled, untimed
            for command in COMMANDS.values():
                _run(tree, command, folder, in_process)
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        made: dict[str, set[bytes]] = {verb: set() for verb in COMMANDS}
        loads = [os.getloadavg()[0]]
        for round_ in range(args.rounds):
            order = arms[round_ % len(arms) :] + arms[: round_ % len(arms)]
            for verb, command in COMMANDS.items():
                for arm, tree, in_process in order:
                    timing = _run(tree, command, folder, in_process)
                    times.setdefault((verb, arm), []).append(timing)
                    made[verb].add((folder / f"{verb[0]}.tflite").read_bytes())
            loads.append(os.getloadavg()[0])
    # Two cores: a load above 1.5 means another job shared them with the timed command.
    shared = "; the machine was shared" if max(loads) > 1.5 else "; no other job ran"
    lines = [
        f"Measured by `benchmarks/tf_once.py` on {machine_line()} in "
        f"{time.perf_counter() - started:.0f}s, load average {min(loads):.1f}-{max(loads):.1f} "
        f"(1 minute, between rounds{shared}): `python -m tfcompress ...` on "
        f"the files `demo --quick` writes, {args.rounds} interleaved rounds, medians (min-max). "
        "CPU: user + system seconds of the command and every process it started.",
        "",
        "command   arm          wall                 CPU                 CPU / in process",
        "--------  -----------  -------------------  ------------------  ----------------",
    ]
    ratios: dict[tuple[str, str], float] = {}
    wall_ratios: dict[tuple[str, str], float] = {}
    for verb in COMMANDS:
        base = statistics.median(c for _, c in times[(verb, "in process")])
        wall_base = statistics.median(w for w, _ in times[(verb, "in process")])
        for arm, _, _ in arms:
            walls = [w for w, _ in times[(verb, arm)]]
            cpus = [c for _, c in times[(verb, arm)]]
            ratios[(verb, arm)] = statistics.median(cpus) / base
            wall_ratios[(verb, arm)] = statistics.median(walls) / wall_base
            lines.append(
                f"{verb:<8}  {arm:<11}  {_spread(walls):<19}  {_spread(cpus):<18}  "
                f"{ratios[(verb, arm)]:.2f}x"
            )
    lines.append("")
    for verb in COMMANDS:
        said = (
            f"* `{verb}`: {ratios[(verb, 'after')]:.2f}x the in-process run's CPU seconds and "
            f"{wall_ratios[(verb, 'after')]:.2f}x its wall time"
        )
        if (verb, "before") in ratios:
            said += (
                f", was {ratios[(verb, 'before')]:.2f}x and {wall_ratios[(verb, 'before')]:.2f}x"
            )
        lines.append(said + " (goal: 1.1x).")
    same = all(len(files) == 1 for files in made.values())
    lines.append(
        "* The files made are byte for byte the same in every arm and round."
        if same
        else "* The files made are not all the same: "
        + ", ".join(
            f"{verb} made {len(files)} different files" if len(files) > 1 else f"{verb} one"
            for verb, files in made.items()
        )
        + " (compress's choice can follow its latency timings)."
    )
    path = write_section("tf_once", "\n".join(lines))
    print("\n".join(lines))
    print(f"wrote {path}")


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f}s ({min(values):.1f}-{max(values):.1f})"


if __name__ == "__main__":
    main()
