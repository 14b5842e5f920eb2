"""``tfcompress cluster MODEL --train T.npz [--val V.npz] --clusters 16 --out OUT.tflite``."""

from __future__ import annotations

import argparse
from typing import IO, Any

from tfcompress.cli._training import add_export_arguments, add_training_arguments, run_training
from tfcompress.cli.common import positive_int


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        "cluster",
        help="weight clustering (N shared values per kernel) to .tflite",
        description=(
            "Cluster each kernel of a Keras model into N shared values while fine-tuning "
            "(tfmot) and export a .tflite. Clustering shrinks the gzip size, not the raw file. "
            "Labels are optional, per output: outputs without labels are fitted to the float "
            "model's own outputs (self-distillation). "
            "A threshold (--max-drop with labels, --min-agreement or --min-snr without) "
            "gates the exported .tflite against the float model: it is written either way, "
            "and the command exits 1 when the gate fails."
        ),
    )
    add_training_arguments(parser, epochs=1, learning_rate=1e-4)
    parser.add_argument(
        "--clusters", type=positive_int, default=16, help="values per kernel, 2-256 (default 16)"
    )
    add_export_arguments(parser, what="cluster")
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Cluster, write the .tflite atomically, report."""
    from tfcompress.training.cluster import cluster

    return run_training(
        args,
        out,
        cluster,
        clusters=args.clusters,
        then=None if args.then == "float32" else args.then,
        qat_epochs=args.qat_epochs,
        skip_layers=args.skip_layer,
    )
