"""``tfcompress prune MODEL --train T.npz [--eval E.npz] --sparsity 0.75 --out OUT.tflite``."""

from __future__ import annotations

import argparse
from typing import IO, Any

from tfcompress.cli._choices import SCHEDULES
from tfcompress.cli._training import (
    add_export_arguments,
    add_training_arguments,
    run_training,
    training_config,
)
from tfcompress.training.configs import PruneConfig


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
    add_training_arguments(parser, config=PruneConfig)
    parser.add_argument(
        "--sparsity",
        type=float,
        help="share of each pruned kernel set to zero, in (0, 1) (default 0.75; M/N with "
        "--structure)",
    )
    parser.add_argument(
        "--schedule",
        choices=SCHEDULES,
        help="default: polynomial, or constant with --structure (the only one M:N can use)",
    )
    parser.add_argument("--structure", help="M:N structured sparsity, e.g. 2:4")
    add_export_arguments(parser, config=PruneConfig, what="pruning")
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Build the PruneConfig from the flags, prune, write the .tflite atomically, report."""
    config = training_config(
        args,
        PruneConfig,
        target_sparsity=args.sparsity,
        schedule=args.schedule,
        structure=args.structure,
    )
    from tfcompress.training.prune import prune

    return run_training(args, out, prune, config)
