"""``tfcompress quantize MODEL --recipe R --data CALIB.npz --out OUT.tflite`` (or ``.onnx``)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tfcompress.cli._choices import FORMATS, RECIPES
from tfcompress.cli._gating import add_gate_options, flat, gate_options, gate_requested
from tfcompress.cli._options import add_config_flags, config_values
from tfcompress.cli._targets import add_target_arguments, target_options
from tfcompress.cli.common import (
    add_feeding_flags,
    add_shared_flags,
    emit_json,
    feeding_options,
    load_cli_model,
    positive_int,
    show_progress,
    warm_converter,
)

if TYPE_CHECKING:
    from tfcompress.bench.accuracy import Evaluation
    from tfcompress.quantization.artifact import QuantizedArtifact
    from tfcompress.quantization.config import PTQConfig
    from tfcompress.testing.judge import Check
    from tfcompress.testing.report import GateReport
    from tfcompress.testing.settings import GateSettings

logger = logging.getLogger(__name__)

NOT_CHECKED = (
    "nothing was checked: without --eval TEST.npz the artifact's outputs were never compared "
    "with the float model's"
)


#: The Recipe and PTQConfig fields that are flags made from their declarations.
_RECIPE = (
    "quantization.recipes",
    "Recipe",
    "input_type",
    "output_type",
    "calibration_samples",
    "per_channel",
    "integer_only",
    "static_batch",
    "float_nodes",
    "block_size",
    "rules",
)
_CONFIG = ("quantization.config", "PTQConfig", "engine", "seed", "methods")
_ONNX = ("quantization.onnx_ptq", "OnnxRecipe", "calibration_method", "opset")
_PER_OP = ("quantization.methods.per_op", "PerOpBar", "per_op_min_snr")


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
    add_config_flags(parser, *_RECIPE)
    add_config_flags(parser, *_CONFIG)
    add_config_flags(parser, *_ONNX)
    add_config_flags(parser, *_PER_OP)
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
    add_shared_flags(parser, "force", "unsafe", "timeout", "custom_objects", "json")
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Quantize, optionally evaluate and gate, write the artifact atomically, report.

    The flags that decide the artifact become one
    :class:`~tfcompress.quantization.config.PTQConfig` (:func:`ptq_config`), checked before
    the model is read; ``--json`` prints ``result.to_dict()`` (``config`` among its keys)
    with what the command adds: ``output``, ``checked``, the evaluation and the gate.

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
    """
    if args.list_recipes:
        from tfcompress.cli._quantize_output import recipes_table

        out.write(recipes_table() + "\n")
        return 0
    _check_usage(args)
    if args.format == "tflite":  # the converter's child starts: a SavedModel is read there
        warm_converter(args.model)
    from tfcompress.bench.paired import read_for_reference
    from tfcompress.cli._quantize_output import evaluation_fields, quantize_text
    from tfcompress.models import check_output_path
    from tfcompress.quantization.ptq import quantize
    from tfcompress.targets.base import get_target
    from tfcompress.testing.config import GateConfig

    config = ptq_config(args)  # every option checked before any file is touched
    gate_config = GateConfig.from_options(**gate_options(args))  # checked before any work
    inputs = [p for p in (args.model, args.data, args.eval_data) if p]
    check_output_path(args.out, overwrite=args.force, inputs=inputs)
    side_outputs = _side_outputs(args, config, inputs)
    model = load_cli_model(args, in_child=config.format == "tflite")
    _check_engine_for(model, config)
    # The test data is matched to the model now: a mismatch costs nothing, not a conversion.
    eval_set = (
        read_for_reference(args.eval_data, model, "--eval data", **feeding_options(args))
        if args.eval_data
        else None
    )
    # Where --eval feeds quantize, the gate flags gate the methods (converter) or pick the
    # calibration (LiteRT Quantizer): the checks and mode the artifact is judged with below.
    methods_gated = gate_requested(args) and _methods_score_on_eval(config, args, model)
    result = quantize(
        model,
        config=config,
        representative_data=args.data,
        eval_data=eval_set if _methods_score_on_eval(config, args, model) else None,
        layer_errors=args.layer_errors,
        progress=show_progress(),
        gate=gate_config if methods_gated else None,
    )
    name = _row_name(result)
    evaluation = _evaluate(result, name, eval_set, args)
    # Judged before writing: an option the gate refuses must not leave a file behind.
    gate = (
        _gate(evaluation, gate_config.checks_to_run, gate_config.settings)
        if evaluation is not None and gate_requested(args)
        else None
    )
    collapsed = _collapse(evaluation)
    saved = result.save(args.out, overwrite=args.force)
    logger.info("wrote %s (%s bytes)", saved, f"{result.size_bytes:,}")
    beside = _save_beside(result, saved, side_outputs, args.force)
    failure = None  # the target's check failed: one line with the fix (Target.failure)
    if config.target is not None:
        verdict = getattr(result, "target_verdict", None)
        failure = get_target(config.target).failure(verdict)
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


