"""Issue 39's goals on the real third-party files, measured with the CLI as a user would.

Run: .venv/bin/python benchmarks/real_files.py [--dir DIR] [--render]
(writes the ``real-files`` section of docs/benchmarks.md; the raw record goes to
benchmarks/results/real_files.json; --render writes the section again from it)

The files (``--dir``, else ``$TFCOMPRESS_REAL_FILES``, else /work/real), none shipped here:

* ``fer2013_mini_XCEPTION.102-0.66.hdf5``: the mini-Xception emotion classifier (tf-keras
  HDF5, 64x64x1 gray in [-1, 1], 7 classes), github.com/oarriaga/face_classification
  ``trained_models/emotion_models/``; ``emotion_calib.npz`` and ``emotion_test.npz``: face
  crops as its demo makes them (MTCNN face boxes, gray, resized to 64x64,
  ``preprocess_input(x, v2=True)``);
* ``onet.keras`` (else built here from ``onet.lz4``, github.com/ipazc/mtcnn
  ``mtcnn/assets/weights/onet.lz4``: joblib and lz4 needed): MTCNN's O-Net as a functional
  Keras model, layers named as in the repo's ``mtcnn/network/onet.py``; ``onet_calib.npz``
  and ``onet_test.npz``: 48x48 RGB patches of the boxes stage 3 gets, normalised as the repo
  does ((x - 127.5) / 128).

The four .npz files are made by benchmarks/real_files_data.py from five face photos (the
repos' example photos): calibration and held-out samples come from different photos
(different faces); each set is augmented (shift, scale, flip, brightness). For each model,
each command in its own process: ``quantize`` float32, int8, float16, ``--methods per-op``,
``--methods auto``, ``--methods equalize``, and ``compress`` with the issue's gates (emotion:
``--min-agreement 0.97``; O-Net: default settings and ``--min-snr 24``). Then every file is
timed back to back by ``benchmark`` (LiteRT CPU, 1 thread) and scored against the float32
file on the held-out samples (each output's SNR; top-1 agreement of class outputs); the ops
that stayed float are read from each file. Every sentence of the section is computed from
these runs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from _markdown import machine_line, write_section

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "real_files.json"
EMOTION = "fer2013_mini_XCEPTION.102-0.66.hdf5"
WHERE = {
    EMOTION: "github.com/oarriaga/face_classification trained_models/emotion_models/" + EMOTION,
    "onet.lz4": "github.com/ipazc/mtcnn mtcnn/assets/weights/onet.lz4",
}
MAX_SIZE, MIN_AGREEMENT, BOX_DB = 0.45, 0.97, 24.0  # issue 39's goals
METHODS = ("per-op", "auto", "equalize")  # each a quantize --methods row


def _files(folder: Path) -> dict[str, Path]:
    """The models and data files, or one line that says where to get what is missing."""
    names = [EMOTION, "emotion_calib.npz", "emotion_test.npz", "onet_calib.npz", "onet_test.npz"]
    onet = "onet.keras" if (folder / "onet.keras").exists() else "onet.lz4"
    missing = [n for n in [*names, onet] if not (folder / n).exists()]
    if missing:
        sys.exit(
            f"missing in {folder}: "
            + "; ".join(f"{n} (from {WHERE[n]})" if n in WHERE else n for n in missing)
            + " (the .npz files: benchmarks/real_files_data.py makes them); pass --dir DIR"
        )
    return {n: folder / n for n in [*names, onet]}


def _onet_keras(weights: Path, out: Path) -> Path:
    """MTCNN's O-Net (github.com/ipazc/mtcnn mtcnn/network/onet.py) as a functional model."""
    import joblib
    import keras

    layers = keras.layers
    x = inputs = keras.Input((48, 48, 3), name="input")
    for i, (filters, kernel, pool) in enumerate(
        [(32, 3, (3, "same")), (64, 3, (3, "valid")), (64, 3, (2, "same")), (128, 2, None)], 1
    ):
        x = layers.Conv2D(filters, kernel, name=f"conv{i}")(x)
        x = layers.PReLU(shared_axes=[1, 2], name=f"prelu{i}")(x)
        if pool is not None:
            x = layers.MaxPooling2D(pool[0], 2, padding=pool[1], name=f"maxpooling{i}")(x)
    x = layers.Flatten(name="flatten4")(layers.Permute((2, 1, 3), name="permute")(x))
    x = layers.PReLU(name="prelu5")(layers.Dense(256, name="fc5")(x))
    heads = [layers.Dense(4, name="fc6-1")(x), layers.Dense(10, name="fc6-2")(x),
             layers.Dense(2, activation="softmax", name="fc6-3")(x)]  # fmt: skip
    model = keras.Model(inputs, heads, name="onet")
    model.set_weights(joblib.load(weights))  # the repo's ONet order: layer by layer
    model.save(out)
    return out


