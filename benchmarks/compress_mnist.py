"""`tfcompress.compress` on MNIST: attempts, time to a passing artifact, and the result against
the plain converter's int8 and float16.

Run: .venv/bin/python benchmarks/compress_mnist.py [--write]
     (prints the `compress` section; --write puts it into docs/benchmarks.md)

Two models: the small MNIST CNN of the demo (trained 3 epochs on the 3,750 bundled training
digits) and the int8-sensitive classifier of tfcompress/samples/sensitive.py (one layer with an
outlier weight). Each is compressed to a one-point accuracy gate on held-out data with every
attempt timed on this CPU (1 thread, batch 1); the plain converter's int8 and float16 are
made with the same data and measured by the same harness.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _markdown import machine_line, write_section

import tfcompress
from tfcompress.quantization.methods.slow_ops import measure_latency
from tfcompress.report.table import format_table
from tfcompress.training.sparsity import gzip_size

MAX_DROP = 0.01


def cases() -> dict[str, tuple]:
    import keras

    from tfcompress.samples.cnn import small_cnn, train_classifier
    from tfcompress.samples.datasets import mnist
    from tfcompress.samples.sensitive import sensitive_model

    split = mnist()
    cnn = train_classifier(small_cnn(), split.train, epochs=3)
    outlier, (calib, test) = sensitive_model(keras)
    return {
        "MNIST CNN": (cnn, split.train, split.test),
        "int8-sensitive classifier": (outlier, calib, test),
    }


def plain(model, calib, test, recipe: str) -> list[str]:
    """One row for the plain converter's artifact: sizes, accuracy, drop, latency."""
    made = tfcompress.quantize(model, recipe=recipe, representative_data=calib)
    gate = tfcompress.check_gate(model, made.model, test, max_drop=MAX_DROP)
    verdict = gate.verdicts[0]
    ms = measure_latency(made.model_content, backend="cpu", threads=1, name=recipe)
    return [
        f"plain {recipe}",
        f"{made.size_bytes:,}",
        f"{gzip_size(made.model_content):,}",
        f"{verdict.candidate_score * 100:.2f}",
        f"{verdict.value * 100:+.2f}",
        f"{ms:.3f}",
        "pass" if gate.passed else "fail",
    ]


def section() -> str:
    parts = [
        "## Compress to a one-point gate",
        "",
        f"Machine: {machine_line()}. Script: `benchmarks/compress_mnist.py`. Gate: accuracy drop "
        f"<= {MAX_DROP * 100:g} pt (strict) against the Keras model on held-out data; latency: "
        "median, batch 1, 1 thread, LiteRT CPU.",
    ]
    header = ["artifact", "bytes", "gzip", "accuracy %", "drop pt", "latency ms", "gate"]
    for name, (model, calib, test) in cases().items():
        start = time.perf_counter()
        result = tfcompress.compress(
            model, representative_data=calib, eval_data=test, max_drop=MAX_DROP,
            measure_latency=True,
        )  # fmt: skip
        total = time.perf_counter() - start
        first = next((a for a in result.attempts if a.passed), None)
        to_pass = sum(a.seconds for a in result.attempts[: first.index]) if first else None
        parts += ["", f"### {name}", "", result.table(markdown=True), ""]
        chosen = result.chosen
        rows = []
        if chosen is not None:
            rows.append([
                f"compress: {chosen.name}", f"{chosen.size_bytes:,}", f"{chosen.gzip_bytes:,}",
                f"{chosen.score * 100:.2f}", f"{chosen.value * 100:+.2f}",
                f"{chosen.latency_ms:.3f}", "pass",
            ])  # fmt: skip
        rows += [plain(model, calib, test, "int8"), plain(model, calib, test, "float16")]
        parts += [format_table(header, rows, markdown=True), ""]
        if chosen is None:
            parts.append(f"No attempt passed in {total:.1f}s ({len(result.attempts)} attempts).")
            continue
        int8_passed = rows[1][-1] == "pass"
        parts.append(
            f"{len(result.attempts)} attempt(s); the first passing artifact ({first.name}) after "
            f"{to_pass:.1f}s of attempts, {total:.1f}s in all. The chosen artifact is "
            f"{chosen.size_bytes / int(rows[2][1].replace(',', '')):.2f}x the float16 file and "
            + (
                "the plain int8 file itself."
                if chosen.name == "int8"
                else f"{chosen.size_bytes / int(rows[1][1].replace(',', '')):.2f}x the plain int8 "
                f"file, which {'passes' if int8_passed else 'fails'} the gate."
            )
            + f" Stopped: {result.stop_reason}."
        )
    return "\n".join(parts) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    body = section()
    print(body)
    if args.write:
        print(f"wrote {write_section('compress', body)}")


if __name__ == "__main__":
    main()
