"""What `quantize --methods auto` costs against plain int8: wall time and peak memory.

Run: .venv/bin/python benchmarks/auto_cost.py --label after [--tree DIR] [--samples 64]
     (each label's measurements go to benchmarks/results/auto_cost_LABEL.json; the
     `auto_cost` section of docs/benchmarks.md shows every label measured)

Two models built in code (random weights: the cost does not depend on training):

* a basic-pitch-shaped SavedModel: a CQT-like (172, 264, 1) input, its harmonics stacked
  into 8 channels, then the contour, note and onset heads of basic-pitch (5x5 and 3x39
  convolutions over 172 x 264 positions; three outputs);
* a mini-Xception-shaped emotion classifier (48 x 48 grey, separable residual blocks,
  seven classes), as a .keras file.

Each runs as the CLI runs it, in a fresh process: `quantize M --data calib.npz --out F`
(plain int8), then the same with `--methods auto --json` (scored on the calibration
samples). Wall time is the whole command's; CPU time is its processes' user and system
seconds (steadier than wall time on a shared machine); peak memory is the largest sum of the
resident memory of the command and its child processes, sampled every 50 ms; the load is
the machine's one-minute load average around the command. `--tree DIR` runs the
tfcompress found in DIR (an export of an older commit: the "before" figures).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from _markdown import machine_line, write_section

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
HARMONICS = (0, 12, 19, 24, 28, 31, 34, 36)  # bins of harmonics 1..8 at 12 bins per octave


def basic_pitch_like() -> Any:
    """Basic-pitch's shape: harmonic stacking, then contour, note and onset heads."""
    import keras
    from keras import layers

    keras.utils.set_random_seed(0)
    cqt = keras.Input((172, 264, 1), name="cqt")
    shifted = []
    for shift in HARMONICS:  # the CQT moved down by each harmonic's bins, zero filled
        h = layers.Cropping2D(((0, 0), (shift, 0)))(cqt) if shift else cqt
        shifted.append(layers.ZeroPadding2D(((0, 0), (0, shift)))(h) if shift else h)
    stacked = layers.BatchNormalization()(layers.Concatenate()(shifted))
    c = layers.ReLU()(layers.BatchNormalization()(layers.Conv2D(32, 5, padding="same")(stacked)))
    c = layers.ReLU()(layers.BatchNormalization()(layers.Conv2D(8, (3, 39), padding="same")(c)))
    contour = layers.Conv2D(1, 5, padding="same", activation="sigmoid", name="contour")(c)
    n = layers.Conv2D(32, 7, strides=(1, 3), padding="same", activation="relu")(contour)
    note = layers.Conv2D(1, (7, 3), padding="same", activation="sigmoid", name="note")(n)
    o = layers.Conv2D(32, 5, strides=(1, 3), padding="same")(stacked)
    o = layers.ReLU()(layers.BatchNormalization()(o))
    o = layers.Concatenate()([o, note])
    onset = layers.Conv2D(1, 3, padding="same", activation="sigmoid", name="onset")(o)
    return keras.Model(cqt, [note, onset, contour])


