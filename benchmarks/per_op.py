"""Precision per op on models shaped like shipped ones: plain int8, the per-op rung, float16.

Run: .venv/bin/python benchmarks/per_op.py [--render]
(writes the ``per-op`` section of docs/benchmarks.md; the raw record goes to
benchmarks/results/per_op.json; --render writes the section again from it)

Three models built in code and trained here in seconds on sklearn's real digits (nothing is
downloaded; the real files of issue 39: benchmarks/real_files.py):

* an MTCNN O-Net-shaped model (:mod:`tfcompress.samples.face_nets`: 48x48x3, conv + PReLU,
  Dense 256 + PReLU, a 2-class softmax, 4 box and 10 landmark outputs), gate: every output
  at least 24 dB SNR against float32 (the issue's O-Net goal for the box head);
* the 8x8-digits classifier with a LayerNormalization
  (:func:`tfcompress.samples.troublemakers.layer_norm_classifier`), gate: accuracy drop at
  most 1 point on the labelled test digits;
* the mini-Xception emotion classifier (:mod:`tfcompress.samples.xception`, 48x48x1,
  separable convs, residual adds) on the digits upscaled to 48x48, gate: top-1 agreement
  with float32 at least 97% (the emotion-classifier goal: int8-class size, at most 0.45x
  float32, at least 97% agreement, not slower than float32).

For each: ``compress`` with its ladder cut to plain int8 and the per-op rung (the speed step
and the error steps, each attempt recorded), then every file (float32, plain int8, each per-op
step, float16) timed back to back on LiteRT's CPU backend, one thread (median per sample, the
lower of two timings), and scored per output against the float32 file on the held-out
samples (SNR in dB; top-1 agreement for class outputs). The ops the rung found slower in int8
are its own profile's (``benchmark --profile-ops`` of both files). Every sentence of the
section is computed from these runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # a native crash in fit seen on AMD hosts
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from _markdown import machine_line, write_section

import tfcompress
from tfcompress.quantization.methods.slow_ops import FLOOR_MS

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "per_op.json"
CALIBRATION = 200
UPSCALE = 6


def _ladder_int8_and_per_op() -> None:
    from tfcompress.compression import api

    real = api.plan_ladder
    api.plan_ladder = lambda **options: tuple(  # type: ignore[assignment]
        r for r in real(**options) if r.name in ("int8", "per-op")
    )


def _score(reference: bytes, contents: list[bytes], data: Any) -> list[dict[str, Any]]:
    """Each file's outputs against float32: SNR (dB) and, for class outputs, agreement."""
    from tfcompress.data import Dataset
    from tfcompress.quantization.methods.selection import score

    scored = score(reference, contents, Dataset(data), source="model")
    return [
        {
            f.output: {"snr_db": round(float(f.snr_db), 2)}
            | ({} if f.agreement is None else {"agreement": round(float(f.agreement), 4)})
            for f in fidelity
        }
        for fidelity, _ in scored
    ]


def _latency(content: bytes, name: str) -> float:
    from tfcompress.quantization.methods.slow_ops import measure_latency

    return min(measure_latency(content, backend="cpu", threads=1, name=name) for _ in range(2))


def _remake(model: Any, attempt: Any, calib: Any) -> bytes:
    from tfcompress.quantization.config import PTQConfig
    from tfcompress.quantization.recipes import Recipe

    recipe = attempt.recipe
    if attempt.technique == "selective":
        inner = {k: tuple(v) if isinstance(v, list) else v for k, v in recipe["recipe"].items()}
        return tfcompress.quantize(
            model, recipe=Recipe.from_dict(inner), representative_data=calib
        ).model_content
    config = PTQConfig.from_dict(recipe)
    return tfcompress.quantize(model, config=config, representative_data=calib).model_content


