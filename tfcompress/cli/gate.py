"""``tfcompress gate REFERENCE CANDIDATE --data TEST.npz --max-drop 0.01``: exit 1 on a drop."""

from __future__ import annotations

import argparse
import logging
from typing import IO, Any

from tfcompress.cli.common import add_json_flag, add_unsafe_flag, emit_json, positive_int

logger = logging.getLogger(__name__)

MODES = ("strict", "tolerant", "proven")
INTERVALS = ("auto", "mcnemar", "bootstrap")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        "gate",
        help="fail (exit 1) when a compressed model lost more accuracy than allowed",
        description="Score REFERENCE and CANDIDATE on the same labelled samples (the candidate "
        "through --backend) and judge the drop with a paired interval. Exit 0 pass, 1 fail, "
        "2 bad input or unavailable backend.",
    )
    parser.add_argument("reference", help="model to match: .keras, .h5, SavedModel or .tflite")
    parser.add_argument("candidate", help="deployed artifact, usually a .tflite")
    parser.add_argument("--data", required=True, help="labelled test data (.npz with x and y)")
    parser.add_argument(
        "--max-drop",
        type=_max_drop,
        default=0.01,
        metavar="FRACTION",
        help="allowed drop as a fraction in [0, 1] (default 0.01 = one point)",
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="strict",
        help="strict: measured drop <= max; tolerant: fail only when significantly above; "
        "proven: pass only when the interval's upper bound is within (default strict)",
    )
    parser.add_argument("--metric", default="top1", help="top1 (default) or topK, e.g. top5")
    parser.add_argument("--backend", default="cpu", help="runtime of a .tflite candidate")
    parser.add_argument(
        "--confidence", type=float, default=0.95, help="two-sided interval level (default 0.95)"
    )
    parser.add_argument(
        "--interval", choices=INTERVALS, default="auto", help="auto = exact McNemar for top-k"
    )
    parser.add_argument("--threads", type=positive_int, default=1, help="LiteRT CPU threads")
    add_unsafe_flag(parser)
    add_json_flag(parser)
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Run the gate; print the verdict (table or JSON); 0 when it passes, 1 when it fails."""
    from tfcompress.models import load_model
    from tfcompress.testing.gates import check_accuracy_drop
    from tfcompress.testing.settings import GateSettings

    settings = GateSettings(
        max_drop=args.max_drop,
        metric=args.metric,
        mode=args.mode,
        backend=args.backend,
        confidence=args.confidence,
        interval=args.interval,
    )
    reference = load_model(args.reference, safe_mode=not args.unsafe)
    candidate = load_model(args.candidate, safe_mode=not args.unsafe)
    result = check_accuracy_drop(
        reference, candidate, args.data, settings=settings, threads=args.threads
    )
    if args.json:
        emit_json(out, result.to_dict())
    else:
        out.write(result.explain() + "\n")
    if result.passed:
        logger.info("%s", result.headline())
        return 0
    logger.error("%s", result.headline())
    return 1


def _max_drop(text: str) -> float:
    from tfcompress.errors import InvalidInputError
    from tfcompress.testing.settings import parse_max_drop

    try:
        return parse_max_drop(text, source="--max-drop")
    except InvalidInputError as error:
        raise argparse.ArgumentTypeError(str(error)) from error
