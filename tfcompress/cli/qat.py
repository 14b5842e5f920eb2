"""``tfcompress qat MODEL --train TRAIN.npz [--eval EVAL.npz] --epochs N --out OUT.tflite``."""

from __future__ import annotations

import argparse
from typing import IO, Any

from tfcompress.cli._choices import PRESERVE
from tfcompress.cli._training import add_training_arguments, run_training, training_config
from tfcompress.training.configs import QATConfig


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        "qat",
        help="quantization-aware training to a full-int8 .tflite",
        description=(
            "Fine-tune a Keras model with fake-quant ops (tfmot) and export a full-int8 .tflite. "
            "Any number of inputs and outputs: each output is fitted to its labels (the loss "
            "follows them) or, without labels, to the float model's own outputs "
            "(self-distillation); the report names each output's loss. Layers tfmot cannot "
            "quantize stay float and are listed as skipped. "
            "A threshold (--max-drop with labels, --min-agreement or --min-snr without) "
            "gates the exported .tflite against the float model: it is written either way, "
            "and the command exits 1 when the gate fails."
        ),
    )
    add_training_arguments(parser, config=QATConfig)
    parser.add_argument(
        "--preserve",
        choices=PRESERVE,
        help="keep the zeros of a pruned model or the shared weights of a clustered one",
    )
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Build the QATConfig from the flags, run QAT, write the int8 .tflite atomically, report."""
    config = training_config(args, QATConfig, preserve=args.preserve)
    from tfcompress.training.qat import qat

    return run_training(args, out, qat, config)
