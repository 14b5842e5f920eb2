"""``tfcompress export-c MODEL.tflite --out model_data``: the model as a C array for firmware."""

from __future__ import annotations

import argparse
from typing import IO, Any

from tfcompress.cli.common import add_force_flag, add_json_flag, emit_json


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand.

    Example:
        >>> parser = add_parser(argparse.ArgumentParser().add_subparsers())  # doctest: +SKIP
    """
    parser = subparsers.add_parser(
        "export-c",
        help="write a .tflite as OUT.cc/OUT.h: an aligned C array for TFLite Micro firmware",
        description="Write OUT.cc and OUT.h holding the .tflite as an alignas(16) const "
        "unsigned char array and its length, named as `xxd -i` names them "
        "(model_int8.tflite -> model_int8_tflite, model_int8_tflite_len), which is what "
        "TFLite Micro's examples include. The files compile as C++11.",
    )
    parser.add_argument("model", help=".tflite file")
    parser.add_argument(
        "--out",
        required=True,
        help="path of the two files without suffix: model_data writes model_data.cc and "
        "model_data.h",
    )
    parser.add_argument(
        "--name",
        help="the array's C identifier (default: xxd -i's name for the model file)",
    )
    add_force_flag(parser)
    add_json_flag(parser)
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Write the two files atomically and say what they hold.

    Returns:
        0; bad input raises a typed error (exit code 2, nothing written).

    Example:
        >>> from tfcompress.cli import main
        >>> main(["export-c", "model_int8.tflite", "--out", "model_data"])  # doctest: +SKIP
        0
    """
    from tfcompress.targets.mcu import export_c

    written = export_c(args.model, args.out, name=args.name, overwrite=args.force)
    if args.json:
        emit_json(out, written.to_dict())
    else:
        out.write(f"{written}\n")
    return 0
