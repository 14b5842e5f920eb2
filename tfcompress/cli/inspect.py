"""``tfcompress inspect MODEL``: inputs, outputs, ops or layers, and weights of any model."""

from __future__ import annotations

import argparse
from typing import IO, Any

from tfcompress.cli.common import (
    add_custom_objects_flag,
    add_json_flag,
    add_unsafe_flag,
    argument_type,
    emit_json,
    load_cli_model,
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand.

    Example:
        >>> parser = add_parser(argparse.ArgumentParser().add_subparsers())  # doctest: +SKIP
    """
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
    parser.add_argument(
        "--batch-dim",
        action="append",
        type=argument_type("tfcompress.models.feeding:parse_batch_dim"),
        default=[],
        metavar="NAME=DIM",
        help="show input NAME fed with its batch at dimension DIM (as benchmark/gate "
        "--batch-dim would feed it); repeat per input",
    )
    add_unsafe_flag(parser)
    add_custom_objects_flag(parser)
    add_json_flag(parser)
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Print the description (the human report, or one JSON object with ``--json``).

    Returns:
        0; bad input raises a typed error (exit code 2).

    Example:
        >>> from tfcompress.cli import main
        >>> main(["inspect", "detector.tflite", "--json"])  # doctest: +SKIP
        0
    """
    from tfcompress.inspection.api import inspect_model

    info = inspect_model(load_cli_model(args), batch_dims=dict(args.batch_dim))
    if args.json:
        emit_json(out, info.to_dict())
    else:
        out.write(f"{info}\n")
    return 0