def one_model(name: str, model: Any, calib: Any, test: Any, gate: dict[str, float]) -> dict:
    """compress (int8 + per-op), then every file timed and scored the same way."""
    start = time.perf_counter()
    result = tfcompress.compress(
        model, representative_data=calib, eval_data=test, progress=True, **gate
    )
    took = round(time.perf_counter() - start, 1)
    float32 = tfcompress.quantize(model, recipe="float32").model_content
    float16 = tfcompress.quantize(model, recipe="float16").model_content
    x = test.x if hasattr(test, "x") else test
    files = {"float32": float32}
    for attempt in result.attempts:
        if attempt.status == "error":
            continue
        files[attempt.name] = _remake(model, attempt, calib)
    files["float16"] = float16
    latency = {n: _latency(c, n) for n, c in files.items()}
    scores = _score(float32, list(files.values()), x)
    rows = []
    for (variant, content), score in zip(files.items(), scores, strict=True):
        attempt = next((a for a in result.attempts if a.name == variant), None)
        rows.append({
            "variant": variant,
            "size_bytes": len(content),
            "size_x": round(len(content) / len(float32), 3),
            "latency_ms": round(latency[variant], 5),
            "latency_x": round(latency[variant] / latency["float32"], 3),
            "scores": score,
            "gate_passed": None if attempt is None else bool((attempt.gate or {}).get("passed")),
            "chosen": result.chosen is not None and attempt is result.chosen,
            "notes": [] if attempt is None else list(attempt.notes),
        })  # fmt: skip
    return {
        "model": name,
        "gate": gate,
        "compress_seconds": took,
        "chosen": None if result.chosen is None else result.chosen.name,
        "rows": rows,
    }


def measure() -> dict[str, Any]:
    import keras
    import tensorflow as tf

    from tfcompress.data import Dataset
    from tfcompress.samples.face_nets import onet_data, trained_onet
    from tfcompress.samples.troublemakers import digits_split, layer_norm_classifier
    from tfcompress.samples.xception import mini_xception

    start = time.perf_counter()
    _ladder_int8_and_per_op()
    split = digits_split()
    models = []
    train, test = onet_data(split.train), onet_data(split.test)
    onet = trained_onet(train, epochs=2)
    calib = Dataset(train.x[:CALIBRATION])
    name = "O-Net-shaped (conv + PReLU, 3 heads), 48x48x3"
    models.append(one_model(name, onet, calib, Dataset(test.x), {"min_snr": 24.0}))
    norm = layer_norm_classifier(split.train)
    name = "8x8 digits with a LayerNormalization"
    calib = split.train.x[:CALIBRATION]
    models.append(one_model(name, norm, calib, split.test, {"max_drop": 0.01}))
    big_train = np.kron(split.train.x, np.ones((1, UPSCALE, UPSCALE, 1), np.float32))
    big_test = np.kron(split.test.x, np.ones((1, UPSCALE, UPSCALE, 1), np.float32))
    keras.utils.set_random_seed(0)
    xception = mini_xception(input_shape=(48, 48, 1), num_classes=10)
    xception.compile(keras.optimizers.Adam(3e-3), "sparse_categorical_crossentropy")
    xception.fit(big_train, split.train.y, epochs=4, batch_size=32, verbose=0)
    name = "mini-Xception (separable convs, residual), 48x48x1"
    gate = {"min_agreement": 0.97}
    models.append(one_model(name, xception, big_train[:CALIBRATION], Dataset(big_test), gate))
    return {
        "machine": machine_line(),
        "tensorflow": tf.__version__,
        "models": models,
        "seconds": round(time.perf_counter() - start, 1),
    }


def _weakest(scores: dict[str, dict[str, float]]) -> str:
    if not scores:
        return "reference"
    snr = min(s["snr_db"] for s in scores.values())
    agreements = [s["agreement"] for s in scores.values() if "agreement" in s]
    parts = [f"{snr:.1f} dB"] + ([f"{min(agreements):.1%} top-1"] if agreements else [])
    return ", ".join(parts)


