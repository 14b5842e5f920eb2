"""Make one candidate artifact from its recipe-as-data (the search and ``--replay`` share it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tfcompress.errors import InvalidInputError
from tfcompress.targets.base import get_target

TRAINING = ("qat", "prune", "cluster")


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


def recipe_from_data(data: dict[str, Any]) -> Any:
    """A :class:`tfcompress.Recipe` from its JSON form (lists read back as tuples).

    Example:
        >>> recipe_from_data({"name": "int8", "calibration_samples": 300}).calibration_samples
        300
    """
    from tfcompress.quantization import Recipe

    return Recipe.from_dict({k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


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
    """Make the artifact ``recipe`` describes.

    Args:
        technique: ``ptq``/``selective`` (a :class:`tfcompress.Recipe`), or ``qat``,
            ``prune``, ``cluster`` (their keyword options).
        recipe: For PTQ the recipe's dict (or ``{"recipe": ..., "target": ...,
            "engine": ..., "methods": ...}``: ``methods`` are post-training methods tried
            against plain int8, scored on ``eval_data``; the recipe kept is what the result
            records); for training the options.
        model: The float Keras model.
        representative_data: Calibration samples.
        train_data: Fine-tuning samples (training techniques only).
        eval_data: Validation samples the training techniques score on.
        target: A registered target; one that shapes artifacts (the Edge TPU) is passed to
            :func:`tfcompress.quantize` and recorded with the recipe.
        seed: Seed of calibration sampling and training.
        isolate: Fine-tune in a child process (training techniques; see
            :mod:`tfcompress.training.isolation`), so a native crash is an error, not the
            end of the search.

    Returns:
        The bytes, with the recipe that made them.

    Raises:
        InvalidInputError: Unknown technique, or a training technique without train data.
        ConversionError: The converter rejected the model.
        NativeCrashError: Fine-tuning crashed in its child process (also with oneDNN off).

    Example:
        >>> built = build("ptq", {"name": "int8"}, model, representative_data=x)  # doctest: +SKIP
    """
    import tfcompress

    if technique in ("ptq", "selective"):
        inner = recipe.get("recipe", recipe)
        target = recipe.get("target", target)
        seed = int(recipe.get("seed", seed))
        shaped = target is not None and get_target(target).shapes_artifact
        options: dict[str, Any] = {"target": target} if shaped else {}
        if recipe.get("engine") is not None:
            options["engine"] = recipe["engine"]
        methods = recipe.get("methods") if "recipe" in recipe else None
        searched = {"methods": methods, "eval_data": eval_data} if methods else {}
        result = tfcompress.quantize(
            model,
            recipe=recipe_from_data(inner),
            representative_data=representative_data,
            seed=seed,
            **options,
            **searched,
        )
        made = {"recipe": result.recipe.to_dict(), "seed": seed, **options}
        nodes = tuple(getattr(result, "float_nodes", None) or inner.get("float_nodes") or ())
        verdict = getattr(result, "target_verdict", None)
        return Built(result.model_content, made, nodes, verdict, result.reference_content)
    if technique not in TRAINING:
        raise InvalidInputError(
            f"unknown technique {technique!r}; choose one of ptq, selective, {', '.join(TRAINING)}."
        )
    if train_data is None:
        raise InvalidInputError(
            f"replaying a {technique} attempt fine-tunes the model: pass train_data (--train)."
        )
    verb = getattr(tfcompress, technique)
    options = {k: v for k, v in recipe.items() if k != "technique"}
    trained = verb(model, train_data=train_data, val_data=eval_data, isolate=isolate, **options)
    return Built(
        trained.model_content,
        {"technique": technique, **options},
        worse=trained.worse_than_baseline,
        baseline_gzip=trained.reference_gzip_bytes,
    )
