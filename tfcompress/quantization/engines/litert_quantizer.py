"""The LiteRT Quantizer engine: a float ``.tflite`` in, a quantized ``.tflite`` out.

LiteRT Quantizer (``litert-quantizer``, formerly ai-edge-quantizer) quantizes a float
``.tflite`` directly, without TensorFlow. This engine:

1. takes the float ``.tflite`` (a Keras model or SavedModel is converted to one first, once:
   that file is the result's float reference);
2. prepares it (:mod:`~tfcompress.quantization.engines.prepare`: old op codes, missing
   signature, float16 weights, duplicate names) and plans what each op becomes
   (:mod:`~tfcompress.quantization.engines.plan`);
3. calibrates on the representative data through the signature and quantizes with the
   recipe translated to LiteRT Quantizer's format;
4. checks the written file: the structural validator, then one run in the probe's child
   process (a file that does not run is never returned), then op by op against the plan.

Example:
    >>> made = quantize_litert(model, Recipe("int8"), representative_data=x)  # doctest: +SKIP
    >>> made.notes  # doctest: +SKIP
    ('float32 input and output: ...',)
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from tfcompress.data import DataLike
from tfcompress.data.calibration import calibration_set
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
from tfcompress.quantization.engines.check import check_against_plan
from tfcompress.quantization.engines.plan import litert_ops, litert_recipe, plan_ops
from tfcompress.quantization.engines.prepare import prepare_float_tflite
from tfcompress.quantization.recipes import Recipe

__all__ = ["INSTALL_HINT", "EngineOutput", "litert_quantizer_module", "quantize_litert"]

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'tfcompress[litert-quantizer]' (litert-quantizer==0.11.0)"
_CALIBRATION_THREADS = 4


@dataclass(frozen=True)
class EngineOutput:
    """What an engine made: the quantized bytes, the float reference and what to say.

    Attributes:
        content: The quantized ``.tflite``.
        reference: The float ``.tflite`` that was quantized (after preparation).
        seconds: Wall time of the quantization (and, for Keras input, the float conversion).
        calibration_samples: Samples calibrated on (0 when none were needed).
        float_ops: Ops that compute in float, for integer-activation recipes; else None.
        notes: Preparation changes, rules not honoured op by op.
    """

    content: bytes
    reference: bytes
    seconds: float
    calibration_samples: int
    float_ops: tuple[str, ...] | None
    notes: tuple[str, ...]


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
) -> EngineOutput:
    """Quantize ``model`` with LiteRT Quantizer.

    Args:
        model: A loaded model (:func:`tfcompress.models.resolve_model`): a float
            :class:`~tfcompress.models.TFLiteModel`, a Keras model or a SavedModel.
        recipe: A recipe LiteRT Quantizer makes, with its rules.
        representative_data: Calibration samples, by input name for several inputs.
        seed: Seed of the calibration subset.
        progress: Show LiteRT Quantizer's progress bars.

    Returns:
        The quantized bytes with the float reference.

    Raises:
        MissingDependencyError: LiteRT Quantizer is not installed.
        InvalidInputError: An option this engine cannot honour, a rule matching no op,
            calibration data missing.
        UnsupportedModelError: An input LiteRT Quantizer cannot take (already quantized,
            several subgraphs, custom ops it would have to run).
        ConversionError: LiteRT Quantizer failed, or wrote a file LiteRT cannot run, or left
            ops float against an ``integer_only`` recipe.

    Example:
        >>> quantize_litert(resolve_model("face.tflite"), Recipe("int8"),
        ...     representative_data="calib.npz").content[:8]  # doctest: +SKIP
    """
    _check_options(recipe)
    litert_quantizer_module()  # missing: one line naming the install, before any work
    source = model_name(model)
    started = time.monotonic()
    reference = _float_tflite(model, recipe)
    prepared = prepare_float_tflite(reference, source=source)
    if prepared.content is not reference:  # rewritten bytes: checked like any other input
        resolve_model(TFLiteModel(prepared.content, label=source))
    parsed = read_tflite(prepared.content, source=source)
    plan = plan_ops(parsed, recipe, source=source)
    entries = litert_recipe(recipe, litert_ops(parsed))  # the matched ops, not the patterns
    calibrates = recipe.spec.needs_calibration or any(r.calibrates for r in recipe.rules)
    samples = None
    if calibrates:
        if representative_data is None:
            raise InvalidInputError(
                f"recipe {recipe.name!r} calibrates activation ranges: pass "
                "representative_data (--data CALIB.npz) with a few hundred typical samples."
            )
        signature = model_signature(TFLiteModel(prepared.content, verified=True))
        calibration = calibration_set(
            signature, representative_data, limit=recipe.calibration_samples, seed=seed
        )
        samples = list(_by_name(calibration.x, signature.input_names, len(calibration)))
        if prepared.custom_ops:
            _check_runs(prepared.content, prepared.custom_ops, source)
    if entries:
        from tfcompress._child import call

        # Calibration runs the model on the user's data (native code the data steers, whose
        # allocations it can size): in a child process, with its time and memory limits.
        content = call(
            "tfcompress.quantization.engines.litert_quantizer:_run_here",
            prepared,
            entries,
            samples,
            source,
            progress,
            what=f"LiteRT Quantizer on {source!r}",
            echo=progress,
        )
    else:  # float32 without rules: the prepared float model is the artifact
        content = prepared.content
    seconds = time.monotonic() - started
    _check_runs_written(content, bool(prepared.custom_ops), source, in_warm_child=bool(entries))
    outcome = check_against_plan(plan, content, recipe, source=source)
    logger.info("LiteRT Quantizer quantized %s with %s in %.1fs", source, recipe.name, seconds)
    return EngineOutput(
        content=content,
        reference=prepared.content,
        seconds=seconds,
        calibration_samples=0 if samples is None else len(samples),
        float_ops=outcome.float_ops,
        notes=(*prepared.changes, *outcome.notes),
    )


def _check_options(recipe: Recipe) -> None:
    """Refuse what LiteRT Quantizer cannot do: uint8 I/O, converter node names, a new batch."""
    for option in ("input_type", "output_type"):
        if getattr(recipe, option) == "uint8":
            flag = "--" + option.replace("_", "-")
            raise InvalidInputError(
                f"{option}='uint8' ({flag}): LiteRT Quantizer writes int8 (or float32) I/O; "
                "use int8, or --engine converter for uint8 I/O."
            )
    if recipe.float_nodes:
        raise InvalidInputError(
            "float_nodes (--float-node) name the converter's nodes; with LiteRT Quantizer "
            "keep ops float with a rule: rules=[{'pattern': NAME, 'mode': 'float'}] "
            "(--rule NAME=float)."
        )
    if recipe.static_batch is not None:
        raise InvalidInputError(
            "static_batch re-traces a Keras model; LiteRT Quantizer keeps the float .tflite's "
            "shapes: drop static_batch (--static-batch), or use --engine converter."
        )


def _float_tflite(model: Any, recipe: Recipe) -> bytes:
    if isinstance(model, TFLiteModel):
        return model.content
    from tfcompress.quantization.converter import convert_all

    return convert_all(model, [None], static_batch=recipe.static_batch)[0].content


def _run_here(
    prepared: Any, entries: list[dict[str, Any]], samples: Any, source: str, progress: bool
) -> bytes:
    """Calibrate and quantize in this process (what the child of :func:`quantize_litert` runs)."""
    return _run(litert_quantizer_module(), prepared, entries, samples, source, progress)


def _run(
    quantizer: ModuleType,
    prepared: Any,
    entries: list[dict[str, Any]],
    samples: Any,
    source: str,
    progress: bool,
) -> bytes:
    try:
        engine = quantizer.Quantizer(bytearray(prepared.content), entries)
    except ValueError as error:  # a rule whose setting an op type does not support
        raise InvalidInputError(
            f"LiteRT Quantizer refuses the recipe's rules: {_first_line(error)}; change the "
            "rule (mode, weight_bits, granularity) for that op type."
        ) from error
    quiet = contextlib.nullcontext() if progress else contextlib.redirect_stderr(io.StringIO())
    try:
        with quiet, warnings.catch_warnings():  # its tqdm bars write to stderr
            # Its calibrator keeps every tensor, which LiteRT warns is "for debugging".
            warnings.simplefilter("ignore", UserWarning)
            calibration = None
            if samples is not None:
                calibration = _calibrate(prepared, entries, samples)
            made = engine.quantize(
                calibration, enable_progress_bar=progress, enable_progress_report=False
            )
    except (ValueError, RuntimeError, KeyError, IndexError, TypeError) as error:
        from tfcompress.runtime.litert import memory_hint

        reason = _first_line(error)
        raise ConversionError(
            f"LiteRT Quantizer failed on {source!r}: {reason}{memory_hint(reason)}; try "
            "another recipe, keep the failing ops float with a rule, or use --engine converter."
        ) from error
    return bytes(made.quantized_model)


def _calibrate(prepared: Any, entries: list[dict[str, Any]], samples: list[Any]) -> Any:
    """Activation ranges: the min and max over every sample, as the TFLite converter takes.

    ``Quantizer.calibrate`` smooths each sample's range into a moving average (factor 0.95),
    so with one sample per call the ranges follow the last few dozen samples and clip the
    rest: on the landmarker of ``tests/test_litert_quantizer.py`` its presence head fell to
    0.5 dB SNR, against 37 dB for the converter's int8. LiteRT Quantizer's own
    ``qsv_utils.min_max_update`` keeps the running min and max instead; GPTQ rules keep its
    default, whose statistics need it.
    """
    from litert_quantizer import calibrator, recipe_manager
    from litert_quantizer.utils import qsv_utils

    manager = recipe_manager.RecipeManager()
    manager.load_quantization_recipe(entries)
    options: dict[str, Any] = {}
    if not any(entry.get("algorithm_key") == "GPTQ" for entry in entries):
        options["qsv_update_func"] = qsv_utils.min_max_update
    threads = min(_CALIBRATION_THREADS, os.cpu_count() or 1)
    calibration = calibrator.Calibrator(bytearray(prepared.content), num_threads=threads, **options)
    calibration.calibrate({prepared.signature_key: samples}, manager)
    return calibration.get_model_qsvs()


def _by_name(x: Any, names: tuple[str, ...], count: int) -> Iterator[dict[str, Any]]:
    """One sample at a time, as a dict by signature input name (a batch of one)."""
    for i in range(count):
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


def _check_runs_written(
    content: bytes, custom_ops: bool, source: str, *, in_warm_child: bool = False
) -> None:
    """Never return a file that does not run: validate it, then run it once in a child.

    ``in_warm_child``: the calibration's warm child runs it (it is up already: no process
    is started for the probe).
    """
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
        raise ConversionError(
            f"LiteRT Quantizer wrote a file LiteRT cannot run ({error}); nothing was "
            "returned: keep the failing ops float with a rule, or use --engine converter."
        ) from error


def _first_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text[:300] or type(error).__name__
