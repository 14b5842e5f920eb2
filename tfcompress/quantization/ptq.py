"""Post-training quantization through the TFLite converter."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, overload

from tqdm.auto import tqdm

from tfcompress._compat.tf import tensorflow
from tfcompress.data import DataLike, Dataset
from tfcompress.data.validation import check_count
from tfcompress.errors import InvalidInputError
from tfcompress.models.loading import ModelLike, TFLiteModel, model_name, resolve_model
from tfcompress.models.signature import model_signature
from tfcompress.quantization.artifact import QuantizedArtifact
from tfcompress.quantization.calibration import calibration_for
from tfcompress.quantization.converter import Configure, convert_all
from tfcompress.quantization.float_ops import check_integer_model, describe_float_ops
from tfcompress.quantization.methods.apply import ConfigureFor, run_methods
from tfcompress.quantization.methods.catalog import plan_candidates
from tfcompress.quantization.methods.report import MethodsReport
from tfcompress.quantization.recipes import Recipe
from tfcompress.quantization.selective import (
    calibrate_only,
    check_kept_float,
    quantize_calibrated,
)
from tfcompress.targets.edgetpu.target import (
    EdgeTPUVerdict,
    check_target,
    edgetpu_options,
    edgetpu_verdict,
)

if TYPE_CHECKING:
    from tfcompress.quantization.onnx_ptq import OnnxQuantizationResult, OnnxRecipe

logger = logging.getLogger(__name__)

#: Artifact formats :func:`quantize` makes.
FORMATS = ("tflite", "onnx")


@dataclass(frozen=True)
class QuantizationResult(QuantizedArtifact):
    """A quantized ``.tflite`` and what it cost to make.

    Attributes:
        recipe: The exact recipe that produced ``model_content`` (replayable).
        model_content: The quantized flatbuffer.
        reference_content: The float32 ``.tflite`` of the same model, for comparison.
        source: Name of the model that was quantized.
        conversion_seconds: Wall time of the quantized conversion: the model's trace (shared
            with the reference) plus its conversion and calibration.
        calibration_samples: Samples actually used for calibration (0 when none needed).
        warnings: Warnings the converter emitted.
        float_ops: For ``int8``/``int16x8``: the ops that stayed float, one name per operator
            in graph order (empty unless ``recipe.float_fallback``); None for the recipes whose
            activations are float anyway. See :mod:`tfcompress.quantization.float_ops`.
        edgetpu: With ``target="edgetpu"``: the linter's prediction and, where
            ``edgetpu_compiler`` ran, its parsed verdict and compiled model; else None.
        float_nodes: The op outputs kept float on purpose (``recipe.float_nodes``), see
            :mod:`tfcompress.quantization.selective`; their ops are also in ``float_ops``.
        methods: With post-training methods (``methods=``, ``eval_data=`` or a recipe that
            names methods): every candidate and plain int8 scored against the float32
            reference, which was kept and why, and what each method changed; else None. See
            :mod:`tfcompress.quantization.methods`.

    Example:
        >>> result = tfcompress.quantize(model, recipe="int16x8", representative_data=x,
        ...     float_fallback=True)  # doctest: +SKIP
        >>> result.float_ops  # doctest: +SKIP
        ('NEG',)
    """

    format: ClassVar[str] = "tflite"

    recipe: Recipe
    model_content: bytes = field(repr=False)
    reference_content: bytes = field(repr=False)
    source: str
    conversion_seconds: float
    calibration_samples: int
    warnings: tuple[str, ...] = ()
    float_ops: tuple[str, ...] | None = None
    edgetpu: EdgeTPUVerdict | None = None
    float_nodes: tuple[str, ...] = ()
    methods: MethodsReport | None = None

    @property
    def model(self) -> TFLiteModel:
        """The quantized model, ready for :func:`tfcompress.evaluate` or a runner."""
        return TFLiteModel(
            self.model_content, label=f"{self.source}_{self.recipe.name}", verified=True
        )

    @property
    def reference(self) -> TFLiteModel:
        """The float32 ``.tflite`` of the same model."""
        return TFLiteModel(self.reference_content, label=f"{self.source}_float32", verified=True)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports (no model bytes)."""
        return {
            **self.common_dict(),
            "float_ops": None if self.float_ops is None else list(self.float_ops),
            "edgetpu": None if self.edgetpu is None else self.edgetpu.to_dict(),
            "float_nodes": list(self.float_nodes),
            "methods": None if self.methods is None else self.methods.to_dict(),
        }

    def __str__(self) -> str:
        text = self.summary(self.recipe.name)
        if self.float_ops:
            text += (
                f"; {len(self.float_ops)} op(s) stayed float: {describe_float_ops(self.float_ops)}"
            )
        if self.float_nodes:
            text += f"; kept float on purpose: {', '.join(self.float_nodes)}"
        if self.methods is not None:
            text += f"\n{self.methods}"
        if self.edgetpu is not None:
            text += f"\n{self.edgetpu}"
        return text


