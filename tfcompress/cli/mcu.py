"""``tfcompress mcu MODEL.tflite``: TFLite Micro's ops, arena, flash and outputs, on the host."""

from __future__ import annotations

import argparse
import logging
from typing import IO, Any

from tfcompress.cli.common import (
    add_sample_flags,
    add_shared_flags,
    emit,
    parse_size,
    sample_options,
    time_limit,
)

logger = logging.getLogger(__name__)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand."""
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
    parser.add_argument(
        "--time-budget",
        type=time_limit,
        metavar="SECONDS",
        help="time budget of the whole check, every TFLM and LiteRT call together (each gets "
        "what is left): 90s, 10m or 2h, at most a week (default: TFCOMPRESS_TIMEOUT, else 6h)",
    )
    add_shared_flags(parser, "json")
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Print the report (human or ``--json``); 1 when a check the flags ask for fails."""
    from tfcompress.targets.mcu import check

    report = check(
        args.model,
        sample_data=args.data,
        **sample_options(args),
        max_arena=args.max_arena,
        max_flash=args.max_flash,
        timeout_s=args.time_budget,
    )
    emit(out, report, args.json)
    code = 0
    for budget in report.budgets:
        if not budget.met:
            logger.error("%s: %s", report.source, budget)
            code = 1
    if args.require_compatible and not report.compatible:
        logger.error("%s: TFLite Micro cannot run the whole model", report.source)
        code = 1
    return code
