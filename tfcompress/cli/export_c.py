"""``tfcompress export-c MODEL.tflite --out model_data``: the model as firmware source."""

from __future__ import annotations

import argparse
from typing import IO, Any

from tfcompress.cli.common import add_shared_flags, emit, parse_size


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        "export-c",
        help="write a .tflite as firmware source: OUT.cc/OUT.h (an aligned C array), "
        "OUT_ops.h (its op resolver) and OUT_main.cc (one inference)",
        description="Write OUT.cc and OUT.h holding the .tflite as an alignas(16) const "
        "unsigned char array and its length, named as `xxd -i` names them "
        "(model_int8.tflite -> model_int8_tflite, model_int8_tflite_len), which is what "
        "TFLite Micro's examples include; OUT_ops.h, a tflite::MicroMutableOpResolver<N> "
        "with exactly the model's Add...() calls; and OUT_main.cc, one inference with the "
        "tensor arena measured with TFLM (+10%%). All are written or none. The files compile "
        "as C++11.",
    )
    parser.add_argument("model", help=".tflite file")
    parser.add_argument(
        "--out",
        required=True,
        help="path of the files without suffix: model_data writes model_data.cc, "
        "model_data.h, model_data_ops.h and model_data_main.cc (letters, digits, _ . + -)",
    )
    parser.add_argument(
        "--name",
        help="the array's C identifier (default: xxd -i's name for the model file)",
    )
    parser.add_argument(
        "--arena",
        type=parse_size,
        metavar="SIZE",
        help="the tensor arena OUT_main.cc declares, e.g. 40KB (default: measured with "
        "TFLM, the smallest that allocates + 10%%; needs tflite-micro)",
    )
    parser.add_argument(
        "--lut",
        action="store_true",
        help="store int8 weights with few values per channel (a clustered model) as look-up "
        "tables TFLM's DECODE op expands: less flash, a larger arena (both printed); TFLM's "
        "outputs are compared with the uncompressed file's first. Needs tflite-micro",
    )
    add_shared_flags(parser, "timeout", "force", "json")
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Write the files all or nothing and say what they hold."""
    from tfcompress.targets.mcu import export_c

    written = export_c(
        args.model,
        args.out,
        name=args.name,
        overwrite=args.force,
        arena=args.arena,
        timeout_s=args.timeout,
        lut=args.lut,
    )
    emit(out, written, args.json)
    return 0