@overload
def quantize(
    model: ModelLike,
    *,
    format: Literal["tflite"] | None = None,
    recipe: str | Recipe = "int8",
    representative_data: DataLike | None = None,
    input_type: str | None = None,
    output_type: str | None = None,
    per_channel: bool | None = None,
    calibration_samples: int | None = None,
    float_fallback: bool | None = None,
    float_nodes: Sequence[str] | None = None,
    methods: str | Sequence[str] | None = None,
    eval_data: DataLike | None = None,
    calibration_method: None = None,
    opset: None = None,
    target: str | None = None,
    compiler: str | os.PathLike[str] | None = None,
    seed: int = 0,
    safe_mode: bool = True,
    progress: bool = False,
) -> QuantizationResult: ...


@overload
def quantize(
    model: ModelLike,
    *,
    format: Literal["onnx"],
    recipe: str | OnnxRecipe = "int8",
    representative_data: DataLike | None = None,
    input_type: str | None = None,
    output_type: str | None = None,
    per_channel: bool | None = None,
    calibration_samples: int | None = None,
    float_fallback: bool | None = None,
    float_nodes: None = None,
    methods: None = None,
    eval_data: None = None,
    calibration_method: str | None = None,
    opset: int | None = None,
    target: None = None,
    compiler: None = None,
    seed: int = 0,
    safe_mode: bool = True,
    progress: bool = False,
) -> OnnxQuantizationResult: ...


