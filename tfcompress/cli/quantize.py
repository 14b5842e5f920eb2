"""``tfcompress quantize MODEL --recipe R --data CALIB.npz --out OUT.tflite`` (or ``.onnx``)."""

from __future__ import annotations

import argparse
import logging
import math
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tfcompress.cli._gating import add_gate_options, flat, gate_requested, threshold_options
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
    from tfcompress.testing.judge import Check
    from tfcompress.testing.result import GateReport

logger = logging.getLogger(__name__)

RECIPES = ("dynamic", "float16", "int8", "int16x8", "float32")
IO_TYPES = ("float32", "int8", "uint8", "int16")
FORMATS = ("tflite", "onnx")
CALIBRATION_METHODS = ("minmax", "entropy", "percentile")
# The method names, for --method's help; tfcompress.quantization.methods.catalog owns them.
METHOD_NAMES = ("equalize", "adaround", "bias-correction", "percentile-ranges", "mse-ranges")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        "quantize",
        help="post-training quantization to .tflite (or .onnx with --format onnx)",
        description="Quantize a Keras model or SavedModel to .tflite (LiteRT) or .onnx (ONNX "
        "Runtime) and measure what it costs.",
    )
    parser.add_argument(
        "model", help=".keras, .h5 or SavedModel directory (or a float .onnx with --format onnx)"
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="tflite",
        help="tflite (default: TFLite converter, runs on LiteRT) or onnx (tf2onnx export "
        "verified against Keras, then ONNX Runtime's quantizers; int16x8 is .tflite only)",
    )
    parser.add_argument("--recipe", choices=RECIPES, default="int8", help="default: int8")
    parser.add_argument("--data", help="calibration samples (.npz with x, .npy, image folder)")
    parser.add_argument(
        "--eval",
        dest="eval_data",
        help="test data (.npz with x, or one array per input name; labels y or y_<output>), "
        "checked against the model before converting",
    )
    parser.add_argument("--out", required=True, help="output .tflite (.onnx with --format onnx)")
    parser.add_argument("--input-type", choices=IO_TYPES, help="model input dtype (.tflite)")
    parser.add_argument(
        "--output-type",
        choices=IO_TYPES,
        help="model output dtype (default: --input-type; .tflite)",
    )
    parser.add_argument("--samples", type=positive_int, help="calibration samples (default 200)")
    parser.add_argument(
        "--calibration",
        choices=CALIBRATION_METHODS,
        help="--format onnx, int8: ONNX Runtime's calibration method (default minmax)",
    )
    parser.add_argument(
        "--opset", type=positive_int, help="--format onnx: ONNX opset of the export (default 17)"
    )
    parser.add_argument(
        "--per-tensor", action="store_true", help="per-tensor weight scales (default per-channel)"
    )
    parser.add_argument(
        "--float-fallback",
        action="store_true",
        help="int8/int16x8 .tflite: keep ops without an integer kernel in float (listed as "
        "float_ops)",
    )
    parser.add_argument(
        "--float-node",
        dest="float_nodes",
        action="append",
        metavar="NODE",
        help="int8 .tflite: keep this op output in float (repeatable; names as rank_layers "
        "reports them, see docs/quantization.md#selective-quantization)",
    )
    parser.add_argument(
        "--method",
        metavar="METHODS",
        help="int8 .tflite: post-training methods tried against the converter's plain int8, "
        "the better kept (never worse on any output): auto, none, or names separated by "
        f"commas ({', '.join(METHOD_NAMES)}); default: auto with --eval (scored on it), "
        "else none (see docs/quantization.md#beyond-minmax-int8)",
    )
    parser.add_argument(
        "--target",
        choices=("edgetpu",),
        help="edgetpu: int8 with uint8 I/O (int8 with --input-type int8) at a static batch of 1, "
        "then the Edge TPU linter, and edgetpu_compiler where it is installed (the compiled "
        "model is written next to --out as *_edgetpu.tflite)",
    )
    parser.add_argument(
        "--compiler",
        metavar="PATH",
        help="--target edgetpu: the edgetpu_compiler to run (default: the one on PATH, if any)",
    )
    add_gate_options(parser, default_mode=None)
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=1,
        help="threads for --eval (LiteRT, or ONNX Runtime with --format onnx)",
    )
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
        InvalidInputError: A gate threshold without ``--eval``, ``--mode`` without a
            threshold, or any input :func:`tfcompress.quantize` refuses.
        InvalidDataError: ``--eval`` data that does not fit the model (checked before
            converting).
        ConversionError: The converter rejected the model (e.g. an op without an integer
            kernel and no ``--float-fallback``), or the ONNX export failed its check.

    Example:
        >>> main(["quantize", "m.keras", "--data", "calib.npz", "--eval", "test.npz",
        ...       "--out", "m.tflite", "--max-drop", "0.01", "--mode", "tolerant"])
        ... # doctest: +SKIP
        0
    """
    import tfcompress
    from tfcompress.bench.paired import read_for_reference
    from tfcompress.errors import InvalidInputError
    from tfcompress.models import check_output_path, load_model
    from tfcompress.models.saving import write_text_atomic
    from tfcompress.quantization.float_ops import describe_float_ops
    from tfcompress.testing.judge import build_checks

    gating = gate_requested(args)
    if gating and args.eval_data is None:
        raise InvalidInputError(
            "--max-drop (like every gate threshold) needs --eval TEST.npz, the data to gate on."
        )
    if args.mode is not None and not gating:
        raise InvalidInputError("--mode sets the gate of --max-drop; pass --max-drop too.")
    if (args.output or args.metric) and args.eval_data is None:
        raise InvalidInputError("--output and --metric choose what --eval scores; pass --eval.")
    _check_format(args)
    checks = build_checks(flat(args.output), flat(args.metric), **threshold_options(args))
    inputs = [p for p in (args.model, args.data, args.eval_data) if p]
    check_output_path(args.out, overwrite=args.force, inputs=inputs)
    compiled_out = _compiled_output(args, inputs)
    model = load_model(args.model, safe_mode=not args.unsafe)
    # The test data is matched to the model now: a mismatch costs nothing, not a conversion.
    eval_set = read_for_reference(args.eval_data, model, "--eval data") if args.eval_data else None
    methods_options = _methods_options(args, eval_set)
    result = tfcompress.quantize(
        model,
        format=args.format,
        recipe=args.recipe,
        representative_data=args.data,
        input_type=args.input_type,
        output_type=args.output_type,
        per_channel=False if args.per_tensor else None,
        calibration_samples=args.samples,
        float_fallback=True if args.float_fallback else None,
        float_nodes=args.float_nodes,
        **methods_options,
        calibration_method=args.calibration,
        opset=args.opset,
        target=args.target,
        compiler=args.compiler,
        progress=show_progress(),
    )
    evaluation = None
    # recipe float32 is the reference itself; two equal names would collapse into one row
    name = args.recipe if args.recipe != "float32" else "float32 (output)"
    report = getattr(result, "methods", None)
    if report is not None and report.kept:
        name = f"{name} [{'+'.join(report.kept)}]"
    if eval_set is not None:
        evaluation = tfcompress.evaluate(
            {"float32": result.reference, name: result.model},
            eval_set,
            metric=flat(args.metric) or None,
            outputs=flat(args.output) or None,
            threads=args.threads,
            progress=show_progress(),
        )
    # Judged before writing: an option the gate refuses must not leave a file behind.
    gate = _gate(evaluation, checks, args) if gating and evaluation is not None else None
    saved = result.save(args.out, overwrite=args.force)
    logger.info("wrote %s (%s bytes)", saved, f"{result.size_bytes:,}")
    verdict = getattr(result, "edgetpu", None)
    compiled = None
    if verdict is not None and verdict.compiler is not None and compiled_out is not None:
        compiled = verdict.save_compiled(compiled_out, overwrite=args.force)
        # The compiler's own log beside its model, as edgetpu_compiler leaves it: the
        # edgetpu benchmark backend reads it to count the ops inside the custom op.
        write_text_atomic(
            compiled.with_suffix(".log"), verdict.compiler.log.text, overwrite=args.force
        )
        logger.info("wrote %s (%s bytes)", compiled, f"{len(verdict.compiler.compiled):,}")
    payload: dict[str, Any] = {
        "format": result.format,
        "recipe": result.recipe.name,
        "output": str(saved),
        "size_bytes": result.size_bytes,
        "reference_size_bytes": result.reference_size_bytes,
        "size_ratio": round(result.size_ratio, 4),
        "input_type": getattr(result.recipe, "input_type", "float32"),
        "output_type": getattr(result.recipe, "output_type", "float32"),
        "per_channel": result.recipe.per_channel,
        "calibration_samples": result.calibration_samples,
        "conversion_seconds": round(result.conversion_seconds, 3),
        "warnings": list(result.warnings),
        "float_fallback": getattr(result.recipe, "float_fallback", False),
        "float_ops": None if result.float_ops is None else list(result.float_ops),
        "float_nodes": list(getattr(result, "float_nodes", ())),
        "methods": None if report is None else report.to_dict(),
    }
    if verdict is not None:
        payload["edgetpu"] = verdict.to_dict()
        payload["compiled_output"] = None if compiled is None else str(compiled)
    if result.format == "onnx":
        export_check = getattr(result, "export_check", None)
        payload |= {
            "calibration_method": getattr(result.recipe, "calibration_method", None),
            "opset": getattr(result.recipe, "opset", None),
            "export_check": None if export_check is None else export_check.to_dict(),
        }
    rows = [
        VariantRow("float32", result.reference_size_bytes),
        VariantRow(name, result.size_bytes),
    ]
    if evaluation is not None:
        reference, quantized = evaluation.rows
        payload |= {
            "metric": evaluation.metric,
            "accuracy": _rounded(quantized.score),
            "reference_accuracy": _rounded(reference.score),
            "accuracy_drop": _rounded(evaluation.drop(quantized.name)),
            "eval_samples": evaluation.samples,
            "evaluation": evaluation.to_dict(),
        }
        if [c.metric for c in evaluation.columns] == ["accuracy"]:  # the table's own column
            rows = [
                VariantRow("float32", result.reference_size_bytes, reference.score),
                VariantRow(name, result.size_bytes, quantized.score),
            ]
    if gate is not None:
        payload |= {"max_drop": args.max_drop, "mode": gate.settings.mode, "passed": gate.passed}
        payload["gate"] = gate.to_dict()
    if args.json:
        emit_json(out, payload)
    else:
        text = comparison_table(rows)
        if evaluation is not None and [c.metric for c in evaluation.columns] != ["accuracy"]:
            text += f"\n\n{evaluation}"
        if report is not None:
            text += f"\n\n{report}"
        if result.float_ops:
            text += f"\n\nstayed float: {describe_float_ops(result.float_ops)}"
        if verdict is not None:
            text += f"\n\n{verdict}"
        if gate is not None:
            text += f"\n\n{gate.headline()}"
        wrote = str(saved) if compiled is None else f"{saved} and {compiled}"
        out.write(text + f"\n\nwrote {wrote}\n")
    if gate is not None and not gate.passed:
        logger.error("%s; %s was still written", gate.headline(), saved)
        return 1
    return 0


def _gate(
    evaluation: Evaluation, checks: tuple[Check, ...], args: argparse.Namespace
) -> GateReport:
    """The gate of ``tfcompress gate``, judged on the outputs already evaluated.

    ``judge_outputs_by_name`` is the check behind ``check_gate`` (the CLI gate and the pytest
    plugin); feeding it the evaluation's outputs gives the same verdicts without running both
    models a second time.
    """
    from tfcompress.testing.judge import judge_outputs_by_name
    from tfcompress.testing.settings import GateSettings

    mode = {} if args.mode is None else {"mode": args.mode}  # GateSettings owns the default
    reference, quantized = evaluation.rows
    return judge_outputs_by_name(
        evaluation.labels,
        reference.outputs,
        quantized.outputs,
        checks=checks,
        settings=GateSettings(**mode),
        reference=reference.name,
        candidate=quantized.name,
        reference_backend=reference.backend,
        backend=quantized.backend,
    )


def _methods_options(args: argparse.Namespace, eval_set: Any) -> dict[str, Any]:
    """``methods`` and ``eval_data`` for :func:`tfcompress.quantize`.

    ``--eval`` feeds the int8 methods' comparison only where there are methods to compare
    (int8 ``.tflite``); other recipes and ONNX are evaluated after, as before.

    Raises:
        InvalidInputError: ``--method`` with ``--format onnx`` or a recipe other than int8.
    """
    from tfcompress.errors import InvalidInputError

    int8_tflite = args.format == "tflite" and args.recipe == "int8"
    if args.method is not None and not int8_tflite:
        where = "--format onnx" if args.format == "onnx" else f"--recipe {args.recipe}"
        raise InvalidInputError(
            f"--method applies to int8 .tflite files, not {where}; drop --method."
        )
    if not int8_tflite:
        return {}
    options: dict[str, Any] = {"methods": args.method}
    if eval_set is not None and args.method != "none":
        options["eval_data"] = eval_set
    return options


def _compiled_output(args: argparse.Namespace, inputs: list[str]) -> Path | None:
    """Where the compiled ``*_edgetpu.tflite`` goes, checked before any work; None if no compiler.

    Raises:
        InvalidInputError: ``--compiler`` without ``--target edgetpu``.
        BackendUnavailableError: ``--compiler`` is not an executable.
        OutputExistsError: The compiled file exists and ``--force`` was not given.
    """
    from tfcompress.models import check_output_path
    from tfcompress.targets.edgetpu.compiler import find_compiler
    from tfcompress.targets.edgetpu.target import check_target

    check_target(args.target, compiler=args.compiler)
    if args.target != "edgetpu" or find_compiler(args.compiler) is None:
        return None
    out = Path(args.out)
    compiled = out.with_name(f"{out.stem}_edgetpu{out.suffix or '.tflite'}")
    check_output_path(compiled, overwrite=args.force, inputs=inputs)
    check_output_path(compiled.with_suffix(".log"), overwrite=args.force, inputs=inputs)
    return compiled


def _check_format(args: argparse.Namespace) -> None:
    """Refuse an output name that says the other format, and ONNX-only flags on .tflite."""
    from tfcompress.errors import InvalidInputError

    suffix = str(args.out).lower().rsplit(".", 1)[-1] if "." in str(args.out) else ""
    other = {"tflite": "onnx", "onnx": "tflite"}[args.format]
    if suffix == other:
        raise InvalidInputError(
            f"--out {args.out} names a .{other} file but --format is {args.format}; pass "
            f"--format {other}, or name the output .{args.format}."
        )
    if args.format == "onnx":
        from tfcompress.quantization.onnx_ptq import OnnxRecipe

        OnnxRecipe(args.recipe)  # int16x8 and the like are refused before any work
    else:
        for flag, value in (("--calibration", args.calibration), ("--opset", args.opset)):
            if value is not None:
                raise InvalidInputError(
                    f"{flag} applies to --format onnx (ONNX Runtime); the TFLite converter "
                    "calibrates min-max ranges and has no opset."
                )


def _rounded(value: float) -> float | None:
    return round(value, 6) if math.isfinite(value) else None
