"""``tfcompress quantize MODEL --recipe R --data CALIB.npz --out OUT.tflite`` (or ``.onnx``)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tfcompress.cli._choices import (
    CALIBRATION_METHODS,
    DEFAULT_CALIBRATION_SAMPLES,
    ENGINES,
    FORMATS,
    IO_TYPES,
    METHODS,
    RECIPES,
)
from tfcompress.cli._gating import add_gate_options, flat, gate_requested, threshold_options
from tfcompress.cli._options import add_config_flags
from tfcompress.cli._targets import add_target_arguments, target_options
from tfcompress.cli.common import (
    add_custom_objects_flag,
    add_feeding_flags,
    add_force_flag,
    add_json_flag,
    add_timeout_flag,
    add_unsafe_flag,
    emit_json,
    feeding_options,
    load_cli_model,
    positive_int,
    show_progress,
)

if TYPE_CHECKING:
    from tfcompress.bench.accuracy import Evaluation
    from tfcompress.quantization.artifact import QuantizedArtifact
    from tfcompress.quantization.config import PTQConfig
    from tfcompress.testing.judge import Check
    from tfcompress.testing.report import GateReport

logger = logging.getLogger(__name__)

NOT_CHECKED = (
    "nothing was checked: without --eval TEST.npz the artifact's outputs were never compared "
    "with the float model's"
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        "quantize",
        help="post-training quantization to .tflite (or .onnx with --format onnx)",
        description="Quantize a Keras model, a SavedModel or a float .tflite to .tflite "
        "(LiteRT), or to .onnx (ONNX Runtime), and measure what it costs.",
    )
    parser.add_argument(
        "model",
        nargs="?",
        help=".keras, .h5, SavedModel directory, float .tflite or float .onnx",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        help="tflite (TFLite converter, runs on LiteRT) or onnx (tf2onnx export verified "
        "against Keras, then ONNX Runtime's quantizers; int16x8 is .tflite only); default: "
        "onnx for an .onnx MODEL or --out, else tflite",
    )
    parser.add_argument(
        "--recipe",
        choices=RECIPES,
        default=None,
        help="default: int8, or the target's own (float16 for --target gpu)",
    )
    parser.add_argument(
        "--list-recipes",
        action="store_true",
        help="list the recipes with the engines that make them, and exit",
    )
    parser.add_argument(
        "--engine",
        metavar="{" + ",".join(ENGINES) + "}",  # the config checks it, as the keyword's
        help="converter (TFLite converter; default for Keras/SavedModel) or litert-quantizer "
        "(LiteRT Quantizer; default for a .tflite and the int4 recipes)",
    )
    parser.add_argument(
        "--rule",
        dest="rules",
        action="append",
        metavar="RULE",
        help="per-op rule, repeatable, later ones win: PATTERN=MODE or OP_TYPE:PATTERN=MODE "
        "(MODE: float, int8, int16, weights, dynamic), or a JSON object with pattern, "
        "op_type, mode, weight_bits, granularity, algorithm (see docs/quantization.md#rules)",
    )
    parser.add_argument(
        "--block-size",
        type=int,
        choices=(32, 64, 128),
        help="litert-quantizer, dynamic/int4 recipes: blockwise weight scales",
    )
    parser.add_argument(
        "--layer-errors",
        action="store_true",
        help="report SNR, cosine, RMSE and max abs of every quantized tensor vs float "
        "(on up to 64 --data samples), worst first",
    )
    parser.add_argument("--data", help="calibration samples (.npz with x, .npy, image folder)")
    parser.add_argument(
        "--eval",
        dest="eval_data",
        help="test data (.npz with x, or one array per input name; labels y or y_<output>), "
        "checked against the model before converting",
    )
    parser.add_argument("--out", help="output .tflite (.onnx with --format onnx); required")
    parser.add_argument("--input-type", choices=IO_TYPES, help="model input dtype (.tflite)")
    parser.add_argument(
        "--output-type",
        choices=IO_TYPES,
        help="model output dtype (default: --input-type; .tflite)",
    )
    parser.add_argument(
        "--calibration-samples",
        type=int,  # the recipe checks the count, as it checks the keyword's
        metavar="N",
        help=f"calibration samples (default {DEFAULT_CALIBRATION_SAMPLES})",
    )
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
        "--integer-only",
        action="store_true",
        help="int8/int16x8 .tflite: refuse a model with ops that have no integer kernel "
        "(Edge TPU, microcontrollers) instead of keeping them float, the converter's default",
    )
    parser.add_argument(
        "--static-batch",
        type=int,  # the recipe checks it, as it checks the keyword's
        metavar="N",
        help=".tflite: a static batch dimension in the file (e.g. 1; RNNs whose conversion "
        "needs one)",
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
        help="int8 .tflite: post-training methods tried against the converter's plain int8 "
        "(scored on --eval): auto, none, or names separated by commas "
        f"({', '.join(METHODS)}). Kept: with a gate (--min-snr, --max-drop...), among those "
        "that pass it the smallest, then the largest margin on the weakest output; without, "
        "the best weakest output; plain int8 wins ties. Default: none (the converter's int8); "
        "with --eval and a gate, auto runs only if plain int8 fails the gate. auto, asked "
        "for or so started, makes the candidates by expected payoff per second and skips, "
        "unmade and said, those that would take it past 1.5x plain int8's seconds (and "
        "those that need a Keras model, on a SavedModel); named, methods are always "
        "made, or refused where they cannot run "
        "(see docs/quantization.md#beyond-minmax-int8)",
    )
    add_config_flags(parser, "quantization.config", "PTQConfig", "seed")
    add_target_arguments(
        parser,
        help="the device the artifact is for; its rules shape the recipe and its check judges "
        "the result. edgetpu: int8 with uint8 I/O (int8 with --input-type int8) at a static "
        "batch of 1, then the Edge TPU linter, and edgetpu_compiler where it is installed (the "
        "compiled model is written next to --out as *_edgetpu.tflite). gpu: float16 unless "
        "--recipe says (float32, int8) at a static batch (1 unless --static-batch), then "
        "compiled on the GPU where LiteRT finds one, checked statically otherwise; exit 1 "
        "when the file would not run whole on a GPU",
    )
    add_gate_options(parser)
    add_feeding_flags(parser)  # --data and --eval read in the model's layout, as benchmark
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=1,
        help="threads for --eval (LiteRT, or ONNX Runtime with --format onnx)",
    )
    add_force_flag(parser)
    add_unsafe_flag(parser)
    add_timeout_flag(parser)
    add_custom_objects_flag(parser)
    add_json_flag(parser)
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Quantize, optionally evaluate and gate, write the artifact atomically, report.

    The flags that decide the artifact become one
    :class:`~tfcompress.quantization.config.PTQConfig` (:func:`ptq_config`), checked before
    the model is read; ``--json`` prints ``result.to_dict()`` (``config`` among its keys)
    with what the command adds: ``output``, ``checked``, the evaluation and the gate.

    Args:
        args: The parsed flags of :func:`add_parser`.
        out: Where the table or the JSON object goes (stdout).

    Returns:
        0, or 1 when the ``--max-drop`` gate or the target's check failed (``--target
        gpu``: a file that would not run whole on a GPU); the artifact is written either way.

    Raises:
        InvalidInputError: A gate threshold without ``--eval``, ``--mode`` without a
            threshold, or any option the config or :func:`tfcompress.quantize` refuses.
        InvalidDataError: ``--eval`` data that does not fit the model (checked before
            converting).
        UnsupportedModelError: The model is a ``.tflite`` (refused before reading data).
        ConversionError: The converter rejected the model (e.g. an op without an integer
            kernel with ``--integer-only``), or the ONNX export failed its check.

    Example:
        >>> main(["quantize", "m.keras", "--data", "calib.npz", "--eval", "test.npz",
        ...       "--out", "m.tflite", "--max-drop", "0.01", "--mode", "tolerant"])
        ... # doctest: +SKIP
        0
    """
    from tfcompress.bench.paired import read_for_reference
    from tfcompress.cli._quantize_output import evaluation_fields, quantize_text, recipes_table
    from tfcompress.models import check_output_path
    from tfcompress.quantization.converter import warm_converter
    from tfcompress.quantization.ptq import quantize
    from tfcompress.testing.judge import build_checks

    if args.list_recipes:
        out.write(recipes_table() + "\n")
        return 0
    _check_usage(args)
    config = ptq_config(args)  # every option checked before any file is touched
    if config.format == "tflite":  # the converter's child starts: a SavedModel is read there
        warm_converter(args.model)
    checks = build_checks(flat(args.output), flat(args.metric), **threshold_options(args))
    inputs = [p for p in (args.model, args.data, args.eval_data) if p]
    check_output_path(args.out, overwrite=args.force, inputs=inputs)
    side_outputs = _side_outputs(args, config, inputs)
    model = load_cli_model(args)
    _check_engine_for(model, config)
    # The test data is matched to the model now: a mismatch costs nothing, not a conversion.
    eval_set = (
        read_for_reference(args.eval_data, model, "--eval data", **feeding_options(args))
        if args.eval_data
        else None
    )
    result = quantize(
        model,
        config=config,
        representative_data=args.data,
        eval_data=eval_set if _methods_score_on_eval(config, args, model) else None,
        layer_errors=args.layer_errors,
        progress=show_progress(),
        gate=_methods_gate(args, config, model),
    )
    name = _row_name(result)
    evaluation = _evaluate(result, name, eval_set, args)
    # Judged before writing: an option the gate refuses must not leave a file behind.
    gate = (
        _gate(evaluation, checks, args) if evaluation is not None and gate_requested(args) else None
    )
    collapsed = _collapse(evaluation)
    saved = result.save(args.out, overwrite=args.force)
    logger.info("wrote %s (%s bytes)", saved, f"{result.size_bytes:,}")
    beside = _save_beside(result, saved, side_outputs, args.force)
    failure = _target_failure(result, config)
    payload = {
        **result.to_dict(),
        "output": str(saved),
        "warnings": [*result.warnings, *collapsed],
        "checked": evaluation is not None,
        **beside,
        **evaluation_fields(evaluation, gate, args),
        **({} if config.target is None else {"target_failure": failure}),
    }
    if args.json:
        emit_json(out, payload)
    else:
        out.write(quantize_text(result, name, evaluation, gate, saved, beside) + "\n")
    if failure is not None:
        logger.error("%s; %s was still written", failure, saved)
    if gate is not None and not gate.passed:
        logger.error("%s; %s was still written", gate.headline(), saved)
        return 1
    return 1 if failure is not None else 0


