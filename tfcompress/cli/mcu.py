"""``tfcompress mcu MODEL.tflite``: TFLite Micro's ops, arena, flash and outputs, on the host."""

from __future__ import annotations

import argparse
import logging
from typing import IO, Any

from tfcompress.cli.common import (
    add_json_flag,
    add_sample_flags,
    add_timeout_flag,
    emit_json,
    parse_size,
)

logger = logging.getLogger(__name__)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand.

    Example:
        >>> parser = add_parser(argparse.ArgumentParser().add_subparsers())  # doctest: +SKIP
    """
    parser = subparsers.add_parser(
        "mcu",
        help="check a .tflite for microcontrollers with TFLite Micro: ops, arena, flash",
        description="Run a .tflite through TensorFlow Lite for Microcontrollers on this host, "
        "each call in a child process: every op TFLM has no kernel for (name, index, what to "
        "do), the smallest tensor arena that allocates (bisected; TFLM's breakdown; a host "
        "estimate with a 10%% margin), flash as a C array, and TFLM's outputs against "
        "LiteRT's reference kernels. Exit 0 when the report was produced, 1 when a budget "
        "is exceeded (or --require-compatible fails), 2 for bad input. Needs tflite-micro: "
        "pip install 'tfcompress[mcu]'.",
    )
    parser.add_argument("model", help=".tflite file")
    add_sample_flags(parser, compared="TFLM and LiteRT")
    parser.add_argument(
        "--max-arena",
        type=parse_size,
        metavar="SIZE",
        help="exit 1 unless the recommended arena (margin included) fits, e.g. 64KB or 64KiB",
    )
    parser.add_argument(
        "--max-flash",
        type=parse_size,
        metavar="SIZE",
        help="exit 1 unless the model's flash (C array) fits, e.g. 256KB",
    )
    parser.add_argument(
        "--require-compatible",
        action="store_true",
        help="exit 1 unless TFLM runs the whole model",
    )
    add_timeout_flag(parser, what="the whole check, every TFLM and LiteRT call together")
    add_json_flag(parser)
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Print the report (human or ``--json``).

    Returns:
        0; 1 when a budget is exceeded or, with ``--require-compatible``, TFLM cannot run
        the model. Bad input, or ``tflite-micro`` missing, raises a typed error (exit 2).

    Example:
        >>> from tfcompress.cli import main
        >>> main(["mcu", "model_int8.tflite", "--max-arena", "64KB"])  # doctest: +SKIP
        0
    """
    from tfcompress.targets.mcu import check

    report = check(
        args.model,
        sample_data=args.data,
        max_samples=args.samples,
        max_arena=args.max_arena,
        max_flash=args.max_flash,
        timeout_s=args.timeout,
    )
    if args.json:
        emit_json(out, report.to_dict())
    else:
        out.write(f"{report}\n")
    code = 0
    for budget in report.budgets:
        if not budget.met:
            logger.error("%s: %s", report.source, budget)
            code = 1
    if args.require_compatible and not report.compatible:
        logger.error("%s: TFLite Micro cannot run the whole model", report.source)
        code = 1
    return code
