"""Post-training quantization: :func:`quantize` makes the artifact a ``PTQConfig`` describes.

The TFLite converter (or LiteRT Quantizer) makes a ``.tflite``; an ``OnnxRecipe`` hands the
work to :mod:`tfcompress.quantization.onnx_ptq`.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, Unpack

from tfcompress._config_fields import check_option_names, config_or_options
from tfcompress.data import DataLike
from tfcompress.data.calibration import calibration_set
from tfcompress.errors import InvalidInputError
from tfcompress.models.loading import (
    KerasFile,
    ModelLike,
    OnnxModel,
    TFLiteModel,
    loaded_keras,
    model_name,
    open_model,
    resolve_model,
)
from tfcompress.models.quantized import refuse_quantized
from tfcompress.models.signature import model_signature
from tfcompress.quantization.artifact import QuantizedArtifact
from tfcompress.quantization.config import ONNX_NO_METHODS, PTQConfig, PTQOptions, check_engine
from tfcompress.quantization.converter import warm_converter
from tfcompress.quantization.converter_ptq import converter_result
from tfcompress.quantization.engines import choose_engine
from tfcompress.quantization.float_ops import describe_float_ops
from tfcompress.quantization.layer_errors import LayerErrors, contained_layer_errors
from tfcompress.quantization.methods.report import MethodsReport
from tfcompress.quantization.methods.selection import check_methods_gate
from tfcompress.quantization.notes import artifact_notes
from tfcompress.quantization.recipes import Recipe
from tfcompress.targets.base import get_target, verdict_under, verdicts_by_key
from tfcompress.targets.edgetpu.target import EdgeTPUVerdict

if TYPE_CHECKING:
    from tfcompress.quantization.onnx_ptq import OnnxQuantizationResult
    from tfcompress.testing.config import GateConfig

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class QuantizationResult(QuantizedArtifact):
    """A quantized ``.tflite`` and what it cost to make.

    Attributes (besides :class:`~tfcompress.quantization.artifact.QuantizedArtifact`'s):
        conversion_seconds: Wall time of the quantized conversion: the model's trace (shared
            with the reference) plus its conversion and calibration.
        float_ops: For ``int8``/``int16x8``: the ops that stayed float because they have no
            integer kernel (or were kept float on purpose, ``float_nodes``), one name per
            operator in graph order (always empty with ``recipe.integer_only``); None for the
            recipes whose activations are float anyway. See
            :mod:`tfcompress.quantization.float_ops`.
        target: The deployment target asked for (:func:`tfcompress.targets.base.list_targets`),
            or None.
        target_verdict: The target's own check of the artifact (the Edge TPU: the linter's
            prediction and, where ``edgetpu_compiler`` ran, its parsed verdict and compiled
            model); None without a target or for targets with no check. Also readable as
            ``result.edgetpu`` and filed in JSON under the target's key (``edgetpu``).
        float_nodes: The op outputs kept float on purpose (``recipe.float_nodes`` and, with
            the converter, the ops of ``float`` rules), see
            :mod:`tfcompress.quantization.selective`; their ops are also in ``float_ops``.
        engine: ``converter`` or ``litert-quantizer``: what made ``model_content``.
        notes: What to know about the file: rewrites of the input (LiteRT Quantizer), rules
            not applied to some ops, float islands, float I/O, ops XNNPACK will not run
            (see :mod:`tfcompress.quantization.notes`).
        layer_errors: With ``layer_errors=True``: SNR, cosine, RMSE and max abs of every
            quantized tensor against the float reference, worst first.
        methods: With post-training methods (``methods=``, ``eval_data=`` or a recipe that
            names methods): every candidate and plain int8 scored against the float32
            reference, which was kept and why, and what each method changed; else None. See
            :mod:`tfcompress.quantization.methods`.
        calibration: LiteRT Quantizer: which activation calibration made the file
            (``min-max`` or ``moving-average``) and, with ``eval_data``, both candidates'
            per-output SNR and why one was kept
            (:class:`~tfcompress.quantization.engines.calibration.CalibrationChoice`); None
            for the converter and for recipes that calibrate nothing.

    Example:
        >>> result = tfcompress.quantize(model, recipe="int8", representative_data=x)
        ... # doctest: +SKIP
        >>> result.float_ops  # a LayerNormalization's NEG has no int8 kernel  # doctest: +SKIP
        ('NEG',)
    """

    format: ClassVar[str] = "tflite"

    recipe: Recipe
    warnings: tuple[str, ...] = ()
    float_ops: tuple[str, ...] | None = None
    target: str | None = None
    target_verdict: Any = None
    float_nodes: tuple[str, ...] = ()
    engine: str = "converter"
    notes: tuple[str, ...] = ()
    layer_errors: LayerErrors | None = None
    methods: MethodsReport | None = None
    config: Any = None
    calibration: Any = None

    @property
    def model(self) -> TFLiteModel:
        """The quantized model, ready for :func:`tfcompress.evaluate` or a runner."""
        return TFLiteModel(
            self.model_content, label=f"{self.source}_{self.recipe.name}", verified=True
        )

    @property
    def edgetpu(self) -> EdgeTPUVerdict | None:
        """The Edge TPU's verdict, when the target was the Edge TPU (the documented name)."""
        return verdict_under(self.target, self.target_verdict, "edgetpu")

    @property
    def reference(self) -> TFLiteModel:
        """The float32 ``.tflite`` of the same model."""
        return TFLiteModel(self.reference_content, label=f"{self.source}_float32", verified=True)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports (no model bytes)."""
        return {
            **self.common_dict(),
            "float_ops": None if self.float_ops is None else list(self.float_ops),
            **verdicts_by_key(self.target, self.target_verdict),
            "float_nodes": list(self.float_nodes),
            "engine": self.engine,
            "notes": list(self.notes),
            "layer_errors": None if self.layer_errors is None else self.layer_errors.to_dict(),
            "methods": None if self.methods is None else self.methods.to_dict(),
            "calibration": None if self.calibration is None else self.calibration.to_dict(),
        }

    def __str__(self) -> str:
        text = self.summary(f"{self.recipe.name}, {self.engine}")
        if self.float_ops:
            text += (
                f"; {len(self.float_ops)} op(s) stayed float: {describe_float_ops(self.float_ops)}"
            )
        if self.float_nodes:
            text += f"; kept float on purpose: {', '.join(self.float_nodes)}"
        text += "".join(f"\n- {note}" for note in self.notes)
        table = None if self.layer_errors is None else self.layer_errors.table()
        parts = (table, self.methods, self.calibration, self.target_verdict)
        return text + "".join(f"\n{part}" for part in parts if part is not None)


def quantize(
    model: ModelLike,
    *,
    config: PTQConfig | None = None,
    representative_data: DataLike | None = None,
    eval_data: DataLike | None = None,
    layer_errors: bool = False,
    safe_mode: bool = True,
    progress: bool = False,
    gate: GateConfig | None = None,
    **options: Unpack[PTQOptions],
) -> QuantizationResult | OnnxQuantizationResult:
    """Quantize a Keras model, a SavedModel or a float ``.tflite`` with one recipe.

    What decides the artifact is one :class:`~tfcompress.quantization.config.PTQConfig`:
    pass it as ``config=``, or pass its options as keywords (``**options``),
    which build the same config (:meth:`PTQConfig.from_options`). Not both: a keyword next
    to ``config=`` is refused. ``result.config`` is the config that made the file, so
    ``quantize(model, config=result.config, representative_data=...)`` makes it again.

    Args:
        model: A Keras model (Keras 3 or tf-keras), a SavedModel, a float ``.tflite`` (LiteRT
            Quantizer), or a path to one; for ``format="onnx"`` a Keras model or a float
            ``.onnx``.
        config: Everything that decides the artifact: the recipe with its overrides (an
            ``OnnxRecipe`` for ``.onnx``), seed, target and its options, engine, methods.
            None: built from the keyword options below.
        representative_data: Calibration samples (needed by ``int8`` and ``int16x8``): any
            source :func:`tfcompress.data.load_data` reads. Labels are ignored.
        eval_data: ``int8``: the samples the post-training methods are scored on (labels
            unused without ``gate``; at most 1,000, a seeded subset; with ``gate``, every
            sample and its labels); default: the calibration samples. Alone it turns no
            method on (and is refused with the converter: it would decide nothing; see
            ``gate``). For a ``.tflite`` (LiteRT Quantizer): both activation calibrations
            (full min/max and LiteRT Quantizer's moving average) are made and scored on it,
            the better kept (``result.calibration``).
        gate: ``int8``, with ``eval_data``: the gate, as ``check_gate(config=...)`` takes it
            (``tfcompress.testing.GateConfig.from_options(min_snr=25)``; what quantize runs
            its own way is refused: :func:`~.methods.selection.check_methods_gate`), that
            decides the post-training methods: plain int8 is judged first and ``"auto"``
            runs when it fails (or when ``methods`` asks); among the candidates that pass,
            the smallest, then the largest margin on the weakest output is kept
            (:func:`~.methods.selection.choose`). For a ``.tflite`` (LiteRT Quantizer) the
            same rule picks the calibration. Refused where nothing is decided (another
            recipe, ``methods="none"``, ONNX).
        layer_errors: Also measure every quantized tensor against the float reference on
            up to 64 of the representative samples (``result.layer_errors``; ``.tflite``).
        safe_mode: See :func:`tfcompress.models.load_model` (paths only).
        progress: Show a progress bar during calibration.
        **options: The options of :class:`~tfcompress.quantization.config.PTQOptions`,
            which build the config: ``format``, ``recipe`` and the recipe's fields
            (``input_type``, ``calibration_samples``, ``integer_only``, ``static_batch``,
            ``rules``... as :class:`~tfcompress.quantization.recipes.Recipe` documents
            them), ``engine``, ``methods``, ``target`` with ``compiler`` or
            ``target_options``, ``seed``, ``batch_dims`` and ``input_values`` (as
            :class:`~tfcompress.quantization.config.PTQConfig` documents them). An unknown
            one is refused, naming the valid ones.

    Returns:
        The quantized model with its recipe, config, sizes and converter warnings: a
        :class:`QuantizationResult` (``.tflite``) or an ``OnnxQuantizationResult`` (same
        interface).

    Raises:
        InvalidInputError: A keyword option next to ``config=``; what
            :class:`~tfcompress.quantization.config.PTQConfig` refuses (an unknown format,
            recipe, engine, target or method, an option of the other format, a bad count);
            calibration data missing, methods or eval data on a recipe other than ``int8``,
            eval data no method would use, a gate that would decide nothing, or methods
            named that cannot run on the model (a weight method on a SavedModel).
        UnsupportedModelError: A recipe names weight methods and the model cannot be
            rewritten (a SavedModel or subclassed model; ``methods=`` skips such candidates).
        InvalidArgumentTypeError: ``model`` (or ``calibration_samples``) of the wrong type.
        InvalidDataError: Calibration data does not fit the model.
        ConversionError: The converter rejected the model, or an ``integer_only`` model
            has ops without an integer kernel (the message names them), or an integer
            input/output type could not be kept, or the model converted without its weights
            (a SavedModel whose variables were not captured); for ONNX, the
            export failed its check against Keras or ONNX Runtime failed; for the Edge TPU,
            the compiler failed, refused the model or ran past its time limit.
        BackendUnavailableError: ``compiler`` is not an executable.

    Example:
        >>> result = tfcompress.quantize(model, recipe="int8", representative_data=x_train)
        >>> config = PTQConfig(recipe=Recipe("int8", per_channel=False), seed=1)
        >>> result = tfcompress.quantize(model, config=config, representative_data=x_train)
        >>> result.save("model_int8.tflite")  # doctest: +SKIP
        >>> onnx = tfcompress.quantize(model, format="onnx", representative_data=x_train,
        ...     calibration_method="entropy")  # doctest: +SKIP
        >>> onnx.save("model_int8.onnx")  # doctest: +SKIP
    """
    check_option_names(options, PTQOptions, taker="quantize", renamed=Recipe.renamed_keys)
    config = config_or_options(
        config,
        PTQConfig,
        options,
        PTQConfig.from_options,
        holds="the artifact",
        example="PTQConfig(recipe=...)",
        put_it="dataclasses.replace(config, ...) or Recipe(..., option=...)",
    )
    started = time.perf_counter()  # auto's budget counts what plain int8's call does too
    _check_gate(gate, config, eval_data)
    if config.format == "onnx":
        if layer_errors:
            raise InvalidInputError(
                "layer_errors (--layer-errors) applies to .tflite only: it compares LiteRT's "
                "tensors; drop it, or quantize the Keras model or SavedModel to a .tflite "
                "(--format tflite; an .onnx input stays an .onnx)."
            )
        if eval_data is not None:
            raise InvalidInputError(ONNX_NO_METHODS)
        return _onnx_result(model, config, representative_data, safe_mode, progress)
    warm_converter(model)  # its child imports TensorFlow while the model loads here
    if layer_errors and representative_data is None:
        raise InvalidInputError(
            "layer_errors (--layer-errors) compares tensors on sample inputs: pass "
            "representative_data (--data)."
        )
    if isinstance(model, str | os.PathLike):  # a Keras file: loaded in the converter's child
        model = open_model(model, safe_mode=safe_mode)
    loaded = resolve_model(model, safe_mode=safe_mode)
    refuse_quantized(loaded)  # said first: whatever else this file or config has against it
    if isinstance(loaded, OnnxModel):  # nothing converts ONNX to .tflite here
        raise InvalidInputError(
            f"{model_name(loaded)} is an ONNX model, which is quantized with ONNX Runtime to "
            "an .onnx: pass format='onnx' (--format onnx, or an --out named .onnx)."
        )
    chosen = config.recipe
    engine = choose_engine(config.engine, loaded, chosen)
    # The methods rewrite a Keras file where the converter loads it (its child).
    if isinstance(loaded, KerasFile) and engine != "converter":
        loaded = loaded_keras(loaded)
    if engine != config.engine:  # chosen for this model: does it fit the rest of the config?
        check_engine(engine, chosen, target=config.target, methods=config.methods)
    if gate is not None and engine != "converter" and not chosen.spec.needs_calibration:
        raise InvalidInputError(
            "gate= decides the post-training methods (the TFLite converter) or LiteRT "
            f"Quantizer's calibration; {model_name(loaded)} is quantized by {engine} with "
            f"{chosen.name!r}, which calibrates nothing: judge the result with "
            "tfcompress.check_gate instead."
        )
    feeding = {"batch_dims": config.batch_dims, "input_values": config.input_values}
    if engine == "litert-quantizer" and (config.batch_dims or config.input_values):
        if not isinstance(loaded, TFLiteModel):
            raise InvalidInputError(
                "batch_dims and input_values (--batch-dim, --input-value) cannot yet name the "
                "inputs of the float .tflite LiteRT Quantizer converts from this model: write "
                "that file first (quantize MODEL --recipe float32 --out float.tflite) and "
                "quantize it with them."
            )
        if representative_data is not None:  # read once here, in the file's own layout
            representative_data = calibration_set(
                model_signature(loaded),
                representative_data,
                limit=chosen.calibration_samples,
                seed=config.seed,
                **feeding,
            )
    if engine == "litert-quantizer":
        result = _litert_result(loaded, config, representative_data, progress, eval_data, gate)
    else:
        result = converter_result(
            loaded,
            chosen,
            representative_data,
            config.seed,
            progress,
            None if config.target is None else get_target(config.target),
            config.target_options,
            methods=config.methods,
            per_op_min_snr=config.per_op_min_snr,
            eval_data=eval_data,
            feeding=feeding,
            gate=gate,
            started=started,
        )
    # What made the file: the recipe kept (the methods it chose, if it searched).
    # The kept recipe records the per-op choice (float_nodes): the bar that made it is spent.
    spent = {"methods": None, "per_op_min_snr": None}
    result = replace(result, config=replace(config, recipe=result.recipe, **spent))
    if layer_errors:
        errors = contained_layer_errors(
            result.reference_content,
            result.model_content,
            representative_data,
            seed=config.seed,
            what=f"the layer-error report of {model_name(result.reference)!r}",
            feeding=feeding,
        )
        result = replace(result, layer_errors=errors)
    # Last: a step that fails above is its one error line, with no warning before it.
    return with_payoff_warnings(result)  # larger than its input, or nothing quantized


def _check_gate(gate: GateConfig | None, config: PTQConfig, eval_data: Any) -> None:
    """Refuse a gate that would decide nothing (see :func:`quantize`'s ``gate``)."""
    if gate is None:
        return
    check_methods_gate(gate)  # a GateConfig, every field of it honoured here
    if eval_data is None:
        raise InvalidInputError(
            "gate= judges the post-training methods on eval data: pass eval_data (--eval)."
        )
    recipe = config.recipe
    if config.format != "tflite" or recipe.name != "int8" or config.methods == "none":
        what = "methods='none'" if config.methods == "none" else f"recipe {recipe.name!r}"
        raise InvalidInputError(
            f"gate= decides which int8 post-training method is kept; with {what} none runs: "
            "drop gate= and judge the result with tfcompress.check_gate."
        )


def _onnx_result(
    model: ModelLike, config: PTQConfig, data: DataLike | None, safe_mode: bool, progress: bool
) -> OnnxQuantizationResult:
    from tfcompress.quantization.onnx_ptq import quantize_onnx

    result = quantize_onnx(
        model,
        recipe=config.recipe,  # type: ignore[arg-type]
        representative_data=data,
        seed=config.seed,
        safe_mode=safe_mode,
        progress=progress,
        batch_dims=config.batch_dims,
        input_values=config.input_values,
    )
    return replace(with_payoff_warnings(result), config=config)


def with_payoff_warnings(result: Any) -> Any:
    """``result`` with a warning when its file is larger than its input or quantized nothing.

    Logged as well (the CLI prints it): such a file is valid and runs, but did not pay off
    (:mod:`tfcompress.quantization.payoff`).
    """
    from tfcompress.quantization.payoff import payoff_warnings

    said = payoff_warnings(result)
    for sentence in said:
        logger.warning("%s: %s", result.source, sentence)
    return replace(result, warnings=(*result.warnings, *said)) if said else result


def _litert_result(
    loaded: Any,
    config: PTQConfig,
    data: DataLike | None,
    progress: bool,
    eval_data: DataLike | None,
    gate: GateConfig | None,
) -> QuantizationResult:
    from tfcompress.quantization.engines.litert_quantizer import quantize_litert

    chosen = config.recipe
    # eval_data: both calibrations are made and the better kept (engines/calibration.py).
    made = quantize_litert(
        loaded,
        chosen,
        representative_data=data,
        seed=config.seed,
        progress=progress,
        eval_data=eval_data,
        gate=gate,
    )
    if made.calibration is not None and made.calibration.measured:
        # The calibration kept is part of what made the file: a replay makes it again.
        chosen = replace(chosen, calibration=made.calibration.kept)
    return QuantizationResult(
        recipe=chosen,
        model_content=made.content,
        reference_content=made.reference,
        source=model_name(loaded),
        conversion_seconds=made.seconds,
        calibration_samples=made.calibration_samples,
        float_ops=made.float_ops,
        target=config.target,
        engine="litert-quantizer",
        notes=(*made.notes, *artifact_notes(made.content)),
        calibration=made.calibration,
    )