def ptq_config(args: argparse.Namespace) -> PTQConfig:
    """The :class:`~tfcompress.quantization.config.PTQConfig` the flags describe.

    The flags are passed as they were given: the config refuses a bad value with the
    message the keyword and a replayed report get (``--samples 0``, ``--engine tvm``).

    Raises:
        InvalidInputError: What the config refuses; an unparseable ``--rules``.

    Example:
        >>> ptq_config(build_parser().parse_args(["quantize", "m.keras",
        ...     "--calibration-samples", "8"])).recipe.calibration_samples  # doctest: +SKIP
        8
    """
    from tfcompress.quantization.config import PTQConfig

    return PTQConfig.from_options(
        format=args.format,
        recipe=args.recipe,
        **config_values(args, _RECIPE[2:] + _CONFIG[2:] + _ONNX[2:] + _PER_OP[2:]),
        target=args.target,
        target_options=target_options(args),
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

    The converter's methods score on it when they run (``--methods`` asked, or a gate flag:
    auto if plain int8 fails); LiteRT Quantizer (a ``.tflite`` input) picks its calibration
    on it. Other recipes and ONNX are evaluated after quantizing, as every recipe is.
    """
    from tfcompress.models import TFLiteModel

    if config.format != "tflite" or config.recipe.name != "int8" or config.methods == "none":
        return False
    if isinstance(model, TFLiteModel) or config.engine == "litert-quantizer":
        return True
    return config.methods is not None or gate_requested(args)


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


def _gate(evaluation: Evaluation, checks: tuple[Check, ...], settings: GateSettings) -> GateReport:
    """The gate of ``tfcompress gate``, judged on the outputs already evaluated.

    ``judge_outputs_by_name`` is the check behind ``check_gate`` (the CLI gate and the pytest
    plugin); feeding it the evaluation's outputs gives the same verdicts without running both
    models a second time.
    """
    from tfcompress.testing.judge import judge_outputs_by_name

    reference, quantized = evaluation.rows
    return judge_outputs_by_name(
        evaluation.labels,
        reference.outputs,
        quantized.outputs,
        checks=checks,
        settings=settings,
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


#: Characters of one ``--rules`` at most (its pattern is at most 1,000).
_RULE_LIMIT = 10_000


def parse_rule(text: str) -> dict[str, Any]:
    """``--rules`` text as a rule dict: ``PATTERN=MODE``, ``OP:PATTERN=MODE`` or JSON.

    The argparse ``type`` of the ``Recipe.rules`` flag: argparse names the flag before the
    message (``argument --rules: 'x': write PATTERN=MODE...``).

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
            f"{shown_name(repr(text[:40]))[:-1]}...' is {len(text):,} characters; a "
            f"rule is at most {_RULE_LIMIT:,}."
        )
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise InvalidInputError(f"{shown} is not valid JSON ({error.msg}).") from None
        except RecursionError:
            raise InvalidInputError(
                f"{shown}: JSON nested too deep; a rule is one flat object."
            ) from None
        except ValueError as error:  # a number past Python's 4,300-digit limit
            raise InvalidInputError(
                f"{shown} is not a rule's JSON ({shown_name(str(error), limit=100)})."
            ) from None
        if not isinstance(data, dict):
            raise InvalidInputError(f"{shown} must be a JSON object.")
        return data
    where, sep, mode = text.rpartition("=")
    if not sep or not where or not mode:
        raise InvalidInputError(
            f"{shown}: write PATTERN=MODE (e.g. dense_2=float), OP_TYPE:PATTERN=MODE "
            "(e.g. CONV_2D:.*=int16) or a JSON object."
        )
    op_type, colon, pattern = where.partition(":")
    rule: dict[str, Any] = {"pattern": pattern if colon else where, "mode": mode}
    if colon and op_type.isupper():
        rule["op_type"] = op_type
    elif colon:  # a colon inside a tensor name ("...:0"), not an op type
        rule["pattern"] = where
    return rule
