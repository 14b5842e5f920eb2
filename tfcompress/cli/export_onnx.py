"""``tfcompress export-onnx MODEL --out M.onnx [--opset N]``: a verified tf2onnx export."""

from __future__ import annotations

import argparse
import logging
from typing import IO, Any

from tfcompress.cli.common import (
    add_custom_objects_flag,
    add_force_flag,
    add_json_flag,
    add_unsafe_flag,
    emit_json,
    load_cli_model,
)

logger = logging.getLogger(__name__)

DEFAULT_OPSET = 17  # tfcompress.targets.onnx.DEFAULT_OPSET (not imported: --help stays light)
DEFAULT_ATOL = 1e-4


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand.

    Example:
        >>> parser = add_parser(argparse.ArgumentParser().add_subparsers())  # doctest: +SKIP
    """
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
    parser.add_argument(
        "--opset",
        type=int,
        default=DEFAULT_OPSET,
        help=f"ONNX opset, 13 to 18 (default {DEFAULT_OPSET})",
    )
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
    add_force_flag(parser)
    add_unsafe_flag(parser)
    add_custom_objects_flag(parser)
    add_json_flag(parser)
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Export, verify, write atomically, report.

    Args:
        args: The parsed flags of :func:`add_parser`.
        out: Where the summary or the JSON object goes (stdout).

    Returns:
        0; bad input or a failed export raises a typed error (exit code 2, nothing written).

    Raises:
        ConversionError: tf2onnx cannot convert an op (named), or the export differs from
            Keras by more than ``--atol`` (the output and the difference named).
        InvalidInputError: An opset outside 13-18, an existing ``--out`` without ``--force``.
        InvalidDataError: ``--data`` that does not fit the model.

    Example:
        >>> from tfcompress.cli import main
        >>> main(["export-onnx", "model.keras", "--out", "model.onnx"])  # doctest: +SKIP
        0
    """
    from tfcompress.models import check_output_path
    from tfcompress.targets.onnx import export_onnx

    inputs = [p for p in (args.model, args.data) if p]
    check_output_path(args.out, overwrite=args.force, inputs=inputs)
    model = load_cli_model(args)
    export = export_onnx(
        model,
        args.out,
        opset=args.opset,
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
