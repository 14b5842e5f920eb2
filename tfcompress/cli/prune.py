"""``tfcompress prune MODEL --train T.npz [--val V.npz] --sparsity 0.75 --out OUT.tflite``."""

from __future__ import annotations

import argparse
from typing import IO, Any

from tfcompress.cli._choices import SCHEDULES
from tfcompress.cli._training import add_export_arguments, add_training_arguments, run_training


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        "prune",
        help="magnitude pruning (unstructured or M:N) to .tflite",
        description=(
            "Prune a Keras model's smallest weights while fine-tuning (tfmot), export a .tflite "
            "and measure sparsity on the exported file. Pruning shrinks the gzip size, not the "
            "raw file. Labels are optional, per output: outputs without labels are fitted to "
            "the float model's own outputs (self-distillation). "
            "A threshold (--max-drop with labels, --min-agreement or --min-snr without) "
            "gates the exported .tflite against the float model: it is written either way, "
            "and the command exits 1 when the gate fails."
        ),
    )
    add_training_arguments(parser, epochs=2, learning_rate=5e-4)
    parser.add_argument(
        "--sparsity",
        type=float,
        help="share of each pruned kernel set to zero, in (0, 1) (default 0.75; M/N with "
        "--structure)",
    )
    parser.add_argument(
        "--schedule",
        choices=SCHEDULES,
        default=None,
        help="default: polynomial, or constant with --structure (the only one M:N can use)",
    )
    parser.add_argument("--structure", help="M:N structured sparsity, e.g. 2:4")
    add_export_arguments(parser, what="pruning")
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Prune, write the .tflite atomically, report."""
    from tfcompress.training.prune import prune

    return run_training(
        args,
        out,
        prune,
        target_sparsity=args.sparsity,
        schedule=args.schedule,
        structure=args.structure,
        then=None if args.then == "float32" else args.then,
        qat_epochs=args.qat_epochs,
        skip_layers=args.skip_layer,
    )
