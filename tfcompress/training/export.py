"""Export a fine-tuned model through the one converter path and measure it next to the original."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import numpy as np

from tfcompress._compat.tf import tensorflow
from tfcompress.bench.accuracy import evaluate
from tfcompress.data import Dataset
from tfcompress.errors import InvalidInputError
from tfcompress.models.loading import TFLiteModel
from tfcompress.quantization.converter import Conversion, convert
from tfcompress.quantization.recipes import Recipe
from tfcompress.training.coverage import LayerCoverage
from tfcompress.training.result import TrainingResult
from tfcompress.training.setup import Setup
from tfcompress.training.sparsity import measure

logger = logging.getLogger(__name__)

EXPORT_RECIPES = ("float32", "float16", "dynamic", "int8")
CALIBRATION_SAMPLES = 200


def check_recipe(then: str | None) -> str:
    """Map ``then`` (None = float32) to a recipe name tfcompress can export.

    Raises:
        InvalidInputError: Not one of ``float32``, ``float16``, ``dynamic``, ``int8``.
    """
    name = "float32" if then is None else str(then)
    if name not in EXPORT_RECIPES:
        raise InvalidInputError(
            f"then={then!r} is not an export precision; choose None (float32), "
            "'float16', 'dynamic' or 'int8'."
        )
    return name


def export(model: Any, recipe: str, calibration: Dataset) -> Conversion:
    """Convert ``model`` with ``recipe``'s converter settings (float32 input and output).

    Args:
        model: A Keras model (either flavour), QAT/pruned/clustered wrappers stripped.
        recipe: A name from :data:`EXPORT_RECIPES`.
        calibration: Samples for activation ranges (used by ``int8`` only).

    Returns:
        The converter's output.

    Raises:
        ConversionError: The converter rejected the model.
    """
    chosen = Recipe(recipe)
    tf = tensorflow()

    def configure(converter: Any) -> None:
        chosen.spec.configure(converter, chosen, tf)
        if chosen.spec.needs_calibration:
            converter.representative_dataset = lambda: _samples(calibration)

    return convert(model, configure)


def finish(
    setup: Setup,
    tuned: Any,
    *,
    technique: str,
    options: dict[str, Any],
    recipe: str,
    coverage: list[LayerCoverage],
    train_seconds: float,
    losses: tuple[float, ...],
    m_by_n: tuple[int, int] | None = None,
) -> TrainingResult:
    """Export ``tuned`` and the original, score both on the validation data, build the result.

    Args:
        setup: The checked inputs.
        tuned: The fine-tuned tf-keras model, wrappers stripped (fake-quant kept for QAT).
        technique: ``qat``, ``prune`` or ``cluster``.
        options: The options to record.
        recipe: Export precision.
        coverage: The per-layer report.
        train_seconds: Fine-tuning wall time.
        losses: Per-epoch training losses.
        m_by_n: Structure to verify on the exported kernels.

    Returns:
        The result.
    """
    rng = np.random.default_rng(int(options.get("seed", 0)))
    count = min(CALIBRATION_SAMPLES, len(setup.train))
    calibration = Dataset(setup.train.x[np.sort(rng.choice(len(setup.train), count, False))])
    exported = export(tuned, recipe, calibration)
    reference = export(setup.original, recipe, calibration)
    float_reference = (
        reference if recipe == "float32" else export(setup.original, "float32", calibration)
    )
    scores = evaluate(
        {
            "reference": setup.original,
            "keras": tuned,
            "tflite": TFLiteModel(exported.content, label=technique, verified=True),
        },
        setup.val,
    )
    names = [layer.name for layer in setup.legacy.layers if _has_kernel(layer)]
    weights = measure(exported.content, layer_names=names, m_by_n=m_by_n)
    logger.info(
        "%s -> %s: %.2f%% (reference %.2f%%)",
        technique,
        recipe,
        scores["tflite"].score * 100,
        scores["reference"].score * 100,
    )
    return TrainingResult(
        technique=technique,
        options=options,
        source=setup.name,
        recipe=recipe,
        model_content=exported.content,
        reference_content=reference.content,
        float_content=float_reference.content,
        accuracy=scores["tflite"].score,
        keras_accuracy=scores["keras"].score,
        reference_accuracy=scores["reference"].score,
        val_samples=scores.samples,
        coverage=tuple(coverage),
        weights=tuple(weights),
        train_samples=len(setup.train),
        train_seconds=train_seconds,
        losses=losses,
        bridge_difference=setup.bridge_difference,
        keras_model=tuned,
        warnings=exported.warnings,
    )


def _has_kernel(layer: Any) -> bool:
    return any(
        hasattr(layer, attribute)
        for attribute in ("kernel", "depthwise_kernel", "pointwise_kernel")
    )


def _samples(calibration: Dataset) -> Iterator[list[np.ndarray]]:
    for sample in calibration.x:
        yield [sample[np.newaxis]]
