"""Quantization-aware training: fine-tune with fake-quant, export a full-int8 ``.tflite``."""

from __future__ import annotations

import logging
from typing import Any

from tfcompress._compat.tfmot import tfmot
from tfcompress.data import DataLike
from tfcompress.errors import InvalidInputError
from tfcompress.models.loading import ModelLike
from tfcompress.training.coverage import LayerCoverage, quantize_with_fallback
from tfcompress.training.export import finish
from tfcompress.training.result import TrainingResult
from tfcompress.training.setup import Setup, TrainingOptions, fine_tune, prepare

logger = logging.getLogger(__name__)

_SCHEMES = {None: "default", "sparsity": "prune_preserve", "clusters": "cluster_preserve"}


def qat(
    model: ModelLike,
    *,
    train_data: DataLike,
    val_data: DataLike,
    epochs: int = 1,
    learning_rate: float = 1e-4,
    batch_size: int = 32,
    preserve: str | None = None,
    seed: int = 0,
    safe_mode: bool = True,
) -> TrainingResult:
    """Quantization-aware training to a full-int8 ``.tflite`` (float32 input and output).

    Every layer tfmot can quantize is wrapped with fake-quant ops; the others stay float
    during training and are listed in ``result.coverage`` with the reason instead of
    failing. The model is fine-tuned, then converted through the same converter path as
    :func:`tfcompress.quantize`. A Keras 3 model is bridged to tf-keras first (checked to give
    the same outputs); the caller's model is never modified.

    Args:
        model: A Keras Sequential/Functional classifier (Keras 3 or tf-keras) or its path.
        train_data: Labelled samples to fine-tune on (any source
            :func:`tfcompress.data.load_data` reads).
        val_data: Labelled samples to score the float, QAT-Keras and int8 models on.
        epochs: Fine-tuning epochs (1-2 are usually enough from a trained model).
        learning_rate: Adam learning rate; keep it small, the model is already trained.
        batch_size: Samples per step.
        preserve: ``"sparsity"`` keeps the zeros of a pruned model (pruning-preserving QAT),
            ``"clusters"`` keeps shared weights of a clustered model; None for plain QAT.
        seed: Seed of training and calibration sampling.
        safe_mode: See :func:`tfcompress.models.load_model` (paths only).

    Returns:
        The int8 model, its accuracy next to the float model's, sizes and the coverage report.

    Raises:
        UnsupportedModelError: Subclassed model, unknown custom layers, or not a classifier.
        InvalidDataError: Data without labels or not matching the model.
        InvalidInputError: A bad option.
        ConversionError: The converter rejected the QAT model.

    Example:
        >>> result = tfcompress.qat(model, train_data=(x, y), val_data=(xv, yv), epochs=1)
        >>> result.accuracy_drop, result.skipped_layers  # doctest: +SKIP
        (0.0008, [])
    """
    if preserve not in _SCHEMES:
        raise InvalidInputError(
            f"preserve={preserve!r} is not known; use None, 'sparsity' or 'clusters'."
        )
    options = TrainingOptions(epochs, batch_size, learning_rate, seed)
    setup = prepare(model, train_data, val_data, safe_mode=safe_mode)
    qat_model, coverage, seconds, losses = quantization_aware(
        setup, setup.legacy, options, scheme=_SCHEMES[preserve]
    )
    recorded = {
        "epochs": epochs,
        "learning_rate": learning_rate,
        "batch_size": batch_size,
        "preserve": preserve,
        "seed": seed,
    }
    return finish(
        setup,
        qat_model,
        technique="qat",
        options=recorded,
        recipe="int8",
        coverage=coverage,
        train_seconds=seconds,
        losses=losses,
    )


def quantization_aware(
    setup: Setup, model: Any, options: TrainingOptions, *, scheme: str = "default"
) -> tuple[Any, list[LayerCoverage], float, tuple[float, ...]]:
    """Wrap ``model`` for QAT with ``scheme`` and fine-tune it (also used after pruning).

    Returns:
        The trained QAT model (ready for the int8 converter), the coverage rows, the
        training seconds and per-epoch losses.
    """
    qat_model, coverage = quantize_with_fallback(model, scheme=scheme)
    seconds, losses = fine_tune(qat_model, setup, options)
    if scheme == "cluster_preserve":
        qat_model = tfmot().experimental.combine.strip_clustering_cqat(qat_model)
    return qat_model, coverage, seconds, losses
