"""Argument helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import IO, Any


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


def add_custom_objects_flag(parser: argparse.ArgumentParser) -> None:
    """``--custom-objects FILE.py``: the model's custom Keras classes, by running that file."""
    parser.add_argument(
        "--custom-objects",
        metavar="FILE.py",
        help="a Python file defining the model's custom Keras classes (its CUSTOM_OBJECTS "
        "dict, else its public classes); tfcompress imports it, which runs its code",
    )


def load_cli_model(args: argparse.Namespace) -> Any:
    """``args.model`` loaded with ``--unsafe`` and ``--custom-objects`` (when the parser has it).

    Raises:
        ModelLoadError: The model cannot be loaded (the message names the way out).
        InvalidInputError: The ``--custom-objects`` file cannot be imported.
    """
    from tfcompress.models import load_model

    objects = None
    if getattr(args, "custom_objects", None):
        from tfcompress.models.custom_objects import import_custom_objects

        objects = import_custom_objects(args.custom_objects)
    return load_model(args.model, safe_mode=not args.unsafe, custom_objects=objects)


def emit_json(out: IO[str], payload: dict[str, Any]) -> None:
    """Write ``payload`` as one JSON line to ``out``."""
    out.write(json.dumps(payload, sort_keys=False, default=str) + "\n")


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
