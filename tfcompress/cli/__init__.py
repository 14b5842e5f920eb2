"""Command line: ``tfcompress SUBCOMMAND ...`` / ``python -m tfcompress SUBCOMMAND ...``.

Every subcommand is a thin shim over the public API, in its own module with two functions:
``add_parser(subparsers)`` and ``run(args, out) -> int``. Exit codes: 0 success, 1 a check
failed, 2 bad usage or input. Machine-readable output goes to ``out`` (the real stdout);
logs go to stderr.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import IO

from tfcompress import __version__
from tfcompress.cli._io import OneLineArgumentParser, protected_stdio
from tfcompress.errors import TFCompressError

# Modules under tfcompress.cli, in the order `--help` lists them.
SUBCOMMANDS: tuple[str, ...] = (
    "demo",
    "quantize",
    "inspect",
    "benchmark",
    "gate",
    "qat",
    "prune",
    "cluster",
)


def build_parser() -> OneLineArgumentParser:
    """The full argument parser, with every subcommand."""
    parser = OneLineArgumentParser(
        prog="tfcompress",
        description="Make trained TensorFlow/Keras models fit edge devices, and prove it.",
    )
    parser.add_argument("--version", action="version", version=f"tfcompress {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="debug logs and TensorFlow's native logs"
    )
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=OneLineArgumentParser
    )
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"tfcompress.cli.{name}")
        module.add_parser(subparsers).set_defaults(run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code (never raises for bad input).

    Example:
        >>> main(["--version"])  # doctest: +SKIP
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, --version or a usage error
        return int(exit_.code or 0)
    if not args.verbose:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # read when TensorFlow is imported
    try:
        with protected_stdio(quiet_native=not args.verbose) as out:
            _configure_logging(args.verbose)
            return int(args.run(args, out))
    except TFCompressError as error:
        message = " ".join(str(error).split())  # one line, whatever the message holds
        print(f"tfcompress {args.command}: error: {message}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("tfcompress: interrupted", file=sys.stderr)
        return 130


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at emit time (it is swapped during a command)."""

    @property
    def stream(self) -> IO[str]:  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, _: IO[str]) -> None:
        pass


def _configure_logging(verbose: bool) -> None:
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("tfcompress")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False
