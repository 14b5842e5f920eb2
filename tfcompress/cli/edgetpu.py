"""``tfcompress edgetpu MODEL.tflite``: what edgetpu_compiler 16 would map, without it."""

from __future__ import annotations

import argparse
import logging
from typing import IO, Any

from tfcompress.cli.common import add_shared_flags, emit

logger = logging.getLogger(__name__)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        "edgetpu",
        help="predict which ops of a .tflite the Edge TPU compiler maps (no Edge TPU needed)",
        description="Lint a .tflite for the Coral Edge TPU with no Edge TPU software: Coral's "
        "model requirements and op table, the op versions edgetpu_compiler 16 refuses, and the "
        "predicted split between the TPU and the CPU (ops and MACs), with a fix for each "
        "finding. Exit 0 when the report was produced, compatible or not.",
    )
    parser.add_argument("model", help=".tflite file")
    parser.add_argument(
        "--require-compatible",
        action="store_true",
        help="exit 1 unless the whole model is predicted to run on the Edge TPU",
    )
    add_shared_flags(parser, "json")
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Print the report (human or ``--json``); 1 when ``--require-compatible`` fails."""
    from tfcompress.edgetpu import check

    report = check(args.model)
    emit(out, report, args.json)
    if args.require_compatible and not report.compatible:
        logger.error(
            "%s is not predicted to run whole on the Edge TPU (%d/%d ops)",
            report.source,
            report.ops_mapped,
            report.ops_total,
        )
        return 1
    return 0
