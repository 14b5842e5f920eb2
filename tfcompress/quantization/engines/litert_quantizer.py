"""The LiteRT Quantizer engine: a float ``.tflite`` in, a quantized ``.tflite`` out.

LiteRT Quantizer (``litert-quantizer``, formerly ai-edge-quantizer) quantizes a float
``.tflite`` directly, without TensorFlow. This engine:

1. takes the float ``.tflite`` (a Keras model or SavedModel is converted to one first, once:
   that file is the result's float reference);
2. prepares it (:mod:`~tfcompress.quantization.engines.prepare`: old op codes, missing
   signature, float16 weights, duplicate names) and plans what each op becomes
   (:mod:`~tfcompress.quantization.engines.plan`);
3. calibrates on the representative data through the signature and quantizes with the
   recipe translated to LiteRT Quantizer's format; with eval data, twice (full min/max and
   LiteRT Quantizer's moving average), keeping the file that scores better against the
   float reference (:mod:`~tfcompress.quantization.engines.calibration`);
4. checks the written file: the structural validator, then one run in the probe's child
   process (a file that does not run is never returned), then op by op against the plan.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

from tfcompress.data import DataLike
from tfcompress.data.calibration import calibration_for
from tfcompress.errors import (
    ConversionError,
    InvalidInputError,
    MissingDependencyError,
    ModelLoadError,
)
from tfcompress.models.loading import TFLiteModel, model_name, resolve_model
from tfcompress.models.probe import probe_model
from tfcompress.models.signature import model_signature
from tfcompress.models.tflite_file import read_tflite
from tfcompress.quantization.engines.calibration import (
    CALIBRATIONS,
    DEFAULT_CALIBRATION,
    MIN_MAX,
    MOVING_AVERAGE,
    CalibrationCandidate,
    CalibrationChoice,
    keep_calibration,
)
from tfcompress.quantization.engines.check import check_against_plan
from tfcompress.quantization.engines.plan import litert_ops, litert_recipe, plan_ops
from tfcompress.quantization.engines.prepare import prepare_float_tflite
from tfcompress.quantization.engines.unrunnable import unrunnable_message
from tfcompress.quantization.recipes import Recipe
from tfcompress.quantization.rules import Rule

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'tfcompress[litert-quantizer]' (litert-quantizer==0.11.0)"
_CALIBRATION_THREADS = 4


@dataclass(frozen=True)
class EngineOutput:
    """What an engine made: the quantized bytes, the float reference and what to say.

    ``reference`` is the float ``.tflite`` quantized (after preparation); ``seconds`` include
    a Keras input's float conversion; ``float_ops`` is None for recipes with float
    activations; ``calibration`` None when the recipe calibrates nothing.
    """

    content: bytes
    reference: bytes
    seconds: float
    calibration_samples: int
    float_ops: tuple[str, ...] | None
    notes: tuple[str, ...]
    calibration: CalibrationChoice | None = None


def litert_quantizer_module() -> ModuleType:
    """``litert_quantizer.quantizer``, or a one-line error naming the install.

    Raises:
        MissingDependencyError: LiteRT Quantizer is not installed.
    """
    try:
        import litert_quantizer.quantizer as module
    except ImportError as error:
        raise MissingDependencyError(
            f"engine 'litert-quantizer' needs LiteRT Quantizer, which is not installed "
            f"({error.name or error}): {INSTALL_HINT}."
        ) from error
    return module


def quantize_litert(
    model: Any,
    recipe: Recipe,
    *,
    representative_data: DataLike | None,
    seed: int = 0,
    progress: bool = False,
    eval_data: DataLike | None = None,
    gate: Any = None,
) -> EngineOutput:
    """Quantize a loaded ``model`` (a float ``.tflite``, Keras model or SavedModel).

    With ``eval_data`` both calibrations are made and scored against the float reference
    on it (at most 1,000, a seeded subset), the better kept by the methods' keep rule, by
    ``gate`` (a ``GateConfig``) when given (:mod:`~.calibration`); without, the default
    calibration (full min/max) is made and nothing measured. ``seed`` picks the subsets.

    Raises:
        MissingDependencyError: LiteRT Quantizer is not installed.
        InvalidInputError: An option this engine cannot honour, a rule matching no op,
            calibration data missing.
        UnsupportedModelError: An input LiteRT Quantizer cannot take (already quantized,
            several subgraphs, custom ops it would have to run).
        ConversionError: LiteRT Quantizer failed, or wrote a file LiteRT cannot run, or left
            ops float against an ``integer_only`` recipe.
    """
    # The converter takes the source model, never a .tflite: advise it only where it can run.
    converter = (
        "quantize the source Keras model or SavedModel with --engine converter"
        if isinstance(model, TFLiteModel)
        else "use --engine converter"
    )
    _check_options(recipe, converter)
    litert_quantizer_module()  # missing: one line naming the install, before any work
    source = model_name(model)
    started = time.monotonic()
    if isinstance(model, TFLiteModel):
        reference = model.content
    else:
        from tfcompress.quantization.converter import convert_all

        reference = convert_all(model, [None], static_batch=recipe.static_batch)[0].content
    prepared = prepare_float_tflite(reference, source=source)
    if prepared.content is not reference:  # rewritten bytes: checked like any other input
        resolve_model(TFLiteModel(prepared.content, label=source))
    parsed = read_tflite(prepared.content, source=source)
    plan = plan_ops(parsed, recipe, source=source)
    entries = litert_recipe(recipe, litert_ops(parsed))  # the matched ops, not the patterns
    calibrates = recipe.spec.needs_calibration or any(r.calibrates for r in recipe.rules)
    samples = None
    methods: tuple[str, ...] = ()
    if calibrates:  # refused without data, with the converter's message
        signature = model_signature(TFLiteModel(prepared.content, verified=True))
        calibration = calibration_for(
            signature,
            representative_data,
            recipe_name=recipe.name,
            needs_calibration=True,
            limit=recipe.calibration_samples,
            seed=seed,
        )
        samples = list(_by_name(calibration, signature.input_names))
        if prepared.custom_ops:
            _check_runs(prepared.content, prepared.custom_ops, source)
        gptq = any(entry.get("algorithm_key") == "GPTQ" for entry in entries)
        if gptq and recipe.calibration == MIN_MAX:
            raise InvalidInputError(
                "calibration='min-max' cannot be honoured with GPTQ rules, whose statistics "
                "need LiteRT Quantizer's moving average: drop it (or the GPTQ rule)."
            )
        methods = (recipe.calibration or DEFAULT_CALIBRATION,)
        if eval_data is not None and not gptq and recipe.calibration is None:
            methods = CALIBRATIONS

    def quantized(with_entries: list[dict[str, Any]], how: tuple[str, ...]) -> dict[str, bytes]:
        from tfcompress._child import call

        # Calibration runs the model on the user's data (native code the data steers, whose
        # allocations it can size): in a child process, with its time and memory limits.
        return call(
            "tfcompress.quantization.engines.litert_quantizer:_run_here",
            prepared,
            with_entries,
            samples,
            source,
            progress,
            how,
            what=f"LiteRT Quantizer on {source!r}",
            echo=progress,
        )

    def remake(method: str) -> Callable[[tuple[Rule, ...]], bytes] | None:
        """The file of ``method`` made again with more float rules, or None: nothing to make.

        How every op to keep float is found when LiteRT cannot run the file.
        """
        if not entries:
            return None

        def again(rules: tuple[Rule, ...]) -> bytes:
            more = replace(recipe, rules=(*recipe.rules, *rules))
            made = quantized(litert_recipe(more, litert_ops(parsed)), (method,))
            return next(iter(made.values()))

        return again

    # float32 without rules: the prepared float model is the artifact
    made = quantized(entries, methods) if entries else {DEFAULT_CALIBRATION: prepared.content}
    choice = None
    if len(made) > 1:
        content, choice = _keep_better(
            made, prepared.content, eval_data, gate, bool(prepared.custom_ops), source, seed,
            remake(DEFAULT_CALIBRATION),
        )  # fmt: skip
    else:
        content = next(iter(made.values()))
        # Never return a file that does not run: validated, then run once in a child (the
        # calibration's warm child, up already, when something was quantized).
        said = _fails(content, bool(prepared.custom_ops), source, in_warm_child=bool(entries))
        if said is not None:
            raise ConversionError(
                unrunnable_message(
                    content,
                    said,
                    source,
                    requantize=remake(next(iter(made))),
                    fails=lambda remade: _fails(remade, bool(prepared.custom_ops), source),
                )
            )
        if samples is not None and entries:
            if gptq:
                kept, reason = MOVING_AVERAGE, "the one GPTQ rules take; nothing was compared"
            elif recipe.calibration is not None:
                kept, reason = recipe.calibration, "as the recipe names it; nothing was compared"
            else:
                kept = DEFAULT_CALIBRATION
                reason = "the default; without eval data nothing was compared"
            choice = CalibrationChoice(
                kept=kept, default=DEFAULT_CALIBRATION, candidates=(), reason=reason
            )
    seconds = time.monotonic() - started
    outcome = check_against_plan(plan, content, recipe, source=source)
    logger.info("LiteRT Quantizer quantized %s with %s in %.1fs", source, recipe.name, seconds)
    return EngineOutput(
        content=content,
        reference=prepared.content,
        seconds=seconds,
        calibration_samples=0 if samples is None else len(samples),
        float_ops=outcome.float_ops,
        notes=(*prepared.changes, *outcome.notes),
        calibration=choice,
    )


def _keep_better(
    made: dict[str, bytes],
    reference: bytes,
    eval_data: DataLike,
    gate: Any,
    custom_ops: bool,
    source: str,
    seed: int,
    remake: Callable[[tuple[Rule, ...]], bytes] | None = None,
) -> tuple[bytes, CalibrationChoice]:
    """Both calibrations scored against ``reference`` on ``eval_data``; the better one.

    A file LiteRT cannot run is never kept: the other one is, saying why; both failing is
    the error of the default's file (``remake``: that file made again with more float
    rules, to find every op to keep float).
    """
    from tfcompress.quantization.methods.selection import score, scoring_set

    runs: dict[str, bytes] = {}
    said: dict[str, str] = {}
    for method, content in made.items():
        refused = _fails(content, custom_ops, source)
        if refused is None:
            runs[method] = content
        else:
            said[method] = refused

    def failed(method: str) -> ConversionError:
        fix = remake if not runs and method == DEFAULT_CALIBRATION else None
        message = unrunnable_message(
            made[method], said[method], source, requantize=fix,
            fails=lambda remade: _fails(remade, custom_ops, source),
        )  # fmt: skip
        return ConversionError(message)

    if not runs:
        raise failed(DEFAULT_CALIBRATION if DEFAULT_CALIBRATION in said else next(iter(said)))
    if len(runs) == 1:
        (method, content), lost = next(iter(runs.items())), next(iter(said))
        error = failed(lost)
        logger.warning("%s calibration wrote a file LiteRT cannot run: %s", lost, error)
        return content, CalibrationChoice(
            kept=method,
            default=DEFAULT_CALIBRATION,
            candidates=(),
            reason=f"the {lost} calibration's file does not run ({error})",
        )
    data = scoring_set(eval_data, TFLiteModel(reference, verified=True), seed=seed, gate=gate)
    names = tuple(runs)
    scored = score(reference, [runs[m] for m in names], data, source=source, gate=gate)
    candidates = tuple(
        CalibrationCandidate(m, fidelity, margins, len(runs[m]))
        for m, (fidelity, margins) in zip(names, scored, strict=True)
    )
    index, reason = keep_calibration(candidates, gated=gate is not None)
    choice = CalibrationChoice(
        kept=names[index],
        default=DEFAULT_CALIBRATION,
        candidates=candidates,
        reason=reason,
        measured_on=len(data),
    )
    logger.info("%s: %s", source, choice)
    return runs[names[index]], choice


def _check_options(recipe: Recipe, converter: str = "use --engine converter") -> None:
    """Refuse what LiteRT Quantizer cannot do: uint8 I/O, converter node names, a new batch.

    ``converter``: the words that send the user to the converter (for a ``.tflite`` input,
    from its source model).
    """
    for option in ("input_type", "output_type"):
        if getattr(recipe, option) == "uint8":
            flag = "--" + option.replace("_", "-")
            raise InvalidInputError(
                f"{option}='uint8' ({flag}): LiteRT Quantizer writes int8 (or float32) I/O; "
                f"use int8, or for uint8 I/O {converter}."
            )
    if recipe.float_nodes:
        raise InvalidInputError(
            "float_nodes (--float-nodes) name the converter's nodes; with LiteRT Quantizer "
            "keep ops float with a rule: rules=[{'pattern': NAME, 'mode': 'float'}] "
            "(--rules NAME=float)."
        )
    if recipe.static_batch is not None:
        raise InvalidInputError(
            "static_batch re-traces a Keras model; LiteRT Quantizer keeps the float .tflite's "
            f"shapes: drop static_batch (--static-batch), or {converter}."
        )


def _run_here(
    prepared: Any,
    entries: list[dict[str, Any]],
    samples: Any,
    source: str,
    progress: bool,
    methods: tuple[str, ...] = (),
) -> dict[str, bytes]:
    """Calibrate and quantize in this process (what the child of :func:`quantize_litert` runs).

    Returns:
        The quantized file by calibration method (one entry, the default, when ``methods``
        has one or nothing calibrates).
    """
    quantizer = litert_quantizer_module()
    made: dict[str, bytes] = {}
    for method in (methods or (DEFAULT_CALIBRATION,)) if samples is not None else ("",):
        try:
            engine = quantizer.Quantizer(bytearray(prepared.content), entries)
        except ValueError as error:  # a rule whose setting an op type does not support
            raise InvalidInputError(
                f"LiteRT Quantizer refuses the recipe's rules: {_first_line(error)}; change "
                "the rule (mode, weight_bits, granularity) for that op type."
            ) from error
        quiet = contextlib.nullcontext() if progress else contextlib.redirect_stderr(io.StringIO())
        try:
            with quiet, warnings.catch_warnings():  # its tqdm bars write to stderr
                # Its calibrator keeps every tensor, which LiteRT warns is "for debugging".
                warnings.simplefilter("ignore", UserWarning)
                calibration = None
                if samples is not None:
                    calibration = _calibrate(prepared, entries, samples, method)
                quantized = engine.quantize(
                    calibration, enable_progress_bar=progress, enable_progress_report=False
                )
        except (ValueError, RuntimeError, KeyError, IndexError, TypeError) as error:
            from tfcompress.runtime.litert import memory_hint

            reason = _first_line(error)
            raise ConversionError(
                f"LiteRT Quantizer failed on {source!r}: {reason}{memory_hint(reason)}; try "
                "another recipe, or keep the failing ops float with a rule (--rules "
                "'OP_TYPE:NAME=float'; `tfcompress inspect` names them)."
            ) from error
        made[method or DEFAULT_CALIBRATION] = bytes(quantized.quantized_model)
    return made


def _calibrate(
    prepared: Any,
    entries: list[dict[str, Any]],
    samples: list[Any],
    method: str = DEFAULT_CALIBRATION,
) -> Any:
    """Activation ranges by ``method``: ``min-max`` over every sample, or ``moving-average``.

    ``min-max`` takes the min and max over every sample, as the TFLite converter does.
    ``moving-average``, LiteRT Quantizer's own (``Quantizer.calibrate``), smooths each
    sample's range into a moving average (factor 0.95), so with one sample per call the
    ranges follow the last few dozen samples and clip the rest: on the landmarker of
    ``tests/test_litert_quantizer.py`` its presence head fell to 0.5 dB SNR, against 37 dB
    for the converter's int8; on other models the clipping is what helps (a face detector:
    4.4 dB better). ``qsv_utils.min_max_update`` keeps the running
    min and max instead; GPTQ rules keep the moving average, whose statistics need it.
    """
    from litert_quantizer import calibrator, recipe_manager
    from litert_quantizer.utils import qsv_utils

    manager = recipe_manager.RecipeManager()
    manager.load_quantization_recipe(entries)
    options: dict[str, Any] = {}
    gptq = any(entry.get("algorithm_key") == "GPTQ" for entry in entries)
    if method == MIN_MAX and not gptq:
        options["qsv_update_func"] = qsv_utils.min_max_update
    threads = min(_CALIBRATION_THREADS, os.cpu_count() or 1)
    calibration = calibrator.Calibrator(bytearray(prepared.content), num_threads=threads, **options)
    calibration.calibrate({prepared.signature_key: samples}, manager)
    return calibration.get_model_qsvs()


def _by_name(calibration: Any, names: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    """One sample at a time, as a dict by signature input name (a batch of one).

    In the model's own layout, as ``benchmark`` feeds it: a state ``(2, 1, 128)`` with its
    batch in the middle, a scalar as its one value, a static batch in calls of its size
    (:func:`tfcompress.data.calibration.model_feeds`).
    """
    x = calibration.x
    if getattr(calibration, "layout", None) is not None:
        from tfcompress.data.calibration import model_feeds

        yield from model_feeds(calibration, 1, names[:1])
        return
    for i in range(len(calibration)):
        if isinstance(x, dict):
            yield {name: x[name][i : i + 1] for name in names}
        else:
            yield {names[0]: x[i : i + 1]}


def _check_runs(content: bytes, custom_ops: tuple[str, ...], source: str) -> None:
    # In the warm child the calibration runs in next: no process of its own for the probe.
    try:
        probe_model(content, "tflite", source=source, must_prepare=True, in_warm_child=True)
    except ModelLoadError as error:
        from tfcompress.errors import UnsupportedModelError

        raise UnsupportedModelError(
            f"{source} has custom op(s) {', '.join(custom_ops)} that LiteRT cannot run here, "
            "and LiteRT Quantizer must run the model to calibrate it; use a weight-only "
            "recipe (int4-weights, dynamic, float16), or register the op's kernel."
        ) from error


def _fails(content: bytes, custom_ops: bool, source: str, *, in_warm_child: bool = False) -> Any:
    """None when LiteRT runs ``content`` (structurally valid, runs once); else what it said."""
    try:
        read_tflite(content, source=source).validate(source=source)
        probe_model(
            content,
            "tflite",
            source=f"{source} (quantized)",
            must_prepare=not custom_ops,
            in_warm_child=in_warm_child,
        )
    except ModelLoadError as error:
        return str(error)
    return None


def _first_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text[:300] or type(error).__name__