def _run(argv: list[str]) -> dict[str, Any]:
    """One CLI command in its own process: its JSON, wall and CPU seconds, load around it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before, load = resource.getrusage(resource.RUSAGE_CHILDREN), os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "tfcompress", *argv, "--json"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        sys.exit(f"tfcompress {' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
    return {
        "argv": argv,
        "rc": done.returncode,
        "json": json.loads(done.stdout),
        "wall_s": round(time.perf_counter() - start, 1),
        "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
        "load": round((load + os.getloadavg()[0]) / 2, 2),
    }


def _scores(reference: bytes, contents: list[bytes], x: np.ndarray) -> list[dict[str, Any]]:
    """Each file's outputs against float32: SNR (dB) and, for class outputs, agreement."""
    from tfcompress.data import Dataset
    from tfcompress.quantization.methods.selection import score

    return [
        {
            f.output: {"snr_db": round(float(f.snr_db), 2)}
            | ({} if f.agreement is None else {"agreement": round(float(f.agreement), 4)})
            for f in fidelity
        }
        for fidelity, _ in score(reference, contents, Dataset(x), source="float32")
    ]


def one_model(title: str, model: Path, calib: Path, test: Path, gates: list[list[str]]) -> dict:
    """The commands of the module docstring on one model, then its files timed and scored."""
    from collections import Counter

    from tfcompress.quantization.float_ops import find_float_ops

    out = Path(tempfile.mkdtemp(prefix="real_files_"))
    data, held = ["--data", str(calib)], ["--eval", str(test)]
    commands: list[tuple[str, list[str]]] = [
        (name, ["quantize", str(model), "--recipe", name, *(data if name == "int8" else [])])
        for name in ("float32", "int8", "float16")
    ]
    commands += [(f"quantize --methods {m}", ["quantize", str(model), "--methods", m, *data,
                                              *held]) for m in METHODS]  # fmt: skip
    commands += [("compress " + (" ".join(g) or "(default gate)"),
                  ["compress", str(model), *data, *held, *g]) for g in gates]  # fmt: skip
    rows = []
    for i, (variant, argv) in enumerate(commands):
        path = out / f"{i}.tflite"
        ran = _run([*argv, "--out", str(path), "--force"])
        print(f"{title}: {variant} in {ran['wall_s']} s (CPU {ran['cpu_s']} s)", file=sys.stderr)
        record = ran.pop("json")
        kept = (record.get("methods") or {}).get("kept")
        chosen = record.get("chosen") or {}
        rows.append({
            "variant": variant, **ran, "path": str(path),
            "holds": chosen.get("name") or (" + ".join(kept or ["plain int8"]) if
                                            kept is not None else None),
            "passed": record.get("passed") if variant.startswith("compress") else None,
            "reason": (record.get("methods") or {}).get("reason") or chosen.get("why"),
            "attempts": [f"{a['name']} {a['status']}" for a in record.get("attempts", ())],
        })  # fmt: skip
    bench = _run(["benchmark", *(r["path"] for r in rows), "--threads", "1"])
    timed = {Path(r["artifact"]).name: r["latency_ms"] for r in bench["json"]["rows"]}
    contents = [Path(r["path"]).read_bytes() for r in rows]
    scores = _scores(contents[0], contents, np.load(test)["x"])
    for row, content, score in zip(rows, contents, scores, strict=True):
        latency = timed.get(Path(row["path"]).name) or {}
        row.update(
            size_bytes=len(content), scores=score, p50_ms=latency.get("p50"),
            min_ms=latency.get("min"), float_ops=dict(Counter(find_float_ops(content))),
        )  # fmt: skip
    return {"model": title, "rows": rows, "benchmark_load": bench["load"]}


