"""Argument helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from typing import IO, Any

MAX_SECONDS = 3600.0
"""The longest minimum measuring time a command accepts, per measurement."""
MAX_SEED = 2**32 - 1


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    """``--json``: print one JSON object on stdout instead of the human table."""
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object on stdout (logs stay on stderr)"
    )


def add_force_flag(parser: argparse.ArgumentParser) -> None:
    """``--force``: allow replacing an existing output file."""
    parser.add_argument("--force", action="store_true", help="replace OUT if it exists")


def add_unsafe_flag(parser: argparse.ArgumentParser) -> None:
    """``--unsafe``: load Keras files with Lambda layers (arbitrary code)."""
    parser.add_argument(
        "--unsafe",
        action="store_true",
        help="load Keras files holding Lambda layers (they can run arbitrary code)",
    )


def emit_json(out: IO[str], payload: dict[str, Any]) -> None:
    """Write ``payload`` as one line of standard JSON to ``out``.

    NaN and infinities (an unmeasured value) are written as ``null``: Python's ``json``
    would write the non-standard tokens ``NaN`` and ``Infinity``, which strict parsers
    (``jq``, JavaScript's ``JSON.parse``) refuse.
    """
    text = json.dumps(_finite(payload), sort_keys=False, default=str, allow_nan=False)
    out.write(text + "\n")


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def seconds(text: str) -> float:
    """An argparse ``type`` for a duration in seconds: finite, from 0 to an hour.

    Example:
        >>> seconds("0.5")
        0.5
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and 0 <= value <= MAX_SECONDS):
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds from 0 to {MAX_SECONDS:g}, got {text}"
        )
    return value


def seed(text: str) -> int:
    """An argparse ``type`` for a seed: an integer NumPy and Keras accept (0 to 2**32-1).

    Example:
        >>> seed("7")
        7
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer seed") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be an integer from 0 to {MAX_SEED}, got {value}")
    return value


def show_progress() -> bool:
    """Progress bars only when a person watches stderr."""
    return sys.stderr.isatty()


def csv_of(kind: Callable[[str], Any], what: str) -> Callable[[str], list[Any]]:
    """An argparse ``type`` for comma-separated values, e.g. ``--threads 1,2``."""

    def parse(text: str) -> list[Any]:
        try:
            values = [kind(part) for part in text.split(",") if part.strip()]
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"{what}: {error}") from error
        if not values:
            raise argparse.ArgumentTypeError(f"{what}: give at least one value")
        return values

    return parse


def positive_int(text: str) -> int:
    """An argparse ``type`` for integers >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value
