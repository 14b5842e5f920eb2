"""QAT, pruning and clustering on the MNIST CNN: accuracy, raw and gzip sizes, sparsity.

Run: .venv/bin/python benchmarks/tfmot_sizes.py   (writes the `tfmot` section of docs/benchmarks.md)

Every row is measured on the exported .tflite: accuracy by the LiteRT interpreter on the
1,250 held-out digits, sparsity read back from the file's weight buffers.
"""

from __future__ import annotations

import time

from _markdown import machine_line, write_section

import tfcompress
from tfcompress.report.table import format_table
from tfcompress.samples.cnn import small_cnn, train_classifier
from tfcompress.samples.datasets import mnist
from tfcompress.training.sparsity import gzip_size


def main() -> None:
    start = time.perf_counter()
    split = mnist()
    model = train_classifier(small_cnn(flavour="keras3"), split.train, epochs=3)
    data = {"train_data": split.train, "eval_data": split.test}
    ptq = tfcompress.quantize(model, recipe="int8", representative_data=split.train)
    baseline = tfcompress.evaluate({"float32": ptq.reference, "ptq": ptq.model}, split.test)
    runs = {
        "QAT int8 (1 epoch)": tfcompress.qat(model, epochs=1, **data),
        "prune 75% float32 (2 epochs)": tfcompress.prune(model, epochs=2, **data),
        "prune 75% + PQAT int8 (2+1 epochs)": tfcompress.prune(
            model, epochs=2, then="int8", **data
        ),
        "prune 2:4 float32 (2 epochs)": tfcompress.prune(model, structure="2:4", epochs=2, **data),
        "cluster 16 float32 (1 epoch)": tfcompress.cluster(model, clusters=16, epochs=1, **data),
        "cluster 16 + CQAT int8 (1+1 epochs)": tfcompress.cluster(
            model, clusters=16, epochs=1, then="int8", **data
        ),
    }
    float_gzip = gzip_size(ptq.reference_content)
    reference = baseline["float32"].score
    rows = [
        _row("float32 (dense)", reference, reference, ptq.reference_content, float_gzip, "-", "-"),
        _row(
            "PTQ int8 (dense)",
            baseline["ptq"].score,
            reference,
            ptq.model_content,
            float_gzip,
            "-",
            "-",
        ),
    ]
    for name, result in runs.items():
        sparsity = f"{result.sparsity:.1%}" if result.technique == "prune" else "-"
        rows.append(
            _row(
                name,
                result.accuracy,
                reference,
                result.model_content,
                float_gzip,
                sparsity,
                f"{result.train_seconds:.0f}s",
            )
        )
    header = [
        "variant",
        "accuracy",
        "drop",
        "raw bytes",
        "gzip bytes",
        "gzip / float32 gzip",
        "sparsity (file)",
        "fine-tune",
    ]
    table = format_table(header, rows, markdown=True)
    seconds = time.perf_counter() - start
    body = (
        "## QAT, pruning and clustering (tfmot): accuracy and size\n\n"
        f"Machine: {machine_line()}. Script: `benchmarks/tfmot_sizes.py` ({seconds:.0f}s). "
        f"Model: the small MNIST CNN (Keras 3, bridged to tf-keras for tfmot), trained 3 epochs "
        f"on {split}; every technique fine-tunes a copy of it. Accuracy is top-1 of the exported "
        "`.tflite` (LiteRT, XNNPACK, 1 thread) on the 1,250 held-out digits, drop against the "
        "dense float32 `.tflite`; sparsity is the share of zeros in the pruned kernels, read "
        "from the exported file; gzip is level 9.\n\n"
        f"{table}\n\nMeasured here:\n\n"
        + "\n".join(findings(ptq, baseline, runs, float_gzip, len(split.test)))
        + "\n\nWhy pruning and clustering shrink the gzip rather than the raw file: "
        "[pruning.md](pruning.md).\n"
    )
    print(body)
    print(f"wrote {write_section('tfmot', body)}")


def findings(ptq, baseline, runs, float_gzip: int, samples: int) -> list[str]:
    """Computed sentences: raw vs gzip per technique, QAT vs PTQ, with the noise floor."""
    step = 100 / samples
    lines = []
    for name, result in runs.items():
        raw = result.size_bytes / len(ptq.reference_content)
        packed = gzip_size(result.model_content) / float_gzip
        lines.append(
            f"- {name}: raw file {raw:.2f}x float32's, gzip {packed:.2f}x float32's gzip; "
            f"accuracy {result.accuracy:.2%}."
        )
    qat = next((r for n, r in runs.items() if r.technique == "qat"), None)
    if qat is not None:
        gain = (qat.accuracy - baseline["ptq"].score) * 100
        lines.append(
            f"- QAT int8 vs PTQ int8: {gain:+.2f} pt ({gain / step:+.0f} digits of {samples}; "
            "fine-tuning a base model trained for only 3 epochs also counts in this)."
        )
    return lines


def _row(name, accuracy, reference, content, float_gzip, sparsity, seconds) -> list[str]:
    packed = gzip_size(content)
    return [
        name,
        f"{accuracy:.2%}",
        f"{(reference - accuracy) * 100:+.2f} pt",
        f"{len(content):,}",
        f"{packed:,}",
        f"{packed / float_gzip:.3f}",
        sparsity,
        seconds,
    ]


if __name__ == "__main__":
    main()