def _target_failure(result: QuantizedArtifact, config: PTQConfig) -> str | None:
    """The target's check failed: one line with the fix (``Target.failure``), else None."""
    from tfcompress.targets.base import get_target

    if config.target is None:
        return None
    return get_target(config.target).failure(getattr(result, "target_verdict", None))


def ptq_config(args: argparse.Namespace) -> PTQConfig:
    """The :class:`~tfcompress.quantization.config.PTQConfig` the flags describe.

    The flags are passed as they were given: the config refuses a bad value with the
    message the keyword and a replayed report get (``--samples 0``, ``--engine tvm``).

    Raises:
        InvalidInputError: What the config refuses; an unparseable ``--rule``.

    Example:
        >>> ptq_config(build_parser().parse_args(["quantize", "m.keras",
        ...     "--calibration-samples", "8"])).recipe.calibration_samples  # doctest: +SKIP
        8
    """
    from tfcompress.quantization.config import PTQConfig

    return PTQConfig.from_options(
        format=args.format,
        recipe=args.recipe,
        input_type=args.input_type,
        output_type=args.output_type,
        per_channel=False if args.per_tensor else None,
        calibration_samples=args.calibration_samples,
        integer_only=True if args.integer_only else None,
        static_batch=args.static_batch,
        float_nodes=args.float_nodes,
        rules=None if not args.rules else [parse_rule(text) for text in args.rules],
        block_size=args.block_size,
        engine=args.engine,
        methods=args.method,
        calibration_method=args.calibration,
        opset=args.opset,
        target=args.target,
        target_options=target_options(args),
        seed=args.seed,
        **feeding_options(args),
    )