def mini_xception() -> Any:
    """The mini-Xception emotion classifier's shape (Arriaga et al.), 48 x 48 grey in."""
    import keras
    from keras import layers

    keras.utils.set_random_seed(0)
    inputs = keras.Input((48, 48, 1), name="face")
    x = inputs
    for _ in range(2):
        x = layers.ReLU()(layers.BatchNormalization()(layers.Conv2D(8, 3, use_bias=False)(x)))
    for filters in (16, 32, 64, 128):
        residual = layers.Conv2D(filters, 1, strides=2, padding="same", use_bias=False)(x)
        residual = layers.BatchNormalization()(residual)
        x = layers.SeparableConv2D(filters, 3, padding="same", use_bias=False)(x)
        x = layers.ReLU()(layers.BatchNormalization()(x))
        x = layers.SeparableConv2D(filters, 3, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization()(x)
        x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
        x = layers.Add()([x, residual])
    x = layers.GlobalAveragePooling2D()(layers.Conv2D(7, 3, padding="same")(x))
    return keras.Model(inputs, layers.Softmax(name="emotion")(x))


def build(work: Path, samples: int) -> dict[str, tuple[Path, Path]]:
    """Each model's file and calibration samples, made once in ``work``."""
    made = {}
    rng = np.random.default_rng(0)
    for name, builder, shape in (
        ("basic-pitch-shaped SavedModel", basic_pitch_like, (172, 264, 1)),
        ("mini-Xception-shaped .keras", mini_xception, (48, 48, 1)),
    ):
        stem = name.split()[0]
        path = work / (f"{stem}_savedmodel" if "SavedModel" in name else f"{stem}.keras")
        calib = work / f"{stem}_calib.npz"
        if not path.exists():
            model = builder()
            if path.suffix == ".keras":
                model.save(path)
            else:
                model.export(str(path), verbose=False)
        if not calib.exists():
            np.savez(calib, x=rng.random((samples, *shape), dtype=np.float32))
        made[name] = (path, calib)
    return made


def measured(argv: list[str], tree: Path, work: Path) -> dict[str, Any]:
    """One CLI run in a fresh process: its wall time, peak memory (process tree) and JSON."""
    import psutil

    env = {**os.environ, "PYTHONPATH": str(tree), "TF_CPP_MIN_LOG_LEVEL": "3"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "tfcompress", *argv],
        env=env,
        cwd=work,  # not the checkout: `-m` imports from the working directory first
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak, parent = 0, psutil.Process(process.pid)
    while process.poll() is None:
        try:
            tree_rss = parent.memory_info().rss + sum(
                c.memory_info().rss for c in parent.children(recursive=True)
            )
        except psutil.Error:  # a child ended between the listing and the reading
            tree_rss = 0
        peak = max(peak, tree_rss)
        time.sleep(0.05)
    out, err = process.communicate()
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    row: dict[str, Any] = {"seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1)}
    row["peak_bytes"], row["load"] = peak, round((load + os.getloadavg()[0]) / 2, 1)
    row["exit"] = process.returncode
    if process.returncode not in (0, 1):
        row["error"] = (err.strip().splitlines() or ["?"])[-1][:300]
    try:
        row["report"] = json.loads(out) if out.strip() else None
    except json.JSONDecodeError:
        row["report"] = None
    return row


def run(label: str, tree: Path, work: Path, samples: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    where = subprocess.run(
        [sys.executable, "-c", "import tfcompress; print(tfcompress.__file__)"],
        env=env, cwd=work, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    if not where.startswith(str(tree)):
        raise SystemExit(f"the commands would import {where}, not the tree {tree}")
    rows = {}
    for name, (path, calib) in build(work, samples).items():
        base = ["quantize", str(path), "--data", str(calib), "--force", "--json"]
        plain = measured([*base, "--out", str(work / "plain.tflite")], tree, work)
        auto = measured(
            [*base, "--methods", "auto", "--out", str(work / "auto.tflite")], tree, work
        )
        methods = (auto.get("report") or {}).get("methods") or {}
        rows[name] = {
            "plain": {k: v for k, v in plain.items() if k != "report"},
            "auto": {k: v for k, v in auto.items() if k != "report"},
            "tried": ["+".join(c["methods"]) for c in methods.get("candidates", [])],
            "skipped": [s["methods"] for s in methods.get("skipped", [])],
            "kept": "+".join(methods.get("kept", [])) or "plain int8",
        }
        print(name, json.dumps(rows[name]), flush=True)
    return {"label": label, "machine": machine_line(), "samples": samples, "models": rows}


def section() -> str:
    """The Markdown of every label measured so far."""
    from tfcompress.report.table import format_table

    found = sorted(RESULTS.glob("auto_cost_*.json"))
    runs = [json.loads(p.read_text()) for p in found]
    runs.sort(key=lambda r: {"before": 0, "bounded": 1}.get(r["label"], 2))
    lines = [
        "## `quantize --methods auto`: its cost against plain int8",
        "",
        "Made by `benchmarks/auto_cost.py` (issue 39): each command in a fresh process, as the "
        "CLI runs it, plain int8 (`quantize M --data calib.npz`) then `--methods auto` (scored "
        "on the calibration samples). CPU: the user and system seconds of the command and the "
        "processes it waited for; peak: the largest resident memory of the command's process "
        "tree, sampled every 50 ms; load: the machine's one-minute load average around each "
        "command (this machine is shared: wall times move with it, CPU seconds less).",
        "",
    ]
    rows, notes = [], []
    for measured_run in runs:
        label = measured_run["label"]
        for name, row in measured_run["models"].items():
            plain, auto = row["plain"], row["auto"]
            shown = []
            for key, unit in (("seconds", "s"), ("cpu_seconds", "s CPU")):
                ratio = auto[key] / plain[key] if plain[key] else float("nan")
                shown.append(f"{auto[key]:.1f} {unit} ({ratio:.2f}x)")
            rows.append(
                [
                    label,
                    name,
                    f"{plain['seconds']:.1f} s, {plain['cpu_seconds']:.1f} s CPU",
                    "; ".join(shown) + (f"; exit {auto['exit']}" if auto.get("error") else ""),
                    f"{plain['peak_bytes'] / 2**30:.2f} GiB",
                    f"{auto['peak_bytes'] / 2**30:.2f} GiB",
                    f"{plain['load']:.1f} / {auto['load']:.1f}",
                ]
            )
            made = ", ".join(row["tried"]) or "none"
            skipped = ", ".join(row["skipped"]) or "none"
            note = f"- `{label}`, {name}: auto made {made}; skipped {skipped}; kept {row['kept']}"
            notes.append(note + (f"; {auto['error']}" if auto.get("error") else "") + ".")
    headers = ["code", "model", "plain int8", "auto (x plain int8)", "plain peak", "auto peak"]
    lines += [format_table([*headers, "load"], rows), "", *notes, ""]
    for measured_run in runs:
        what = measured_run.get("describe") or "the code measured"
        if lines[-1]:
            lines.append("")
        lines.append(
            f"`{measured_run['label']}`: {what}; {measured_run['samples']} calibration samples; "
            f"{measured_run['machine']}."
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="after", help="name of this code's measurements")
    parser.add_argument("--tree", type=Path, default=ROOT, help="where tfcompress is imported")
    parser.add_argument("--samples", type=int, default=64, help="calibration samples")
    parser.add_argument("--work", type=Path, default=Path("/tmp/tfcompress_auto_cost"))
    parser.add_argument("--describe", default="", help="what code this label measured")
    parser.add_argument("--write-only", action="store_true", help="only rewrite the section")
    args = parser.parse_args()
    if not args.write_only:
        args.work.mkdir(parents=True, exist_ok=True)
        result = run(args.label, args.tree.resolve(), args.work, args.samples)
        result["describe"] = args.describe
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"auto_cost_{args.label}.json").write_text(json.dumps(result, indent=1))
    print(write_section("auto_cost", section()))


if __name__ == "__main__":
    main()
