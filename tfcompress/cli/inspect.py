"""``tfcompress inspect MODEL``: inputs, outputs, ops or layers, and weights of any model."""

from __future__ import annotations

import argparse
from typing import IO, Any

from tfcompress.cli.common import add_batch_dim_flag, add_shared_flags, emit, load_cli_model


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        "inspect",
        help="show a model's inputs, outputs, ops and where its bytes go",
        description="Describe a model of any format. Every input and output (N = its batch "
        "dimension, wherever the signature puts it; ? = another unknown dimension; scalars and "
        "a static batch are named, as benchmark and gate feed them) and the weights by dtype, "
        "plus: for a .tflite the stored "
        "dtype and quantization of each input/output, the op histogram (custom ops named by "
        "their code) and weights vs graph bytes; for an .onnx the IR version, opsets, producer "
        "and op histogram; for a Keras model its layers and parameters; for a SavedModel its "
        "serving signature and variables size.",
    )
    parser.add_argument("model", help=".tflite, .onnx, .keras, .h5 file or SavedModel directory")
    add_batch_dim_flag(
        parser,
        "show input NAME fed with its batch at dimension DIM (as benchmark/gate "
        "--batch-dim would feed it); repeat per input",
    )
    add_shared_flags(parser, "unsafe", "custom_objects", "json")
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Print the description (the human report, or one JSON object with ``--json``)."""
    from tfcompress.inspection.api import inspect_model

    info = inspect_model(load_cli_model(args), batch_dims=dict(args.batch_dim))
    emit(out, info, args.json)
    return 0