def _check_usage(args: argparse.Namespace) -> None:
    """Refuse a command line missing what it needs, or whose flags contradict each other.

    Raises:
        InvalidInputError: No MODEL or ``--out``; a gate flag without ``--eval`` or without a
            threshold; an ``--out`` named for the other format.
    """
    from tfcompress.errors import InvalidInputError

    if args.model is None or args.out is None:
        missing = "MODEL" if args.model is None else "--out OUT"
        raise InvalidInputError(
            f"quantize needs {missing}: tfcompress quantize MODEL --out OUT.tflite "
            "(or --list-recipes)."
        )
    onnx_in = str(args.model).lower().endswith(".onnx")
    if onnx_in and not str(args.out).lower().endswith(".onnx") and args.format != "onnx":
        raise InvalidInputError(
            f"{args.model} is an ONNX model, which quantize writes as an .onnx (ONNX Runtime): "
            "name --out with .onnx."
        )
    if args.format is None:  # an .onnx in or out says which format is meant
        onnx_out = str(args.out).lower().endswith(".onnx")
        args.format = "onnx" if onnx_in or onnx_out else "tflite"
    gating = gate_requested(args)
    if gating and args.eval_data is None:
        raise InvalidInputError(
            "--max-drop (like every gate threshold) needs --eval TEST.npz, the data to gate on."
        )
    if args.mode is not None and not gating:
        raise InvalidInputError("--mode sets the gate of --max-drop; pass --max-drop too.")
    if (args.output or args.metric) and args.eval_data is None:
        raise InvalidInputError("--output and --metric choose what --eval scores; pass --eval.")
    suffix = str(args.out).lower().rsplit(".", 1)[-1] if "." in str(args.out) else ""
    other = {"tflite": "onnx", "onnx": "tflite"}[args.format]
    if suffix == other:
        raise InvalidInputError(
            f"--out {args.out} names a .{other} file but --format is {args.format}; pass "
            f"--format {other}, or name the output .{args.format}."
        )