def measure(folder: Path) -> dict[str, Any]:
    files = _files(folder)  # before TensorFlow: a missing file is one line, at once
    import tensorflow as tf

    start = time.perf_counter()
    onet = files.get("onet.keras") or _onet_keras(
        files["onet.lz4"], Path(tempfile.mkdtemp()) / "onet.keras"
    )
    models = [
        one_model("mini-Xception emotion classifier (oarriaga/face_classification), 64x64x1",
                  files[EMOTION], files["emotion_calib.npz"], files["emotion_test.npz"],
                  [["--min-agreement", str(MIN_AGREEMENT)]]),
        one_model("MTCNN O-Net (ipazc/mtcnn), 48x48x3", onet, files["onet_calib.npz"],
                  files["onet_test.npz"], [[], ["--min-snr", f"{BOX_DB:g}"]]),
    ]  # fmt: skip
    samples = {n: len(np.load(files[n])["x"]) for n in files if n.endswith(".npz")}
    return {
        "machine": machine_line(),
        "tensorflow": tf.__version__,
        "samples": samples,
        "models": models,
        "seconds": round(time.perf_counter() - start, 1),
    }


def _weakest(scores: dict[str, dict[str, float]]) -> tuple[str, float]:
    name = min(scores, key=lambda n: scores[n]["snr_db"])
    return name, scores[name]["snr_db"]


def _agreement(scores: dict[str, dict[str, float]]) -> float | None:
    found = [s["agreement"] for s in scores.values() if "agreement" in s]
    return min(found) if found else None


def _latency(row: dict[str, Any]) -> Any:
    from tfcompress.quantization.methods.slow_ops import Latency

    return Latency(row["p50_ms"], row["p50_ms"] - row["min_ms"])


def render(record: dict[str, Any]) -> str:
    from tfcompress.report.table import format_table

    counts = ", ".join(f"{n} {c}" for n, c in record["samples"].items())
    lines = [
        f"Measured on {record['machine']}, TensorFlow {record['tensorflow']}; "
        f"`benchmarks/real_files.py`, {record['seconds']:.0f} s in all. The files are the "
        "published ones (oarriaga/face_classification's emotion classifier, ipazc/mtcnn's "
        "O-Net weights); samples (`benchmarks/real_files_data.py`): faces in five photos found "
        "by ipazc/mtcnn, calibration and "
        f"held-out from different photos, augmented ({counts}). Each command ran in its own "
        "process: wall s (CPU s of it and its children; one-minute load average around it). "
        "Latency: `benchmark`, LiteRT CPU, 1 thread, median per sample, every file of a model "
        "back to back. Scores: each output against the float32 file on the held-out samples "
        "(SNR; top-1 agreement of class outputs).",
        "",
    ]
    for model in record["models"]:
        rows = model["rows"]
        base = rows[0]
        lines += [f"**{model['model']}** (timed at load {model['benchmark_load']:.1f})", ""]
        table = []
        for row in rows:
            name, snr = _weakest(row["scores"])
            agreement = _agreement(row["scores"])
            weakest = f"{name} {snr:.1f} dB" + (
                "" if agreement is None else f", {agreement:.1%} top-1"
            )
            weakest = "reference" if row is base else weakest
            ops = ", ".join(f"{c} {op}" for op, c in row["float_ops"].items()) or "-"
            ops = "all" if row["float_ops"] == base["float_ops"] else ops
            table.append([
                row["variant"], row["holds"] or "-", f"{row['size_bytes']:,}",
                f"{row['size_bytes'] / base['size_bytes']:.3f}x", f"{row['p50_ms']:.4f}",
                f"{row['p50_ms'] / base['p50_ms']:.2f}x", weakest, ops,
                f"{row['wall_s']:.0f} ({row['cpu_s']:.0f}, {row['load']:.1f})",
            ])  # fmt: skip
        lines.append(format_table(
            ["command", "file holds", "size B", "x float32", "ms/sample", "x float32",
             "weakest output", "stayed float", "wall s (CPU s, load)"], table, markdown=True,
        ))  # fmt: skip
        lines += ["", *_sentences(rows), ""]
    return "\n".join(lines)


