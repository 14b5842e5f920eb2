"""Command line: ``tfcompress SUBCOMMAND ...`` / ``python -m tfcompress SUBCOMMAND ...``.

Every subcommand is a thin shim over the public API, in its own module with two functions:
``add_parser(subparsers)`` and ``run(args, out) -> int``. Exit codes: 0 success, 1 a check
failed, 2 bad usage or input. Machine-readable output goes to ``out`` (the real stdout);
logs go to stderr.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Sequence

from tfcompress import __version__
from tfcompress._compat.tf import set_native_quiet
from tfcompress.cli._io import OneLineArgumentParser, protected_stdout
from tfcompress.errors import TFCompressError

# Modules under tfcompress.cli, in the order `--help` lists them.
SUBCOMMANDS: tuple[str, ...] = ("demo", "quantize", "inspect")


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
    _configure_logging(args.verbose)
    set_native_quiet(not args.verbose)
    try:
        with protected_stdout() as out:
            return int(args.run(args, out))
    except TFCompressError as error:
        print(f"tfcompress {args.command}: error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("tfcompress: interrupted", file=sys.stderr)
        return 130


def _configure_logging(verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("tfcompress")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False