def _check_engine_for(model: Any, config: PTQConfig) -> None:
    """A ``.tflite`` the engine cannot take is refused before any data is read."""
    from tfcompress.models import TFLiteModel
    from tfcompress.quantization.engines import choose_engine

    if isinstance(model, TFLiteModel) and config.format == "tflite":
        choose_engine(config.engine, model, config.recipe)  # type: ignore[arg-type]


def _methods_score_on_eval(config: PTQConfig, args: argparse.Namespace, model: Any) -> bool:
    """Whether ``--eval`` feeds quantize itself (int8 ``.tflite`` only), not only the table.

    The converter's methods score on it when they run (``--method`` asked, or a gate flag:
    auto if plain int8 fails); LiteRT Quantizer (a ``.tflite`` input) picks its calibration
    on it. Other recipes and ONNX are evaluated after quantizing, as every recipe is.
    """
    from tfcompress.models import TFLiteModel

    if config.format != "tflite" or config.recipe.name != "int8" or config.methods == "none":
        return False
    if isinstance(model, TFLiteModel) or config.engine == "litert-quantizer":
        return True
    return config.methods is not None or gate_requested(args)


def _methods_gate(args: argparse.Namespace, config: PTQConfig, model: Any) -> Any:
    """The gate flags as quantize's gate: the methods' (converter) or the calibration's.

    The same checks and mode the command's own gate judges the artifact with afterwards.
    """
    if not gate_requested(args) or not _methods_score_on_eval(config, args, model):
        return None
    # LiteRT Quantizer (a .tflite input) has no methods: the gate picks its calibration.
    from tfcompress.testing.config import GateConfig

    return GateConfig.from_options(
        outputs=flat(args.output),
        metrics=flat(args.metric),
        mode=args.mode,
        **threshold_options(args),
    )


def _row_name(result: QuantizedArtifact) -> str:
    """The artifact's row in the table: its recipe, and the methods it kept."""
    # recipe float32 is the reference itself; two equal names would collapse into one row
    name = result.recipe.name if result.recipe.name != "float32" else "float32 (output)"
    report = getattr(result, "methods", None)
    if report is not None and report.kept:
        name = f"{name} [{'+'.join(report.kept)}]"
    return name


def _evaluate(
    result: QuantizedArtifact, name: str, eval_set: Any, args: argparse.Namespace
) -> Evaluation | None:
    """Both files scored on ``--eval`` (None without it)."""
    from tfcompress.bench.accuracy import evaluate

    if eval_set is None:
        return None
    fed = feeding_options(args)
    return evaluate(
        {"float32": result.reference, name: result.model},  # type: ignore[attr-defined]
        # Laid out by --batch-dim/--input-value: read again from the file, in the model's
        # layout (eval_set holds its samples batch first).
        args.eval_data if any(fed.values()) else eval_set,
        **(fed if any(fed.values()) else {}),
        metric=flat(args.metric) or None,
        outputs=flat(args.output) or None,
        threads=args.threads,
        progress=show_progress(),
    )


