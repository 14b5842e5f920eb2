"""``tfcompress export-onnx MODEL --out M.onnx [--opset N]``: a verified tf2onnx export."""

from __future__ import annotations

import argparse
import logging
from typing import IO, Any

from tfcompress.cli._options import add_config_flags, config_values
from tfcompress.cli.common import add_shared_flags, emit_json, load_cli_model

logger = logging.getLogger(__name__)

_OPSET = ("quantization.onnx_ptq", "OnnxRecipe", "opset")
DEFAULT_ATOL = 1e-4


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        "export-onnx",
        help="export a Keras model to .onnx (tf2onnx), verified against Keras",
        description="Convert a Keras model to ONNX with tf2onnx, keeping its input and output "
        "names, then run the export on ONNX Runtime next to Keras: every output must be within "
        "--atol (max abs) on --data samples or seeded random inputs, else nothing is written. "
        "An op tf2onnx cannot convert is an error that names it.",
    )
    parser.add_argument("model", help=".keras or .h5 file")
    parser.add_argument("--out", required=True, help="output .onnx path")
    add_config_flags(parser, *_OPSET)  # the declaration quantize --format onnx reads too
    parser.add_argument(
        "--data",
        help="samples to verify on (.npz with x or one array per input name, .npy, image "
        "folder); default: seeded random inputs",
    )
    parser.add_argument(
        "--atol",
        type=float,
        default=DEFAULT_ATOL,
        help="largest max-abs difference to Keras allowed on any output "
        f"(default {DEFAULT_ATOL:g})",
    )
    add_shared_flags(parser, "force", "unsafe", "custom_objects", "json")
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Export, verify, write atomically, report.

    Raises:
        ConversionError: tf2onnx cannot convert an op (named), or the export differs from
            Keras by more than ``--atol`` (the output and the difference named).
        InvalidInputError: An opset outside 13-18, an existing ``--out`` without ``--force``.
        InvalidDataError: ``--data`` that does not fit the model.
    """
    from tfcompress.models import check_output_path
    from tfcompress.targets.onnx import export_onnx

    inputs = [p for p in (args.model, args.data) if p]
    check_output_path(args.out, overwrite=args.force, inputs=inputs)
    model = load_cli_model(args)
    export = export_onnx(
        model,
        args.out,
        **{k: v for k, v in config_values(args, _OPSET[2:]).items() if v is not None},
        sample_data=args.data,
        atol=args.atol,
        overwrite=args.force,
    )
    logger.info("wrote %s (%s bytes)", export.path, f"{export.size_bytes:,}")
    if args.json:
        payload = export.to_dict()
        payload["output"] = payload.pop("path")
        emit_json(out, payload)
    else:
        out.write(f"{export}\n\nwrote {export.path}\n")
    return 0