def quantize(
    model: ModelLike,
    *,
    format: str | None = None,
    recipe: str | Recipe | OnnxRecipe = "int8",
    representative_data: DataLike | None = None,
    input_type: str | None = None,
    output_type: str | None = None,
    per_channel: bool | None = None,
    calibration_samples: int | None = None,
    float_fallback: bool | None = None,
    float_nodes: Sequence[str] | None = None,
    methods: str | Sequence[str] | None = None,
    eval_data: DataLike | None = None,
    calibration_method: str | None = None,
    opset: int | None = None,
    target: str | None = None,
    compiler: str | os.PathLike[str] | None = None,
    seed: int = 0,
    safe_mode: bool = True,
    progress: bool = False,
) -> QuantizationResult | OnnxQuantizationResult:
    """Quantize a Keras model or SavedModel to ``.tflite`` (or ``.onnx``) with one recipe.

    Args:
        model: A Keras model (Keras 3 or tf-keras), a SavedModel, or a path to one; for
            ``format="onnx"`` a Keras model or a float ``.onnx``.
        format: ``"tflite"`` (default: the TFLite converter) or ``"onnx"`` (tf2onnx export,
            verified against Keras, then ONNX Runtime's quantizers; see
            :mod:`tfcompress.quantization.onnx_ptq`). Default: ``"onnx"`` for an
            :class:`~tfcompress.quantization.onnx_ptq.OnnxRecipe`, else ``"tflite"``.
        recipe: ``"dynamic"``, ``"float16"``, ``"int8"``, ``"int16x8"`` (``.tflite`` only) or
            a :class:`Recipe` (an ``OnnxRecipe`` for ONNX).
        representative_data: Calibration samples (needed by ``int8`` and ``int16x8``): any
            source :func:`tfcompress.data.load_data` reads. Labels are ignored.
        input_type: Overrides the recipe's input dtype (``int8``/``uint8`` for ``int8``);
            ``.tflite`` only (ONNX models keep float32 inputs and outputs).
        output_type: Overrides the recipe's output dtype; defaults to ``input_type``.
        per_channel: Overrides per-channel weight quantization.
        calibration_samples: Overrides how many samples calibrate (a seeded random subset).
        float_fallback: ``int8``/``int16x8``: keep ops without an integer kernel in float
            (listed in ``result.float_ops``) instead of raising :class:`ConversionError`;
            ``.tflite`` only.
        float_nodes: ``int8``: op outputs to keep in float, as
            :func:`~tfcompress.quantization.selective.rank_layers` names them (the
            converter's ``denylisted_nodes``); ``.tflite`` only. Overrides the recipe's.
        methods: ``int8``: post-training methods to try against the converter's plain int8
            (``"auto"``, ``"none"``, or names such as ``["equalize", "bias-correction"]``;
            see :mod:`tfcompress.quantization.methods`); every candidate and plain int8 are
            scored against the float32 reference and the best one that is not worse on any
            output is kept (plain int8 otherwise), its methods recorded in
            ``result.recipe.methods``. Default: ``"auto"`` when ``eval_data`` is given,
            else none, so ``int8`` alone means the converter's int8. A recipe that names
            methods applies them as given (a replay) and is still compared.
        eval_data: ``int8``: the samples the methods are scored on (labels unused; at most
            1,000, a seeded subset); default: the calibration samples.
        calibration_method: ``format="onnx"``, ``int8``: ``"minmax"`` (default),
            ``"entropy"`` or ``"percentile"`` (ONNX Runtime's calibrators).
        opset: ``format="onnx"``: the ONNX opset of the export (13 to 18, default 17).
        target: ``"edgetpu"``: the ``int8`` recipe as Coral's compiler wants it (uint8 input
            and output unless ``input_type="int8"``, a static batch of 1), then the Edge TPU
            linter, and ``edgetpu_compiler`` where it is installed; ``result.edgetpu`` holds
            the verdict (see :mod:`tfcompress.targets.edgetpu.target`).
        compiler: ``target="edgetpu"``: the ``edgetpu_compiler`` to run (default: the one on
            PATH, if any).
        seed: Seed of the calibration subset.
        safe_mode: See :func:`tfcompress.models.load_model` (paths only).
        progress: Show a progress bar during calibration.

    Returns:
        The quantized model with its recipe, sizes and converter warnings: a
        :class:`QuantizationResult` (``.tflite``) or an ``OnnxQuantizationResult`` (same
        interface).

    Raises:
        InvalidInputError: Unknown format, recipe, method or option (``int16x8`` for ONNX,
            a ``.tflite``-only option with ``format="onnx"`` or the reverse), calibration
            data missing, ``calibration_samples`` below 1, methods or eval data on a recipe
            other than ``int8``, or ``methods`` with a recipe that names methods.
        UnsupportedModelError: A recipe names weight methods and the model cannot be
            rewritten (a SavedModel or subclassed model; ``methods=`` skips such candidates).
        InvalidArgumentTypeError: ``model`` (or ``calibration_samples``) of the wrong type.
        InvalidDataError: Calibration data does not fit the model.
        ConversionError: The converter rejected the model, or an ``int8``/``int16x8`` model
            has ops without an integer kernel and ``float_fallback`` is off (the message
            names them), or an integer input/output type could not be kept; for ONNX, the
            export failed its check against Keras or ONNX Runtime failed; for the Edge TPU,
            the compiler failed, refused the model or ran past its time limit.
        BackendUnavailableError: ``compiler`` is not an executable.

    Example:
        >>> result = tfcompress.quantize(model, recipe="int8", representative_data=x_train)
        >>> result.save("model_int8.tflite")  # doctest: +SKIP
        >>> onnx = tfcompress.quantize(model, format="onnx", representative_data=x_train,
        ...     calibration_method="entropy")  # doctest: +SKIP
        >>> onnx.save("model_int8.onnx")  # doctest: +SKIP
    """
    if calibration_samples is not None:
        check_count(calibration_samples, "calibration_samples", "e.g. 200 (the default)")
    check_target(target, compiler=compiler)
    if _resolve_format(format, recipe) == "onnx":
        if target is not None:
            raise InvalidInputError(
                f"--target {target} makes a .tflite; drop --format onnx (or the target)."
            )
        from tfcompress.quantization.onnx_ptq import quantize_onnx

        _refuse_for_onnx(
            input_type=input_type,
            output_type=output_type,
            float_fallback=float_fallback,
            float_nodes=float_nodes,
        )
        if methods is not None or eval_data is not None:
            raise InvalidInputError(
                "methods and eval_data (the post-training methods) apply to .tflite only: "
                "ONNX Runtime calibrates its own way (calibration_method); drop them, or use "
                "--format tflite."
            )
        if isinstance(recipe, Recipe):
            raise InvalidInputError(
                f"a tflite Recipe ({recipe.name!r}) cannot make an .onnx; pass the recipe's "
                "name or an OnnxRecipe with format='onnx'."
            )
        return quantize_onnx(
            model,
            recipe=recipe,
            representative_data=representative_data,
            per_channel=per_channel,
            calibration_samples=calibration_samples,
            calibration_method=calibration_method,
            opset=opset,
            seed=seed,
            safe_mode=safe_mode,
            progress=progress,
        )
    if calibration_method is not None or opset is not None:
        option = "calibration_method" if calibration_method is not None else "opset"
        raise InvalidInputError(
            f"{option} applies to format='onnx' (--format onnx); the TFLite converter "
            "calibrates min-max ranges and has no opset."
        )
    if not isinstance(recipe, str | Recipe):
        raise InvalidInputError("an OnnxRecipe makes an .onnx: pass format='onnx'.")
    io_options: dict[str, Any] = {
        "input_type": input_type,
        "output_type": output_type or input_type,
        "float_fallback": float_fallback,
    }
    if target == "edgetpu":
        io_options = edgetpu_options(
            recipe, input_type=input_type, output_type=output_type, float_fallback=float_fallback
        )
    loaded = resolve_model(model, safe_mode=safe_mode)
    chosen = Recipe.coerce(recipe).with_options(
        per_channel=per_channel,
        calibration_samples=calibration_samples,
        float_nodes=float_nodes,
        **io_options,
    )
    plan = plan_candidates(chosen.name, chosen.methods, methods, has_eval=eval_data is not None)
    calibration = _calibration_set(loaded, chosen, representative_data, seed)
    configure_for = _configure_for(calibration, progress)
    report = None
    if plan[0] and calibration is not None:
        outcome = run_methods(
            loaded, chosen, plan, calibration, eval_data, configure_for=configure_for, seed=seed
        )
        reference, quantized = outcome.reference, outcome.quantized
        chosen, report = outcome.recipe, outcome.report
    else:
        # One trace for both outputs (None: the float32 defaults); float32 asks for the
        # reference itself, converted once.
        configures: list[Configure | None] = [None]
        if chosen.name != "float32":
            configures.append(configure_for(chosen, bool(chosen.float_nodes)))
        conversions = convert_all(loaded, configures, batch_size=chosen.batch_size)
        reference, quantized = conversions[0], conversions[-1]
        if chosen.float_nodes:  # calibrated only above: quantized here with those kept float
            quantized = quantize_calibrated(quantized, chosen, source=model_name(loaded))
    float_ops = None
    if chosen.spec.float_fallback:  # integer activations: check what the file really holds
        float_ops = check_integer_model(
            quantized.content,
            recipe=chosen.name,
            input_type=chosen.input_type,
            output_type=chosen.output_type,
            float_fallback=chosen.float_fallback or bool(chosen.float_nodes),
            source=model_name(loaded),
        )
        check_kept_float(float_ops, chosen, source=model_name(loaded))
    logger.info("quantized %s with %s in %.1fs", model_name(loaded), chosen.name, quantized.seconds)
    verdict = None
    if target == "edgetpu":
        verdict = edgetpu_verdict(quantized.content, compiler=compiler)
    return QuantizationResult(
        recipe=chosen,
        model_content=quantized.content,
        reference_content=reference.content,
        source=model_name(loaded),
        conversion_seconds=quantized.seconds,
        calibration_samples=0 if calibration is None else len(calibration),
        warnings=quantized.warnings,
        float_ops=float_ops,
        edgetpu=verdict,
        float_nodes=chosen.float_nodes,
        methods=report,
    )