def _save_beside(
    result: QuantizedArtifact, saved: Path, side_outputs: tuple[Path, ...], force: bool
) -> dict[str, Any]:
    """The target's own files next to the artifact (Edge TPU: the compiled model and log)."""
    verdict = getattr(result, "target_verdict", None)
    if verdict is None:
        return {}
    beside = verdict.save_beside(saved, overwrite=force)
    for path in side_outputs:
        logger.info("wrote %s (%s bytes)", path, f"{path.stat().st_size:,}")
    return beside


def _collapse(evaluation: Evaluation | None) -> tuple[str, ...]:
    """Warn (stderr) about every output that collapsed, whatever the gate; say when unchecked.

    See :mod:`tfcompress.bench.collapse` for what counts as a collapse.
    """
    from tfcompress.bench.collapse import find_collapse

    if evaluation is None:
        logger.info("%s", NOT_CHECKED)
        return ()
    reference, quantized = evaluation.rows
    found = find_collapse(reference.outputs, quantized.outputs, evaluation.labels)
    for sentence in found:
        logger.warning("%s: the artifact is written, but check it before use", sentence)
    return found


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


def _side_outputs(
    args: argparse.Namespace, config: PTQConfig, inputs: list[str]
) -> tuple[Path, ...]:
    """The files the target writes next to ``--out``, checked before any work.

    Raises:
        OutputExistsError: One of the files exists and ``--force`` was not given.
    """
    from tfcompress.models import check_output_path
    from tfcompress.targets.base import get_target

    if config.target is None:
        return ()
    paths = get_target(config.target).side_outputs(args.out, **config.target_options)
    for path in paths:
        check_output_path(path, overwrite=args.force, inputs=inputs)
    return paths


#: Characters of one ``--rule`` at most (its pattern is at most 1,000).
_RULE_LIMIT = 10_000


def parse_rule(text: str) -> dict[str, Any]:
    """``--rule`` text as a rule dict: ``PATTERN=MODE``, ``OP:PATTERN=MODE`` or JSON.

    Raises:
        InvalidInputError: Text that is none of those.

    Example:
        >>> parse_rule("FULLY_CONNECTED:head=int16")
        {'pattern': 'head', 'mode': 'int16', 'op_type': 'FULLY_CONNECTED'}
    """
    import json

    from tfcompress.errors import InvalidInputError, shown_name

    shown = f"'{shown_name(text, limit=100)}'"  # the length it gives is the text's
    if len(text) > _RULE_LIMIT:  # a pattern is at most 1,000 characters (rules.PATTERN_LIMIT)
        raise InvalidInputError(
            f"--rule {shown_name(repr(text[:40]))[:-1]}...' is {len(text):,} characters; a "
            f"rule is at most {_RULE_LIMIT:,}."
        )
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise InvalidInputError(f"--rule {shown} is not valid JSON ({error.msg}).") from None
        except RecursionError:
            raise InvalidInputError(
                f"--rule {shown}: JSON nested too deep; a rule is one flat object."
            ) from None
        except ValueError as error:  # a number past Python's 4,300-digit limit
            raise InvalidInputError(
                f"--rule {shown} is not a rule's JSON ({shown_name(str(error), limit=100)})."
            ) from None
        if not isinstance(data, dict):
            raise InvalidInputError(f"--rule {shown} must be a JSON object.")
        return data
    where, sep, mode = text.rpartition("=")
    if not sep or not where or not mode:
        raise InvalidInputError(
            f"--rule {shown}: write PATTERN=MODE (e.g. dense_2=float), OP_TYPE:PATTERN=MODE "
            "(e.g. CONV_2D:.*=int16) or a JSON object."
        )
    op_type, colon, pattern = where.partition(":")
    rule: dict[str, Any] = {"pattern": pattern if colon else where, "mode": mode}
    if colon and op_type.isupper():
        rule["op_type"] = op_type
    elif colon:  # a colon inside a tensor name ("...:0"), not an op type
        rule["pattern"] = where
    return rule
