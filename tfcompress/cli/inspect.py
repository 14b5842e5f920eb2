"""``tfcompress inspect MODEL``: tensors, ops and size breakdown of a model."""

from __future__ import annotations

import argparse
from typing import IO, Any

from tfcompress.cli.common import add_json_flag, add_unsafe_flag, emit_json


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        "inspect",
        help="show a model's inputs, ops and size breakdown",
        description="Describe a .tflite (tensors, quantization, op histogram, weights vs graph "
        "bytes) or a Keras model (layers, parameters, input signature).",
    )
    parser.add_argument("model", help=".tflite, .keras, .h5 or SavedModel directory")
    add_unsafe_flag(parser)
    add_json_flag(parser)
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Print the description."""
    from tfcompress.models import load_model
    from tfcompress.models.inspect import inspect_model

    info = inspect_model(load_model(args.model, safe_mode=not args.unsafe))
    if args.json:
        emit_json(out, info.to_dict())
    else:
        out.write(f"{info}\n")
    return 0
