"""Models shaped like users' models: latency without data, and gate outcomes per output.

Run: .venv/bin/python benchmarks/real_models.py
(writes the `real_models` section of docs/benchmarks.md and the `real-models:gate`
block of docs/real-models.md; the raw record goes to benchmarks/results/real_models.json)

The models are those of tests/test_real_models.py, trained on the digits bundled with
scikit-learn: a two-input, two-head detector shape, a per-pixel segmenter and a keyword
spotter over audio of any length. Latency rows run on seeded random inputs (no data);
every gate verdict is computed by `check_gate` on the held-out digits.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _markdown import machine_line, write_block, write_section

import tfcompress
from tfcompress.data import Dataset
from tfcompress.report.table import format_table
from tfcompress.samples.tasks import (
    ink_masks,
    ink_segmenter,
    train_segmenter,
    train_two_head,
    two_head_cnn,
    two_input_data,
)
from tfcompress.testing import check_gate

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "real_models.json"
DOC = ROOT / "docs" / "real-models.md"
TIMING = {"runs": 200, "min_seconds": 1.0, "warmup_seconds": 0.5}


def _keyword_spotter() -> Any:
    import keras

    audio = keras.Input((None, 1), name="audio")
    x = keras.layers.Conv1D(16, 9, strides=4, activation="relu")(audio)
    x = keras.layers.Conv1D(16, 9, strides=4, activation="relu")(x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    return keras.Model(audio, keras.layers.Dense(3, activation="softmax", name="keyword")(x))


def _artifacts(folder: Path) -> tuple[dict[str, Path], dict[str, Any]]:
    digits = tfcompress.samples.datasets.digits()
    train, test = two_input_data(digits.train), two_input_data(digits.test, seed=1)
    heads = train_two_head(two_head_cnn(), train, epochs=4)
    damaged = two_head_cnn()
    damaged.set_weights(heads.get_weights())
    kernel, bias = damaged.get_layer("box").get_weights()
    damaged.get_layer("box").set_weights([kernel, bias + 1.5])
    segmenter = train_segmenter(ink_segmenter(), digits.train.x)
    spotter = _keyword_spotter()
    paths = {
        "two_head.keras": folder / "two_head.keras",
        "two_head_int8.tflite": tfcompress.quantize(
            heads, recipe="int8", representative_data=train
        ).save(folder / "two_head_int8.tflite"),
        "two_head_damaged.tflite": tfcompress.quantize(damaged, recipe="float32").save(
            folder / "two_head_damaged.tflite"
        ),
        "segmenter_int8.tflite": tfcompress.quantize(
            segmenter, recipe="int8", representative_data=digits.train.x
        ).save(folder / "segmenter_int8.tflite"),
        "kws_float32.tflite": tfcompress.quantize(spotter, recipe="float32").save(
            folder / "kws_float32.tflite"
        ),
    }
    heads.save(paths["two_head.keras"])
    inputs = {"image": test.x["image"], "gain": test.x["gain"]}
    labelled, unlabelled = folder / "two_head_test.npz", folder / "two_head_unlabelled.npz"
    np.savez(labelled, **inputs, y_cls=test.y["cls"], y_box=test.y["box"])
    np.savez(unlabelled, **inputs)
    data = {
        "heads": heads,
        "segmenter": segmenter,
        "labelled": labelled,
        "unlabelled": unlabelled,
        "masks": Dataset(digits.test.x, ink_masks(digits.test.x)),
        "images": digits.test.x,
    }
    return paths, data


def _latency(paths: dict[str, Path]) -> list[dict[str, Any]]:
    rows = []
    for name, path in paths.items():
        if not name.endswith(".tflite"):
            continue  # the deployed artifacts; the Keras model is the gates' reference
        shapes = {"audio": (1, 16000, 1)} if name.startswith("kws") else None
        result = tfcompress.benchmark(path, input_shapes=shapes, **TIMING)
        for row in result.rows:
            rows.append(
                {
                    "artifact": name,
                    "backend": row.backend,
                    "inputs": "audio=1x16000x1" if shapes else "random, declared shapes",
                    "status": row.status,
                    "size_bytes": row.size.file_bytes,
                    "p50_ms": None if row.latency is None else round(row.latency.p50, 4),
                    "mean_ms": None if row.latency is None else round(row.latency.mean, 4),
                }
            )
    return rows


def _gates(paths: dict[str, Path], data: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    heads, segmenter = data["heads"], data["segmenter"]
    runs = [  # (candidate, reference model, data, labelled)
        ("two_head_int8.tflite", heads, data["labelled"], True),
        ("two_head_int8.tflite", heads, data["unlabelled"], False),
        ("two_head_damaged.tflite", heads, data["labelled"], True),
        ("segmenter_int8.tflite", segmenter, data["masks"], True),
        ("segmenter_int8.tflite", segmenter, data["images"], False),
    ]
    rows, example = [], ""
    for name, reference, samples, labelled in runs:
        report = check_gate(reference, paths[name], samples)
        if name == "two_head_int8.tflite" and labelled:
            example = report.explain()
        for verdict in report.verdicts:
            rows.append(
                {
                    "candidate": name,
                    "labels": "yes" if labelled else "no",
                    "output": verdict.output,
                    "metric": verdict.metric,
                    "chosen": verdict.chosen_because is not None,
                    "reference": verdict.definition.format_value(verdict.reference_score)
                    if verdict.reference_score is not None
                    else "",
                    "candidate_score": verdict.definition.format_value(verdict.candidate_score),
                    "value": verdict.definition.format_change(verdict.value)
                    if verdict.kind == "task"
                    else verdict.definition.format_value(verdict.value),
                    "threshold": f"{verdict.threshold_name} "
                    f"{verdict.definition.format_threshold(verdict.threshold)}",
                    "passed": verdict.passed,
                }
            )
    return rows, example


def _section(latency: list[dict[str, Any]], gates: list[dict[str, Any]], seconds: float) -> str:
    latency_rows = [
        [
            r["artifact"],
            r["backend"],
            r["inputs"],
            r["status"],
            f"{r['size_bytes']:,}",
            "" if r["p50_ms"] is None else f"{r['p50_ms']:.3f}",
        ]
        for r in latency
    ]
    gate_rows = [
        [
            r["candidate"],
            r["labels"],
            r["output"],
            r["metric"] + (" (chosen)" if r["chosen"] else ""),
            r["reference"],
            r["candidate_score"],
            r["value"],
            r["threshold"],
            "PASSED" if r["passed"] else "FAILED",
        ]
        for r in gates
    ]
    failed = [f"{r['candidate']} {r['output']}" for r in gates if not r["passed"]]
    return "\n".join(
        [
            "## Models shaped like users' models: latency without data, gates per output",
            "",
            f"Machine: {machine_line()}. `python benchmarks/real_models.py` "
            f"({seconds:.0f} s); models and data as in tests/test_real_models.py (digits "
            "bundled with scikit-learn). Latency: 1 thread, batch 1, the `cpu` backend, on "
            "seeded random inputs: no data was given.",
            "",
            format_table(
                ["artifact", "backend", "inputs", "status", "bytes", "p50 ms"],
                latency_rows,
                markdown=True,
            ),
            "",
            "Gate verdicts of `check_gate(reference Keras model, candidate, data)` with the "
            "default thresholds; `(chosen)` marks a metric picked from the output's shape and "
            f"the data. Failed: {', '.join(failed) if failed else 'none'}.",
            "",
            format_table(
                [
                    "candidate",
                    "labels",
                    "output",
                    "metric",
                    "reference",
                    "candidate",
                    "drop / value",
                    "threshold",
                    "verdict",
                ],
                gate_rows,
                markdown=True,
            ),
        ]
    )


def main() -> None:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tfc-real-models-") as folder:
        paths, data = _artifacts(Path(folder))
        latency = _latency(paths)
        gates, example = _gates(paths, data)
    seconds = time.perf_counter() - start
    RESULTS.parent.mkdir(exist_ok=True)
    record = {"machine": machine_line(), "latency": latency, "gates": gates, "example": example}
    RESULTS.write_text(json.dumps(record, indent=2) + "\n")
    print(write_section("real_models", _section(latency, gates, seconds)))
    print(write_block(DOC, "real-models:gate", f"```text\n{example}\n```"))


if __name__ == "__main__":
    main()