def render(record: dict[str, Any]) -> str:
    from tfcompress.report.table import format_table

    lines = [
        f"Measured on {record['machine']}, TensorFlow {record['tensorflow']}; "
        f"`benchmarks/per_op.py`, {record['seconds']:.0f} s in all. Latency: LiteRT CPU, 1 "
        "thread, median per sample (lower of two timings), all files of a model timed back to "
        "back. Scores against the float32 file on the held-out digits (weakest output's SNR; "
        "top-1 agreement of the class output).",
        "",
    ]
    for model in record["models"]:
        gate = ", ".join(f"{k}={v:g}" for k, v in model["gate"].items())
        lines += [
            f"**{model['model']}** (gate {gate}; compress {model['compress_seconds']:.0f} s)",
            "",
        ]
        table = [
            [row["variant"] + (" (chosen)" if row["chosen"] else ""), f"{row['size_bytes']:,}",
             f"{row['size_x']:.2f}x", f"{row['latency_ms']:.4f}", f"{row['latency_x']:.2f}x",
             _weakest(row["scores"]),
             "-" if row["gate_passed"] is None else ("passed" if row["gate_passed"] else "failed")]
            for row in model["rows"]
        ]  # fmt: skip
        lines.append(format_table(
            ["file", "size B", "x float32", "ms/sample", "x float32", "weakest output", "gate"],
            table, markdown=True,
        ))  # fmt: skip
        lines += ["", *_sentences(model), ""]
    return "\n".join(lines)


def _sentences(model: dict[str, Any]) -> list[str]:
    rows = {row["variant"]: row for row in model["rows"]}
    out = []
    steps = [r for r in model["rows"] if r["variant"].startswith("int8 (")]
    slow = [r for r in steps if "in int8 vs" in (r["notes"] or [""])[0]]
    if slow:
        out.append(f"- the speed step's profile: {slow[0]['notes'][0][len('float: ') :]}.")
    elif steps:
        out.append("- no op ran slower in int8 than in float here: the steps are error steps.")
    int8 = rows.get("int8")
    if int8 is not None:
        word = "slower" if int8["latency_x"] > 1 else "faster"
        out.append(f"- plain int8 ran {int8['latency_x']:.2f}x float32's time ({word}).")
    chosen = model["chosen"]
    if chosen is None:
        out.append("- compress returned nothing: no attempt passed the gate and ran within "
                   "float32's time.")  # fmt: skip
    else:
        row = rows[chosen]
        weakest = _weakest(row["scores"])
        extra = rows["float32"]["latency_ms"] * (row["latency_x"] - 1) * 1000
        within = (
            f" (+{extra:.1f} us: within the {FLOOR_MS * 1000:g} us floor below which a "
            'difference is not "slower")'
            if row["latency_x"] > 1 and extra <= FLOOR_MS * 1000
            else ""
        )
        out.append(
            f"- compress chose `{chosen}`: {row['size_x']:.3f}x float32's size, "
            f"{row['latency_x']:.2f}x its time{within}, weakest output {weakest}."
        )
    agreement = model["gate"].get("min_agreement")
    if agreement is not None:
        row = rows.get(chosen) if chosen is not None else None
        reached = row is not None and row["size_x"] <= 0.45
        size = "nothing chosen" if row is None else f"the chosen file is {row['size_x']:.3f}x"
        out.append(
            "- emotion-classifier goal (at most 0.45x float32, at least "
            f"{agreement:.0%} agreement, not slower): "
            + ("reached" if reached else "not reached")
            + f" on this stand-in ({size} float32, and passed the agreement gate and "
            "compress's speed rule)."
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--render", action="store_true", help="only render the stored record")
    args = parser.parse_args()
    if args.render:
        record = json.loads(RESULTS.read_text())
    else:
        record = measure()
        RESULTS.write_text(json.dumps(record, indent=1))
    write_section("per-op", "## Precision per op (`compress`'s per-op rung)\n\n" + render(record))


if __name__ == "__main__":
    main()
