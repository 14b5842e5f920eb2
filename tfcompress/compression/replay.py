"""Make an attempt's artifact again from a compress report (``tfcompress compress --replay``)."""

from __future__ import annotations

import json
import os
from typing import Any

from tfcompress._config_fields import shown
from tfcompress.compression.attempts import Attempt
from tfcompress.errors import InvalidInputError
from tfcompress.training.configs import CONFIG_VERSION


def read_attempt(report: Any, attempt: int | None = None) -> Attempt:
    """The chosen attempt (or 1-based attempt number ``attempt``) of a compress report.

    ``report``: a ``compress.json`` path, its parsed dict, or a CompressionResult.

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
        except RecursionError:  # '[' nested 100,000 deep: no report tfcompress writes
            raise InvalidInputError(
                f"{path}: not a compress report (its JSON is nested too deep to read); pass "
                "the compress.json that --report wrote."
            ) from None
        except ValueError as error:  # bad JSON or UTF-8, an integer of 5,000 digits
            raise InvalidInputError(
                f"{path}: not a JSON compress report ({str(error)[:200]}); pass the "
                "compress.json that --report wrote."
            ) from None
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
    """An attempt read from a report, with its recipe checked by its technique's config.

    A report is input like any other file: the recipe is read by the config class of its
    technique's handler (:mod:`tfcompress.compression.handlers`:
    :class:`~tfcompress.quantization.config.PTQConfig`, or a config of
    :mod:`tfcompress.training.configs`), which gives every field the type and the range the
    command line would accept, so a hostile report fails in one line instead of running a
    QAT of a billion epochs or handing an option of the wrong type to a verb.

    Raises:
        InvalidInputError: A field of the wrong type, an unknown technique or option, or a
            value out of range.

    Example:
        >>> checked_attempt({"index": 1, "name": "qat", "technique": "qat", "status": "passed",
        ...     "why": "", "recipe": {"epochs": 10**9}})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        tfcompress.errors.InvalidInputError: attempt 1 ('qat'): epochs must be an integer 1 to...
    """
    from tfcompress.compression.handlers import get_handler, list_handlers

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
    where = f"attempt {index} ({shown(data['name'])})"
    recorded = isinstance(technique, str) and technique in list_handlers()
    if not (recorded and get_handler(technique).records_attempts and isinstance(recipe, dict)):
        raise InvalidInputError(
            f"{where}: technique {shown(technique)} with a recipe of type "
            f"{type(recipe).__name__} is not one tfcompress records; pass an unedited report."
        )
    version = recipe.get("version", CONFIG_VERSION)
    if _is_int(version) and version > CONFIG_VERSION:
        raise InvalidInputError(
            f"{where}: recorded by a newer tfcompress (config version {version}; this one "
            f"reads up to {CONFIG_VERSION}): upgrade tfcompress to replay it."
        )
    try:
        get_handler(technique).read(recipe)
    except InvalidInputError as error:
        reason = str(error) if len(str(error)) <= 300 else str(error)[:297] + "..."
        raise InvalidInputError(
            f"{where}: {reason.rstrip('.')}; pass an unedited report."
        ) from None
    return Attempt.from_dict(data)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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

    Raises:
        InvalidInputError: Not a report, no such attempt, or an attempt that could not be made.

    Example:
        >>> data = replay(model, "out/compress.json", representative_data=x)  # doctest: +SKIP
    """
    from tfcompress.compression.handlers import build
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