def _resolve_format(format: str | None, recipe: object) -> str:
    from tfcompress.quantization.onnx_ptq import OnnxRecipe

    implied = "onnx" if isinstance(recipe, OnnxRecipe) else None
    if format is None:
        return implied or "tflite"
    if format not in FORMATS:
        raise InvalidInputError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}.")
    if implied is not None and format != implied:
        raise InvalidInputError("an OnnxRecipe makes an .onnx: pass format='onnx'.")
    return format


def _refuse_for_onnx(**options: Any) -> None:
    """ONNX Runtime's models keep float I/O and leave unquantizable ops float on their own."""
    for option, value in options.items():
        if value is not None and not (option.endswith("_type") and value == "float32"):
            flag = "--" + option.replace("_", "-")
            raise InvalidInputError(
                f"{option} ({flag}) applies to .tflite only: ONNX Runtime's quantized models "
                "keep float32 inputs and outputs and leave ops without an int8 kernel in float "
                "on their own; drop it, or use --format tflite."
            )


def _calibration_set(
    model: Any, recipe: Recipe, data: DataLike | None, seed: int
) -> Dataset | None:
    return calibration_for(
        model_signature(model),
        data,
        recipe_name=recipe.name,
        needs_calibration=recipe.spec.needs_calibration,
        limit=recipe.calibration_samples,
        seed=seed,
    )


def _configure_for(calibration: Dataset | None, progress: bool) -> ConfigureFor:
    """The converter settings of a recipe, stopping after calibration when asked."""
    tf = tensorflow()

    def configure_for(recipe: Recipe, calibrate: bool) -> Configure:
        def configure(converter: Any) -> None:
            recipe.spec.configure(converter, recipe, tf)
            if not recipe.per_channel:
                converter._experimental_disable_per_channel = True  # the API's only switch
            if calibration is not None:
                converter.representative_dataset = lambda: _representative(calibration, progress)
            if calibrate:  # quantized later: with nodes kept float, or edited ranges
                calibrate_only(converter)

        return configure

    return configure_for


def _representative(calibration: Dataset, progress: bool) -> Iterator[Any]:
    """One sample at a time: a list for a single input, a dict by input name for several.

    The converter calibrates a signature's inputs by name from a dict, so several inputs
    cannot be fed in the wrong order.
    """
    x = calibration.x
    indices = tqdm(range(len(calibration)), desc="calibrating", unit="sample", disable=not progress)
    for i in indices:
        if isinstance(x, dict):
            yield {name: array[i : i + 1] for name, array in x.items()}
        else:
            yield [x[i : i + 1]]
