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


def argument_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse ``type`` from a parser that raises :class:`InvalidInputError`.

    argparse prints the message as the usage error (exit 2, one line).
    """

    def convert(text: str) -> Any:
        from tfcompress.errors import InvalidInputError

        try:
            return parse(text)
        except InvalidInputError as error:
            raise argparse.ArgumentTypeError(str(error)) from error

    return convert


def add_feeding_flags(parser: argparse.ArgumentParser) -> None:
    """``--batch-dim NAME=D`` and ``--input-value NAME=V``: how a model's inputs are fed.

    See :mod:`tfcompress.models.feeding` for the rules they complete.
    """
    from tfcompress.models.feeding import parse_batch_dim, parse_input_value

    parser.add_argument(
        "--batch-dim",
        action="append",
        type=argument_type(parse_batch_dim),
        default=[],
        metavar="NAME=DIM",
        help="the dimension of input NAME that is the batch, when its signature cannot tell "
        "(e.g. h=1 for a (layers, N, units) state); repeat per input",
    )
    parser.add_argument(
        "--input-value",
        action="append",
        type=argument_type(parse_input_value),
        default=[],
        metavar="NAME=VALUE",
        help="one value fed to input NAME on every call (a scalar such as sr=16000, or an "
        "input the data does not hold, e.g. h=0 for a zero state); repeat per input",
    )


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
