"""Make an attempt's artifact again from a compress report (``tfcompress compress --replay``)."""

from __future__ import annotations

import json
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
    if not isinstance(report, dict) or "attempts" not in report:
        raise InvalidInputError("not a compress report: no 'attempts'; pass compress.json.")
    if attempt is None:
        if not report.get("chosen"):
            raise InvalidInputError(
                "the report has no chosen attempt (nothing passed); pick one with --attempt N."
            )
        return Attempt.from_dict(report["chosen"])
    found = [a for a in report["attempts"] if a.get("index") == attempt]
    if not found:
        raise InvalidInputError(
            f"the report has no attempt {attempt}; it has 1 to {len(report['attempts'])}."
        )
    return Attempt.from_dict(found[0])


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
        report: ``compress.json`` (path or dict) or a CompressionResult.
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

    chosen = read_attempt(report, attempt)
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
