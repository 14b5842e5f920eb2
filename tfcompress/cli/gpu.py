"""``tfcompress gpu MODEL.tflite``: does LiteRT's GPU run it whole, computing what the CPU does?"""

from __future__ import annotations

import argparse
import logging
from typing import IO, Any

from tfcompress.cli.common import (
    add_sample_flags,
    add_shared_flags,
    emit,
    non_negative_float,
    sample_options,
)

logger = logging.getLogger(__name__)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        "gpu",
        help="check a .tflite for LiteRT's GPU: whole, ops on the CPU, or refused; the fix",
        description="Check a .tflite for LiteRT's GPU accelerator. Offline (no GPU needed), "
        "from LiteRT's own rules: whole, falls back (the ops left to the CPU) or refused (a "
        "tensor sized at run time: nothing runs on the GPU), each cause named by its Keras "
        "layer with a change that works, and float16 overflow risks of long reductions. Where "
        "LiteRT finds a GPU, the file is also compiled there (LiteRT's verdict and the ops it "
        "left to the CPU) and run against LiteRT's CPU kernels (max abs difference per "
        "output). Exit 0 when the report was produced; 1 when --require-compatible or "
        "--max-diff fails; 2 for bad input.",
    )
    parser.add_argument("model", help=".tflite file")
    add_sample_flags(parser, compared="the GPU and the CPU")
    parser.add_argument(
        "--max-diff",
        type=non_negative_float,
        metavar="X",
        help="exit 1 when an output's max abs difference, GPU vs CPU, exceeds X (checked where "
        "a GPU runs the file)",
    )
    parser.add_argument(
        "--require-compatible",
        action="store_true",
        help="exit 1 unless the GPU runs the whole model (compiled where a GPU answers, "
        "the static verdict otherwise)",
    )
    add_shared_flags(parser, "timeout", "json")
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Print the report (human or ``--json``); 1 when a check the flags ask for fails."""
    from tfcompress.targets.gpu.check import check

    report = check(
        args.model,
        sample_data=args.data,
        **sample_options(args),
        max_difference=args.max_diff,
        timeout_s=args.timeout,
    )
    emit(out, report, args.json)
    code = 0
    if args.require_compatible and not report.compatible:
        logger.error("%s: the GPU would not run the whole model: %s", report.source,
                     report.verdict.fix())  # fmt: skip
        code = 1
    if report.within_budget is False:
        logger.error("%s: GPU vs CPU differ by %.3g, over --max-diff %g", report.source,
                     report.numerics.worst, args.max_diff)  # type: ignore[union-attr]  # fmt: skip
        code = 1
    elif args.max_diff is not None and report.numerics is None:
        logger.warning("%s: --max-diff not checked: %s", report.source, report.numerics_skipped)
    return code
