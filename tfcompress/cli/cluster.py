"""``tfcompress cluster MODEL --train T.npz [--eval E.npz] --clusters 16 --out OUT.tflite``."""

from __future__ import annotations

import argparse
from typing import IO, Any

from tfcompress.cli._training import (
    add_export_arguments,
    add_training_arguments,
    run_training,
    training_config,
)
from tfcompress.training.configs import MAX_CLUSTERS, ClusterConfig


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
    add_training_arguments(parser, config=ClusterConfig)
    parser.add_argument(
        "--clusters",
        type=int,
        help=f"values per kernel, 2-{MAX_CLUSTERS} "
        f"(default {ClusterConfig.defaults()['clusters']})",
    )
    add_export_arguments(parser, config=ClusterConfig, what="cluster")
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Build the ClusterConfig from the flags, cluster, write the .tflite atomically, report."""
    config = training_config(args, ClusterConfig, clusters=args.clusters)
    from tfcompress.training.cluster import cluster

    return run_training(args, out, cluster, config)
