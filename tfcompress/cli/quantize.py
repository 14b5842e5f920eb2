"""``tfcompress quantize MODEL --recipe R --data CALIB.npz --out OUT.tflite``."""

from __future__ import annotations

import argparse
import logging
from typing import IO, Any

from tfcompress.cli.common import (
    add_force_flag,
    add_json_flag,
    add_unsafe_flag,
    emit_json,
    positive_int,
    show_progress,
)
from tfcompress.report.comparison import VariantRow, comparison_table

logger = logging.getLogger(__name__)

RECIPES = ("dynamic", "float16", "int8", "int16x8", "float32")
IO_TYPES = ("float32", "int8", "uint8", "int16")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        "quantize",
        help="post-training quantization to .tflite",
        description="Quantize a Keras model or SavedModel to .tflite and measure what it costs.",
    )
    parser.add_argument("model", help=".keras, .h5 or SavedModel directory")
    parser.add_argument("--recipe", choices=RECIPES, default="int8", help="default: int8")
    parser.add_argument("--data", help="calibration samples (.npz with x, .npy, image folder)")
    parser.add_argument("--eval", dest="eval_data", help="labelled test data (.npz with x and y)")
    parser.add_argument("--out", required=True, help="output .tflite path")
    parser.add_argument("--input-type", choices=IO_TYPES, help="model input dtype")
    parser.add_argument(
        "--output-type", choices=IO_TYPES, help="model output dtype (default: --input-type)"
    )
    parser.add_argument("--samples", type=positive_int, help="calibration samples (default 200)")
    parser.add_argument(
        "--per-tensor", action="store_true", help="per-tensor weight scales (default per-channel)"
    )
    parser.add_argument(
        "--max-drop",
        type=float,
        help="with --eval: exit 1 when accuracy drops more than this fraction (0.01 = 1 point)",
    )
    parser.add_argument("--threads", type=positive_int, default=1, help="LiteRT threads for --eval")
    add_force_flag(parser)
    add_unsafe_flag(parser)
    add_json_flag(parser)
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Quantize, optionally evaluate, write the artifact atomically, report."""
    import tfcompress
    from tfcompress.errors import InvalidInputError
    from tfcompress.models import check_output_path, load_model

    if args.max_drop is not None and (args.eval_data is None or not 0 <= args.max_drop <= 1):
        raise InvalidInputError("--max-drop needs --eval and a fraction in [0, 1], e.g. 0.01.")
    inputs = [p for p in (args.model, args.data, args.eval_data) if p]
    check_output_path(args.out, overwrite=args.force, inputs=inputs)
    model = load_model(args.model, safe_mode=not args.unsafe)
    result = tfcompress.quantize(
        model,
        recipe=args.recipe,
        representative_data=args.data,
        input_type=args.input_type,
        output_type=args.output_type,
        per_channel=False if args.per_tensor else None,
        calibration_samples=args.samples,
        progress=show_progress(),
    )
    evaluation = None
    if args.eval_data:
        evaluation = tfcompress.evaluate(
            {"float32": result.reference, args.recipe: result.model},
            args.eval_data,
            threads=args.threads,
            progress=show_progress(),
        )
    saved = result.save(args.out, overwrite=args.force)
    logger.info("wrote %s (%s bytes)", saved, f"{result.size_bytes:,}")
    payload: dict[str, Any] = {
        "recipe": result.recipe.name,
        "output": str(saved),
        "size_bytes": result.size_bytes,
        "reference_size_bytes": result.reference_size_bytes,
        "size_ratio": round(result.size_ratio, 4),
        "input_type": result.recipe.input_type,
        "output_type": result.recipe.output_type,
        "per_channel": result.recipe.per_channel,
        "calibration_samples": result.calibration_samples,
        "conversion_seconds": round(result.conversion_seconds, 3),
        "warnings": list(result.warnings),
    }
    rows = [
        VariantRow("float32", result.reference_size_bytes),
        VariantRow(args.recipe, result.size_bytes),
    ]
    if evaluation is not None:
        reference, quantized = evaluation.rows
        payload |= {
            "accuracy": round(quantized.score, 6),
            "reference_accuracy": round(reference.score, 6),
            "accuracy_drop": round(evaluation.drop(quantized.name), 6),
            "eval_samples": evaluation.samples,
        }
        rows = [
            VariantRow("float32", result.reference_size_bytes, reference.score),
            VariantRow(args.recipe, result.size_bytes, quantized.score),
        ]
    passed = args.max_drop is None or payload["accuracy_drop"] <= args.max_drop
    if args.max_drop is not None:
        payload |= {"max_drop": args.max_drop, "passed": passed}
    if args.json:
        emit_json(out, payload)
    else:
        out.write(comparison_table(rows) + f"\n\nwrote {saved}\n")
    if not passed:
        logger.error(
            "accuracy dropped %.2f points, more than --max-drop %.2f; %s was still written",
            payload["accuracy_drop"] * 100,
            args.max_drop * 100,
            saved,
        )
        return 1
    return 0
