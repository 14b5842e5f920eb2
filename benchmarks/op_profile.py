"""Per-op profiles (``benchmark --profile-ops``) of the MNIST CNNs and MobileNetV2, int8.

Builds the project's small MNIST CNN and its residual CNN with a PReLU (each trained 1 epoch
on the shipped MNIST subset) and MobileNetV2 1.0 224x224 (random weights: nothing is
downloaded), converts them to the converter's int8 (the residual CNN's float32 file too),
and benchmarks each on the ``cpu`` backend, one thread, with and without
XNNPACK, with ``profile_ops=True``. The table lists each file's top ops; the check line is
the profile's own: the ops' medians plus one call's cost against the whole model's median,
within the measured spread (see docs/benchmarking.md, "Per-op profile"). LiteRT's C++
``benchmark_model --enable_op_profiling`` is not installable here (no wheel ships it), so
that check is the independent one.

Run: .venv/bin/python benchmarks/op_profile.py   (writes the ``op-profile`` section)
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _markdown import machine_line, write_section

import tfcompress
from tfcompress._compat.keras import KerasFlavour, keras_module
from tfcompress.samples.cnn import residual_cnn, small_cnn, train_classifier
from tfcompress.samples.datasets import mnist

RESULTS = Path(__file__).resolve().parent / "results" / "op_profile.json"
TOP = 6


def _files(folder: Path) -> dict[str, Path]:
    keras = keras_module(KerasFlavour.KERAS3)
    keras.utils.set_random_seed(0)
    split = mnist(test_fraction=0.25, seed=0)
    cnn = train_classifier(small_cnn(), split.train, epochs=1)
    mobilenet = keras.applications.MobileNetV2(alpha=1.0, input_shape=(224, 224, 3), weights=None)
    calibration = np.random.default_rng(0).random((16, 224, 224, 3), dtype=np.float32)
    residual = train_classifier(residual_cnn(), split.train, epochs=1)
    files = {}
    for name, model, data in (
        ("mnist_cnn", cnn, split.train.x[:200]),
        ("mobilenet_v2", mobilenet, calibration),
        ("residual_prelu", residual, split.train.x[:200]),
    ):
        result = tfcompress.quantize(model, recipe="int8", representative_data=data)
        files[f"{name}_int8.tflite"] = folder / f"{name}_int8.tflite"
        files[f"{name}_int8.tflite"].write_bytes(result.model_content)
        if name == "residual_prelu":  # its float32 file too: PRELU in float beside int8
            files[f"{name}_float32.tflite"] = folder / f"{name}_float32.tflite"
            files[f"{name}_float32.tflite"].write_bytes(result.reference_content)
    return files


def _load() -> float:
    return os.getloadavg()[0]


def _section(rows: list[dict], loads: tuple[float, float]) -> str:
    lines = [
        f"Measured on {machine_line()}, 1 thread, batch 1, each whole model at least 50 runs "
        "and 1 s; each op the same runs and its share of the second. Load average (1 min) "
        f"{loads[0]:.1f} before and {loads[1]:.1f} after, on {os.cpu_count()} cores.",
        "",
    ]
    for row in rows:
        check = row["op_profile"]["check"]
        verdict = "within" if check["within"] else "not within"
        xnnpack = row["backend_details"].get("xnnpack")
        lines += [
            f"**{row['artifact']}**, XNNPACK {'on' if xnnpack else 'off'}: whole model "
            f"{check['whole_ms']:.4f} ms; ops {check['sum_ms']:.4f} ms + call "
            f"{check['call_ms']:.4f} ms = {check['sum_ms'] + check['call_ms']:.4f} ms, "
            f"{verdict} the spread {check['tolerance_ms']:.4f} ms (whole model's fastest run "
            f"{row['latency_ms']['min']:.4f} ms).",
            "",
            "| op # | op | output | ms | share | placement |",
            "|---:|---|---|---:|---:|---|",
        ]
        ops = sorted(row["op_profile"]["ops"], key=lambda op: -op["ms"])
        for op in ops[:TOP]:
            lines.append(
                f"| {op['index']} | {op['op']} | `{op['output'][:48]}` | {op['ms']:.4f} | "
                f"{op['share']:.1%} | {op['placement']} |"
            )
        fell = [
            f"#{op['index']} {op['op']}"
            for op in row["op_profile"]["ops"]
            if op["placement"] == "fell back"
        ]
        parts = row["op_profile"]["partitions"]
        lines += [
            "",
            f"{len(row['op_profile']['ops'])} ops; {len(parts)} delegated partition(s)"
            + (
                " (" + ", ".join(f"{len(p['ops'])} ops {p['ms']:.4f} ms" for p in parts) + ")"
                if parts
                else ""
            )
            + (f"; fell back: {', '.join(fell)}" if fell else "")
            + ".",
            "",
        ]
    return "\n".join(lines)


def main() -> int:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        files = _files(Path(folder))
        rows, before = [], _load()
        for options in ({}, {"cpu": {"use_xnnpack": False}}):
            result = tfcompress.benchmark(
                {name: str(path) for name, path in files.items()},
                profile_ops=True,
                runs=50,
                min_seconds=1.0,
                backend_options=options,
            )
            print(result, file=sys.stderr)
            rows += [r.to_dict() for r in result.rows]
        after = _load()
    RESULTS.write_text(json.dumps(rows, indent=1))
    took = time.perf_counter() - started
    body = _section(rows, (before, after)) + f"\n`benchmarks/op_profile.py`, {took:.0f} s."
    write_section("op-profile", "## Per-op profile (`benchmark --profile-ops`)\n\n" + body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
