"""PTQ size and accuracy of every recipe on the MNIST CNN, built with Keras 3 and tf-keras.

Run: .venv/bin/python benchmarks/ptq_accuracy.py   (writes the `ptq` section of docs/benchmarks.md)
"""

from __future__ import annotations

import time

from _markdown import machine_line, write_section

import tfcompress
from tfcompress.quantization import list_recipes
from tfcompress.report.comparison import VariantRow, comparison_table
from tfcompress.samples.cnn import small_cnn, train_classifier
from tfcompress.samples.datasets import mnist


def measure(split, *, epochs: int, flavour: str) -> tuple[str, list[VariantRow], float]:
    start = time.perf_counter()
    shape = split.train.x.shape[1:]
    model = train_classifier(
        small_cnn(input_shape=shape, flavour=flavour), split.train, epochs=epochs
    )
    results = {
        name: tfcompress.quantize(model, recipe=name, representative_data=split.train)
        for name in list_recipes()
    }
    variants = {"float32": next(iter(results.values())).reference}
    variants |= {name: r.model for name, r in results.items()}
    evaluation = tfcompress.evaluate({"keras": model, **variants}, split.test)
    rows = [VariantRow(n, v.size_bytes, evaluation[n].score) for n, v in variants.items()]
    conversions = ", ".join(f"{n} {r.conversion_seconds:.1f}s" for n, r in results.items())
    table = comparison_table(rows, markdown=True)
    text = (
        f"**{split}** ({flavour}, {epochs} epochs; Keras accuracy "
        f"{evaluation['keras'].score:.2%}; conversion {conversions})\n\n{table}\n"
    )
    return text, rows, time.perf_counter() - start


def findings(rows_by_flavour: dict[str, list[VariantRow]], samples: int) -> list[str]:
    """One computed sentence per recipe: its size and accuracy drop in every flavour."""
    step = 100 / samples
    lines = []
    recipes = [r.name for r in next(iter(rows_by_flavour.values()))[1:]]
    for recipe in recipes:
        parts = []
        for flavour, rows in rows_by_flavour.items():
            reference = rows[0]
            row = next(r for r in rows if r.name == recipe)
            drop = (reference.accuracy - row.accuracy) * 100
            parts.append(
                f"{row.size_bytes / reference.size_bytes:.2f}x the float32 bytes and a "
                f"{drop:+.2f} pt drop ({drop / step:+.0f} digits) with {flavour}"
            )
        lines.append(f"- `{recipe}`: " + "; ".join(parts) + ".")
    return lines


def main() -> None:
    sections, rows_by_flavour = [], {}
    split = mnist()
    for flavour in ("keras3", "tf_keras"):
        text, rows, seconds = measure(split, epochs=3, flavour=flavour)
        print(text, f"({seconds:.0f}s)")
        sections.append(text)
        rows_by_flavour[flavour] = rows
    samples = len(split.test)
    body = (
        "## Post-training quantization: size and accuracy\n\n"
        f"Machine: {machine_line()}. Script: `benchmarks/ptq_accuracy.py`. Accuracy is top-1 on "
        "the held-out split, each `.tflite` run by the LiteRT interpreter (XNNPACK, 1 thread); "
        "ratio and drop are against the float32 `.tflite` of the same model.\n\n"
        + "\n".join(sections)
        + f"\nMeasured here, on {samples} held-out digits (one digit = {100 / samples:.2f} pt):\n\n"
        + "\n".join(findings(rows_by_flavour, samples))
        + "\n\nWhat each recipe does and when to use it: [quantization.md](quantization.md); "
        "the latency of each variant: the harness section below.\n"
    )
    print(f"wrote {write_section('ptq', body)}")


if __name__ == "__main__":
    main()