def _sentences(rows: list[dict[str, Any]]) -> list[str]:
    from tfcompress.quantization.methods.slow_ops import too_slow

    base = rows[0]
    out = []
    for row in rows[1:]:
        if row["reason"] and row["variant"].startswith(("quantize --methods", "compress")):
            tried = "; attempts: " + ", ".join(row["attempts"]) if row.get("attempts") else ""
            line = f"- {row['variant']}: {row['reason']}{tried}"
            out.append(line if line.endswith(".") else f"{line}.")
    for row in rows:
        if "--min-agreement" in row["variant"]:
            agreement, size = _agreement(row["scores"]), row["size_bytes"] / base["size_bytes"]
            slower = too_slow(_latency(row), _latency(base), 1.0)
            met = size <= MAX_SIZE and (agreement or 0) >= MIN_AGREEMENT and not slower
            out.append(
                f"- emotion-classifier goal (at most {MAX_SIZE}x float32, at least "
                f"{MIN_AGREEMENT:.0%} agreement, not slower), {row['variant']}: "
                f"{'met' if met else 'missed'} ({size:.3f}x, {agreement:.1%}, "
                f"{row['p50_ms'] / base['p50_ms']:.2f}x float32's time"
                f"{', slower beyond the noise' if slower else ''})."
            )
    for row in rows:
        if "fc6-1" in row["scores"] and row["variant"].startswith(("compress", "quantize --m")):
            name, snr = _weakest(row["scores"])
            box = row["scores"]["fc6-1"]["snr_db"]
            out.append(
                f"- O-Net box head (fc6-1) goal, at least {BOX_DB:g} dB, {row['variant']}: "
                f"{'met' if box >= BOX_DB else 'missed'} ({box:.1f} dB in "
                f"{row['holds'] or 'its file'}, {row['size_bytes'] / base['size_bytes']:.3f}x "
                f"float32; weakest output {name} {snr:.1f} dB)."
            )
    per_op = next(r for r in rows if r["variant"] == "quantize --methods per-op")
    prelu = per_op["float_ops"].get("PRELU", 0)
    if prelu:
        out.append(
            f"- per-op kept {prelu} PRELU op(s) float on purpose: "
            f"{per_op['p50_ms'] / base['p50_ms']:.2f}x float32's time against plain int8's "
            f"{rows[1]['p50_ms'] / base['p50_ms']:.2f}x."
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="folder holding the files (module docstring)")
    parser.add_argument("--render", action="store_true", help="only render the stored record")
    args = parser.parse_args()
    if args.render:
        record = json.loads(RESULTS.read_text())
    else:
        folder = args.dir or Path(os.environ.get("TFCOMPRESS_REAL_FILES", "/work/real"))
        record = measure(folder)
        RESULTS.write_text(json.dumps(record, indent=1))
    write_section("real-files", "## Real third-party files (issue 39)\n\n" + render(record))


if __name__ == "__main__":
    main()
