"""Make an attempt's artifact again from a compress report (``tfcompress compress --replay``)."""

from __future__ import annotations

import json
import math
import os
from typing import Any

from tfcompress.compression.attempts import Attempt
from tfcompress.errors import InvalidInputError


def read_attempt(report: Any, attempt: int | None = None) -> Attempt:
    """The chosen attempt (or attempt number ``attempt``) of a compress report.

    Args:
        report: A ``compress.json`` path, its parsed dict, or a CompressionResult.
        attempt: 1-based attempt index; None takes the chosen one.

    Raises:
        InvalidInputError: Not a compress report, no chosen attempt, no such index.
    """
    if hasattr(report, "to_dict"):
        report = report.to_dict()
    elif isinstance(report, str | os.PathLike):
        from pathlib import Path

        from tfcompress._files import read_regular_bytes

        path = Path(report)
        raw = read_regular_bytes(path, error=InvalidInputError, what="a compress report")
        try:
            report = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise InvalidInputError(
                f"{path}: not a JSON compress report ({error}); pass the compress.json "
                "that --report wrote."
            ) from error
    if not isinstance(report, dict) or not isinstance(report.get("attempts"), list):
        raise InvalidInputError("not a compress report: no 'attempts' list; pass compress.json.")
    if attempt is None:
        chosen = report.get("chosen")
        if not chosen:
            raise InvalidInputError(
                "the report has no chosen attempt (nothing passed); pick one with --attempt N."
            )
        return checked_attempt(chosen)
    found = [a for a in report["attempts"] if isinstance(a, dict) and a.get("index") == attempt]
    if not found:
        raise InvalidInputError(
            f"the report has no attempt {attempt}; it has 1 to {len(report['attempts'])}."
        )
    return checked_attempt(found[0])


def checked_attempt(data: Any) -> Attempt:
    """An attempt read from a report, with its recipe checked as strictly as the CLI's flags.

    A report is input like any other file: every field :func:`replay` uses has the type and
    the range the command line would accept, so a hostile report fails in one line instead
    of running a QAT of a billion epochs or handing an option of the wrong type to a verb.

    Raises:
        InvalidInputError: A field of the wrong type, an unknown technique or option, or a
            value out of range.

    Example:
        >>> checked_attempt({"index": 1, "name": "qat", "technique": "qat", "status": "passed",
        ...     "why": "", "recipe": {"epochs": 10**9}})
        Traceback (most recent call last):
        ...
        tfcompress.errors.InvalidInputError: attempt 1 (qat): epochs must be ...
    """
    if not isinstance(data, dict):
        raise InvalidInputError(
            f"not an attempt of a compress report (a JSON {type(data).__name__}); pass the "
            "compress.json that tfcompress compress --report wrote."
        )
    index, technique, recipe = data.get("index"), data.get("technique"), data.get("recipe")
    if not _is_int(index) or index < 1 or not isinstance(data.get("name"), str):
        raise InvalidInputError(
            "not an attempt of a compress report (its index or name is missing or of the "
            "wrong type); pass the compress.json that tfcompress compress --report wrote."
        )
    where = f"attempt {index} ({_shown(data['name'])})"
    if technique not in (*_PTQ, *_OPTIONS) or not isinstance(recipe, dict):
        raise InvalidInputError(
            f"{where}: technique {_shown(technique)} with a recipe of type "
            f"{type(recipe).__name__} is not one tfcompress records; pass an unedited report."
        )
    if technique in _PTQ:
        _check_ptq(recipe, where)
    else:
        _check_options(technique, recipe, where)
    return Attempt.from_dict(data)


_PTQ = ("ptq", "selective")
_TRAINING_COMMON = {
    "epochs": "epochs",
    "learning_rate": "rate",
    "batch_size": "count",
    "seed": "seed",
}
_EXPORT = {"then": "text", "qat_epochs": "epochs0", "skip_layers": "names"}
_OPTIONS: dict[str, dict[str, str]] = {
    "qat": {**_TRAINING_COMMON, "preserve": "text"},
    "prune": {
        **_TRAINING_COMMON,
        **_EXPORT,
        "target_sparsity": "fraction",
        "schedule": "text",
        "structure": "text",
    },
    "cluster": {**_TRAINING_COMMON, **_EXPORT, "clusters": "count"},
}
_MAX_SEED = 2**32 - 1
_MAX_COUNT = 2**31 - 1


