"""Make one candidate artifact from its recipe-as-data (the search and ``--replay`` share it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Built:
    """A made artifact and how to make it again.

    Attributes:
        content: The ``.tflite`` bytes.
        recipe: What made it, as data (see :attr:`Attempt.recipe`).
        float_nodes: Converter nodes kept in float (selective quantization).
        verdict: The target's check of the artifact (the Edge TPU's linter and compiler),
            when quantize ran one; else None.
    """

    content: bytes
    recipe: dict[str, Any]
    float_nodes: tuple[str, ...] = ()
    verdict: Any = None
    reference: bytes | None = None  # the float32 .tflite made by the same conversion
    # Fine-tuned artifacts: where they came out worse than the original exported at the
    # same precision (TrainingResult.worse_than_baseline), and that export's gzip bytes.
    worse: tuple[str, ...] = ()
    baseline_gzip: int | None = None


def build(
    technique: str,
    recipe: dict[str, Any],
    model: Any,
    *,
    representative_data: Any,
    train_data: Any = None,
    eval_data: Any = None,
    target: str | None = None,
    seed: int = 0,
    isolate: bool = True,
) -> Built:
    """Make the artifact ``recipe`` describes, with the handler of ``technique``.

    Args:
        technique: A registered technique (:func:`~tfcompress.compression.handlers.list_handlers`):
            ``ptq``/``selective`` (a :class:`~tfcompress.quantization.config.PTQConfig`,
            or a bare recipe dict), or ``qat``, ``prune``, ``cluster`` (their configs,
            :mod:`tfcompress.training.configs`). ``methods`` in a PTQ recipe are
            post-training methods tried against plain int8, scored on ``eval_data``; the
            recipe kept is what the result records.
        recipe: The recipe as data (a rung's, or what an attempt recorded).
        model: The float Keras model.
        representative_data: Calibration samples.
        train_data: Fine-tuning samples (training techniques only).
        eval_data: Validation samples the post-training methods and fine-tunes score on.
        target: A registered target where the recipe records none; one that shapes
            artifacts (the Edge TPU) is passed to quantize and recorded with the recipe.
        seed: Seed of calibration sampling and training where the recipe records none.
        isolate: Fine-tune in a child process (training techniques; see
            :mod:`tfcompress.training.isolation`), so a native crash is an error, not the
            end of the search.

    Returns:
        The bytes, with the recipe that made them.

    Raises:
        InvalidInputError: Unknown technique, a recipe its config refuses, or a training
            technique without train data.
        ConversionError: The converter rejected the model.
        NativeCrashError: Fine-tuning crashed in its child process (also with oneDNN off).

    Example:
        >>> built = build("ptq", {"name": "int8"}, model, representative_data=x)  # doctest: +SKIP
    """
    # handlers.py imports Built from here: look it up when called, not at import.
    from tfcompress.compression.handlers import Materials, get_handler

    handler = get_handler(technique)
    config = handler.read(recipe, seed=seed, target=target)
    materials = Materials(model, representative_data, train_data, eval_data, isolate)
    return handler.make(config, materials)
