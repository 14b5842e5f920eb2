"""``tfcompress quantize MODEL --recipe R --data CALIB.npz --out OUT.tflite``."""

from __future__ import annotations

import argparse
import logging
from typing import IO, TYPE_CHECKING, Any

from tfcompress.cli.common import (
    add_force_flag,
    add_json_flag,
    add_unsafe_flag,
    emit_json,
    positive_int,
    show_progress,
)
from tfcompress.report.comparison import VariantRow, comparison_table

if TYPE_CHECKING:
    from tfcompress.bench.accuracy import Evaluation
    from tfcompress.testing.result import GateResult

logger = logging.getLogger(__name__)

RECIPES = ("dynamic", "float16", "int8", "int16x8", "float32")
IO_TYPES = ("float32", "int8", "uint8", "int16")
GATE_MODES = ("strict", "tolerant", "proven")  # tfcompress.testing.settings.GATE_MODES


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
        "--float-fallback",
        action="store_true",
        help="int8/int16x8: keep ops without an integer kernel in float (listed as float_ops)",
    )
    parser.add_argument(
        "--max-drop",
        type=_max_drop,
        metavar="FRACTION",
        help="with --eval: the accuracy gate of `tfcompress gate`; exit 1 when it fails (0.01 = "
        "1 point; the artifact is still written)",
    )
    parser.add_argument(
        "--mode",
        choices=GATE_MODES,
        help="gate mode for --max-drop, as in `tfcompress gate` (default strict): strict: "
        "measured drop <= max; tolerant: fail only when significantly above; proven: pass only "
        "when the interval's upper bound is within",
    )
    parser.add_argument("--threads", type=positive_int, default=1, help="LiteRT threads for --eval")
    add_force_flag(parser)
    add_unsafe_flag(parser)
    add_json_flag(parser)
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Quantize, optionally evaluate and gate, write the artifact atomically, report.

    Args:
        args: The parsed flags of :func:`add_parser`.
        out: Where the table or the JSON object goes (stdout).

    Returns:
        0, or 1 when the ``--max-drop`` gate failed (the artifact is written either way).

    Raises:
        InvalidInputError: ``--max-drop`` without ``--eval``, ``--mode`` without
            ``--max-drop``, or any input :func:`tfcompress.quantize` refuses.
        ConversionError: The converter rejected the model (e.g. an op without an integer
            kernel and no ``--float-fallback``).

    Example:
        >>> main(["quantize", "m.keras", "--data", "calib.npz", "--eval", "test.npz",
        ...       "--out", "m.tflite", "--max-drop", "0.01", "--mode", "tolerant"])
        ... # doctest: +SKIP
        0
    """
    import tfcompress
    from tfcompress.errors import InvalidInputError
    from tfcompress.models import check_output_path, load_model
    from tfcompress.quantization.float_ops import describe_float_ops

    if args.max_drop is not None and args.eval_data is None:
        raise InvalidInputError("--max-drop needs --eval TEST.npz (labelled data to gate on).")
    if args.mode is not None and args.max_drop is None:
        raise InvalidInputError("--mode sets the gate of --max-drop; pass --max-drop too.")
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
        float_fallback=True if args.float_fallback else None,
        progress=show_progress(),
    )
    evaluation = None
    # recipe float32 is the reference itself; two equal names would collapse into one row
    name = args.recipe if args.recipe != "float32" else "float32 (output)"
    if args.eval_data:
        evaluation = tfcompress.evaluate(
            {"float32": result.reference, name: result.model},
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
        "float_fallback": result.recipe.float_fallback,
        "float_ops": None if result.float_ops is None else list(result.float_ops),
    }
    rows = [
        VariantRow("float32", result.reference_size_bytes),
        VariantRow(name, result.size_bytes),
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
            VariantRow(name, result.size_bytes, quantized.score),
        ]
    gate = None
    if args.max_drop is not None and evaluation is not None:
        gate = _gate(evaluation, args)
        payload |= {"max_drop": args.max_drop, "mode": gate.settings.mode, "passed": gate.passed}
        payload["gate"] = gate.to_dict()
    if args.json:
        emit_json(out, payload)
    else:
        text = comparison_table(rows)
        if result.float_ops:
            text += f"\n\nstayed float: {describe_float_ops(result.float_ops)}"
        if gate is not None:
            text += f"\n\n{gate.headline()}"
        out.write(text + f"\n\nwrote {saved}\n")
    if gate is not None and not gate.passed:
        logger.error("%s; %s was still written", gate.headline(), saved)
        return 1
    return 0


def _gate(evaluation: Evaluation, args: argparse.Namespace) -> GateResult:
    """The accuracy gate of ``tfcompress gate``, judged on the outputs already evaluated.

    ``judge_outputs`` is the check behind ``check_accuracy_drop`` (the CLI gate and the pytest
    plugin); feeding it the evaluation's outputs gives the same verdict without running both
    models a second time.
    """
    from tfcompress.testing.gates import judge_outputs
    from tfcompress.testing.settings import GateSettings

    mode = {} if args.mode is None else {"mode": args.mode}  # GateSettings owns the default
    reference, quantized = evaluation.rows
    return judge_outputs(
        evaluation.labels,
        reference.outputs,
        quantized.outputs,
        settings=GateSettings(max_drop=args.max_drop, **mode),
        reference=reference.name,
        candidate=quantized.name,
        reference_backend=reference.backend,
        backend=quantized.backend,
    )


def _max_drop(text: str) -> float:
    from tfcompress.errors import InvalidInputError
    from tfcompress.testing.settings import parse_max_drop

    try:
        return parse_max_drop(text, source="--max-drop")
    except InvalidInputError as error:
        raise argparse.ArgumentTypeError(str(error)) from error