def _check_ptq(recipe: dict[str, Any], where: str) -> None:
    from tfcompress.compression.build import recipe_from_data
    from tfcompress.compression.candidates import TARGETS

    inner = recipe.get("recipe", recipe)
    unknown = set(recipe) - {"recipe", "target", "seed"} if "recipe" in recipe else set()
    if unknown or not isinstance(inner, dict):
        raise InvalidInputError(
            f"{where}: the recipe holds {sorted(unknown) or 'no recipe object'}, which "
            "tfcompress does not record; pass an unedited report."
        )
    target = recipe.get("target")
    if target is not None and target not in TARGETS:
        raise InvalidInputError(f"{where}: unknown target {_shown(target)}.")
    if "seed" in recipe:
        _check_value(where, "seed", recipe["seed"], "seed")
    try:
        recipe_from_data(inner)  # the Recipe checks its own fields
    except (TypeError, ValueError) as error:  # InvalidInputError is a ValueError too
        raise InvalidInputError(f"{where}: {_shown(str(error), 300)}") from None


def _check_options(technique: str, options: dict[str, Any], where: str) -> None:
    allowed = _OPTIONS[technique]
    unknown = sorted(set(options) - set(allowed) - {"technique"})
    if unknown:
        raise InvalidInputError(
            f"{where}: {technique} takes no option {_shown(unknown[0])} (it takes "
            f"{', '.join(sorted(allowed))}); pass an unedited report."
        )
    for name, value in options.items():
        if name != "technique":
            _check_value(where, name, value, allowed[name])


def _check_value(where: str, name: str, value: Any, kind: str) -> None:
    from tfcompress.training.setup import MAX_EPOCHS

    rules = {
        "epochs": (_is_int(value) and 1 <= value <= MAX_EPOCHS, f"an integer 1 to {MAX_EPOCHS}"),
        "epochs0": (_is_int(value) and 0 <= value <= MAX_EPOCHS, f"an integer 0 to {MAX_EPOCHS}"),
        "count": (_is_int(value) and 1 <= value <= _MAX_COUNT, "a positive integer"),
        "seed": (_is_int(value) and 0 <= value <= _MAX_SEED, f"an integer 0 to {_MAX_SEED}"),
        "rate": (_is_number(value) and 0 < value < 1, "a number between 0 and 1"),
        "fraction": (
            value is None or (_is_number(value) and 0 <= value < 1),
            "a number from 0 to below 1, or null",
        ),
        "text": (value is None or isinstance(value, str), "a string or null"),
        "names": (
            isinstance(value, list) and all(isinstance(v, str) for v in value),
            "a list of layer names",
        ),
    }
    ok, expected = rules[kind]
    if not ok:
        raise InvalidInputError(
            f"{where}: {name} must be {expected}, got {_shown(value)}; pass an unedited report."
        )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return _is_int(value) or (isinstance(value, float) and math.isfinite(value))


def _shown(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def replay(
    model: Any,
    report: Any,
    *,
    representative_data: Any,
    train_data: Any = None,
    eval_data: Any = None,
    attempt: int | None = None,
    safe_mode: bool = True,
) -> bytes:
    """The ``.tflite`` bytes an attempt recorded, made again from its recipe.

    PTQ attempts give the same bytes (same recipe, seed and calibration data); fine-tuned
    ones (qat/prune/cluster) retrain with the recorded options and the same seed.

    Args:
        model: The float model the report was made from.
        report: ``compress.json`` (path or dict), a CompressionResult, or the
            :class:`Attempt` :func:`read_attempt` returned.
        representative_data: The same calibration data.
        train_data: The training data (fine-tuned attempts only).
        eval_data: Validation data of a fine-tuned attempt.
        attempt: 1-based attempt index (default: the chosen one).
        safe_mode: See :func:`tfcompress.load_model`.

    Returns:
        The artifact's bytes.

    Raises:
        InvalidInputError: Not a report, no such attempt, or an attempt that could not be made.

    Example:
        >>> data = replay(model, "out/compress.json", representative_data=x)  # doctest: +SKIP
    """
    from tfcompress.compression.build import build
    from tfcompress.models import resolve_model

    chosen = report if isinstance(report, Attempt) else read_attempt(report, attempt)
    if chosen.status == "error":
        raise InvalidInputError(f"attempt {chosen.index} ({chosen.name}) made no artifact.")
    built = build(
        chosen.technique,
        chosen.recipe,
        resolve_model(model, safe_mode=safe_mode),
        representative_data=representative_data,
        train_data=train_data,
        eval_data=eval_data,
    )
    return built.content
