"""Never worse: plain int8, compress's choice and fine-tuning with and without frozen BatchNorm.

Run: .venv/bin/python benchmarks/never_worse.py   (writes the `never_worse` section of
docs/benchmarks.md; a few minutes on two cores)

On the models of tfcompress/samples/troublemakers.py, trained here on sklearn's real 8x8 digits:

* a LayerNormalization classifier (its NEG has no int8 kernel): plain int8 with the
  converter's defaults, and compress's choice at a one-point accuracy gate;
* a three-head network with small-magnitude regression heads: plain int8, and compress's
  choice at ``min_snr=25`` dB on every output;
* a BatchNorm-heavy depthwise classifier self-distilled (no labels) on images unlike its
  training set: plain int8, QAT and prune-int8 with BatchNorm frozen (the default) and
  trainable, and what running the fine-tuning in a child process costs.

Fidelity is measured per output against the float model on held-out samples (top-1
agreement for class outputs, SNR in dB for the others); sizes are ratios to the float32
``.tflite``. Every sentence of the section is computed from these runs.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = Path(__file__).resolve().parent.parent

from _markdown import machine_line, write_section  # noqa: E402

import tfcompress  # noqa: E402
from tfcompress.models import TFLiteModel  # noqa: E402
from tfcompress.report.table import format_table  # noqa: E402
from tfcompress.samples.troublemakers import (  # noqa: E402
    bn_depthwise_classifier,
    digits_split,
    layer_norm_classifier,
    three_heads,
    unlike_images,
)

FINE_TUNE_SAMPLES = 800
TIMING_REPEATS = 2
TECHNIQUES = (("qat", {}), ("prune", {"target_sparsity": 0.5, "then": "int8"}))


def fidelity(reference: Any, artifact: bytes, x: Any) -> str:
    """Each output's fidelity to the float model: ``cls 99.78%; box 31.2 dB``."""
    model = TFLiteModel(artifact, label="artifact", verified=True)
    evaluation = tfcompress.evaluate({"float": reference, "artifact": model}, x)
    row = evaluation["artifact"]
    return "; ".join(
        f"{column.output} {column.show(score)}"
        for column, score in zip(evaluation.columns, row.scores, strict=True)
    )


def main() -> None:
    start = time.perf_counter()
    split = digits_split()
    rows: list[list[str]] = []
    sentences: list[str] = []

    def add(model_name: str, variant: str, content: bytes, float32: int, reference: Any, x: Any):
        rows.append(
            [
                model_name,
                variant,
                f"{len(content):,}",
                f"{len(content) / float32:.2f}",
                fidelity(reference, content, x),
            ]
        )

    # LayerNormalization classifier: int8 with NEG left float, and compress's choice.
    layer_norm = layer_norm_classifier(split.train)
    plain = tfcompress.quantize(layer_norm, representative_data=split.train.x)
    float32 = plain.reference_size_bytes
    add("LayerNorm classifier", "float32 .tflite", plain.reference_content, float32,
        layer_norm, split.test.x)  # fmt: skip
    add("LayerNorm classifier", f"int8, float ops: {', '.join(plain.float_ops) or 'none'}",
        plain.model_content, float32, layer_norm, split.test.x)  # fmt: skip
    chosen = tfcompress.compress(
        layer_norm, representative_data=split.train.x, eval_data=split.test, max_drop=0.01
    )
    if chosen.model_content is not None:
        add("LayerNorm classifier", f"compress, 1-point gate: {chosen.chosen.name}",
            chosen.model_content, float32, layer_norm, split.test.x)  # fmt: skip
    sentences.append(
        f"LayerNorm classifier: compress chose {chosen.chosen.name if chosen.chosen else 'nothing'}"
        f" after {len(chosen.attempts)} attempt(s); stopped: {chosen.stop_reason}."
    )

    # Three heads, small regression heads: int8 and compress at min_snr 25 dB.
    heads = three_heads(split.train)
    plain = tfcompress.quantize(heads, representative_data=split.train.x)
    float32 = plain.reference_size_bytes
    add("three heads", "int8", plain.model_content, float32, heads, split.test.x)
    searched = tfcompress.compress(
        heads, representative_data=split.train.x, eval_data=split.test.x, min_snr=25
    )
    if searched.model_content is not None:
        add("three heads", f"compress, min_snr 25 dB: {searched.chosen.name}",
            searched.model_content, float32, heads, split.test.x)  # fmt: skip
    largest = max(a.size_bytes or 0 for a in searched.attempts) / searched.float32_bytes
    tried = ", ".join(f"{a.name} ({a.status}, {a.size_bytes or 0:,} B)" for a in searched.attempts)
    sentences.append(
        f"three heads: compress tried {tried}; the largest attempt made is {largest:.2f}x the "
        f"float32 file ({searched.float32_bytes:,} B). Stopped: {searched.stop_reason}."
    )

    # BatchNorm-heavy depthwise classifier, fine-tuned without labels on unlike images.
    bn = bn_depthwise_classifier(split.train)
    train = unlike_images(split.train.x[:FINE_TUNE_SAMPLES])
    val = unlike_images(split.test.x, seed=1)
    plain = tfcompress.quantize(bn, representative_data=train)
    float32 = plain.reference_size_bytes
    add("BN depthwise (unlike data)", "int8 (PTQ)", plain.model_content, float32, bn, val)
    for frozen in (True, False):
        state = "BatchNorm frozen" if frozen else "BatchNorm trainable"
        for technique, options in (
            ("qat", {}),
            ("prune", {"target_sparsity": 0.5, "then": "int8"}),
        ):
            result = getattr(tfcompress, technique)(
                bn, train_data=train, eval_data=val, freeze_batchnorm=frozen, **options
            )
            name = "QAT int8" if technique == "qat" else "prune 50% + int8"
            worse = " (worse than PTQ)" if result.worse_than_baseline else ""
            add("BN depthwise (unlike data)", f"{name}, {state}{worse}", result.model_content,
                float32, bn, val)  # fmt: skip
    runs: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(TIMING_REPEATS):  # alternated, so load on the machine hits both alike
        for isolate in (False, True):
            began = time.perf_counter()
            tfcompress.qat(bn, train_data=train, eval_data=val, isolate=isolate)
            runs[isolate].append(time.perf_counter() - began)
    in_process, isolated = min(runs[False]), min(runs[True])
    sentences.append(
        f"QAT of the BN classifier took {in_process:.1f}s in process and {isolated:.1f}s in a "
        f"child process (isolate=True, what the CLI and compress use), the best of "
        f"{TIMING_REPEATS} runs each: the child (its own TensorFlow and tfmot imports, the "
        f"model saved and loaded again, the data handed over) cost {isolated - in_process:+.1f}s "
        "here."
    )

    table = format_table(
        ["model", "variant", "bytes", "x float32", "fidelity to the float model per output"],
        rows,
        markdown=True,
    )
    body = "\n".join(
        [
            "## Never worse (issue 18)",
            "",
            f"Measured by `benchmarks/never_worse.py` on {machine_line()} in "
            f"{time.perf_counter() - start:.0f}s. Models of `tfcompress/samples/troublemakers.py`, "
            "trained on sklearn's 8x8 digits; fidelity on held-out samples (agreement for class "
            "outputs, SNR for the others); the BN classifier is fine-tuned and judged on images "
            f"unlike its training set ({FINE_TUNE_SAMPLES} label-free training samples).",
            "",
            table,
            "",
            *(f"* {sentence}" for sentence in sentences),
        ]
    )
    path = write_section("never_worse", body)
    print(body)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
