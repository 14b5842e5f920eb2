"""Post-training quantization: :func:`quantize` makes the artifact a ``PTQConfig`` describes.

The TFLite converter (or LiteRT Quantizer) makes a ``.tflite``; an ``OnnxRecipe`` hands the
work to :mod:`tfcompress.quantization.onnx_ptq`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal, overload

from tfcompress._config_fields import config_or_options
from tfcompress.data import DataLike, Dataset
from tfcompress.data.calibration import calibration_for, calibration_set
from tfcompress.errors import InvalidInputError
from tfcompress.models.loading import (
    ModelLike,
    OnnxModel,
    TFLiteModel,
    model_name,
    resolve_model,
)
from tfcompress.models.quantized import refuse_quantized
from tfcompress.models.signature import model_signature
from tfcompress.quantization.artifact import QuantizedArtifact
from tfcompress.quantization.config import PTQConfig, check_engine
from tfcompress.quantization.converter import (
    Conversion,
    ConverterSettings,
    convert_all,
    warm_converter,
)
from tfcompress.quantization.engines import choose_engine, converter_float_nodes
from tfcompress.quantization.float_ops import check_integer_model, describe_float_ops
from tfcompress.quantization.layer_errors import LayerErrors
from tfcompress.quantization.methods.apply import ConfigureFor, check_runnable, run_methods
from tfcompress.quantization.methods.catalog import (
    AUTO_CANDIDATES,
    auto_if_plain_fails,
    plan_candidates,
)
from tfcompress.quantization.methods.report import MethodsReport
from tfcompress.quantization.methods.selection import check_methods_gate
from tfcompress.quantization.notes import artifact_notes
from tfcompress.quantization.recipes import Recipe
from tfcompress.quantization.rules import Rule
from tfcompress.quantization.selective import (
    check_kept_float,
    quantize_calibrated,
)
from tfcompress.quantization.weightless import check_weights_captured
from tfcompress.targets.base import Target, get_target, verdict_under, verdicts_by_key
from tfcompress.targets.edgetpu.target import EdgeTPUVerdict

if TYPE_CHECKING:
    from tfcompress.quantization.onnx_ptq import OnnxQuantizationResult, OnnxRecipe
    from tfcompress.testing.config import GateConfig

logger = logging.getLogger(__name__)


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
        config: The :class:`~tfcompress.quantization.config.PTQConfig` that made
            ``model_content``: its recipe is ``recipe`` (the methods kept, when methods were
            tried), so ``quantize(model, config=result.config, representative_data=...)``
            makes the same file again.
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
    model_content: bytes = field(repr=False)
    reference_content: bytes = field(repr=False)
    source: str
    conversion_seconds: float
    calibration_samples: int
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
        if self.layer_errors is not None:
            text += f"\n{self.layer_errors.table()}"
        if self.methods is not None:
            text += f"\n{self.methods}"
        if self.calibration is not None:
            text += f"\n{self.calibration}"
        if self.target_verdict is not None:
            text += f"\n{self.target_verdict}"
        return text


@overload
def quantize(
    model: ModelLike,
    *,
    config: None = None,
    representative_data: DataLike | None = None,
    eval_data: DataLike | None = None,
    layer_errors: bool = False,
    safe_mode: bool = True,
    progress: bool = False,
    gate: GateConfig | None = None,
    format: Literal["tflite"] | None = None,
    recipe: str | Recipe | None = None,
    input_type: str | None = None,
    output_type: str | None = None,
    per_channel: bool | None = None,
    calibration_samples: int | None = None,
    integer_only: bool | None = None,
    static_batch: int | None = None,
    float_nodes: Sequence[str] | None = None,
    rules: Sequence[Rule | dict[str, Any]] | None = None,
    block_size: int | None = None,
    engine: str | None = None,
    methods: str | Sequence[str] | None = None,
    calibration_method: None = None,
    opset: None = None,
    target: str | None = None,
    compiler: str | os.PathLike[str] | None = None,
    target_options: Mapping[str, Any] | None = None,
    seed: int | None = None,
    batch_dims: Mapping[str, int] | None = None,
    input_values: Mapping[str, float] | None = None,
) -> QuantizationResult: ...


@overload
def quantize(
    model: ModelLike,
    *,
    config: None = None,
    representative_data: DataLike | None = None,
    eval_data: None = None,
    layer_errors: bool = False,
    safe_mode: bool = True,
    progress: bool = False,
    gate: None = None,
    format: Literal["onnx"],
    recipe: str | OnnxRecipe | None = None,
    input_type: str | None = None,
    output_type: str | None = None,
    per_channel: bool | None = None,
    calibration_samples: int | None = None,
    integer_only: bool | None = None,
    static_batch: None = None,
    float_nodes: None = None,
    rules: None = None,
    block_size: None = None,
    engine: None = None,
    methods: None = None,
    calibration_method: str | None = None,
    opset: int | None = None,
    target: None = None,
    compiler: None = None,
    target_options: None = None,
    seed: int | None = None,
    batch_dims: Mapping[str, int] | None = None,
    input_values: Mapping[str, float] | None = None,
) -> OnnxQuantizationResult: ...


@overload
def quantize(
    model: ModelLike,
    *,
    config: PTQConfig,
    representative_data: DataLike | None = None,
    eval_data: DataLike | None = None,
    layer_errors: bool = False,
    safe_mode: bool = True,
    progress: bool = False,
    gate: GateConfig | None = None,
) -> QuantizationResult | OnnxQuantizationResult: ...


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
    format: str | None = None,
    recipe: str | Recipe | OnnxRecipe | None = None,
    input_type: str | None = None,
    output_type: str | None = None,
    per_channel: bool | None = None,
    calibration_samples: int | None = None,
    integer_only: bool | None = None,
    static_batch: int | None = None,
    float_nodes: Sequence[str] | None = None,
    rules: Sequence[Rule | dict[str, Any]] | None = None,
    block_size: int | None = None,
    engine: str | None = None,
    methods: str | Sequence[str] | None = None,
    calibration_method: str | None = None,
    opset: int | None = None,
    target: str | None = None,
    compiler: str | os.PathLike[str] | None = None,
    target_options: Mapping[str, Any] | None = None,
    seed: int | None = None,
    batch_dims: Mapping[str, int] | None = None,
    input_values: Mapping[str, float] | None = None,
) -> QuantizationResult | OnnxQuantizationResult:
    """Quantize a Keras model, a SavedModel or a float ``.tflite`` with one recipe.

    What decides the artifact is one :class:`~tfcompress.quantization.config.PTQConfig`:
    pass it as ``config=``, or pass its options as keywords (from ``format`` on below),
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
            sample and its labels); default: the calibration samples. Eval data alone does
            not turn the methods on (and is refused with the converter: it would decide
            nothing): with ``gate`` too, plain int8 is judged first and ``"auto"`` runs
            only when it fails. For a ``.tflite`` (LiteRT Quantizer):
            both activation calibrations (full min/max and LiteRT Quantizer's moving
            average) are made and scored on it, the better kept (``result.calibration``).
        gate: ``int8``, with ``eval_data``: the gate, as ``check_gate(config=...)`` takes it
            (``tfcompress.testing.GateConfig.from_options(min_snr=25)``: its outputs,
            metrics, thresholds or checks and settings; the CLI's ``--min-snr``,
            ``--max-drop``...; its ``threads``, ``batch_dims``, ``input_values`` and a
            backend other than ``"cpu"`` are refused: quantize's own config feeds the
            samples, on LiteRT's CPU) the post-training methods are
            decided by: plain int8 is judged first and ``"auto"`` runs when it fails (or when
            ``methods`` asks); among the candidates that pass, the smallest, then the largest
            margin on the weakest output is kept
            (:func:`~tfcompress.quantization.methods.selection.choose`). For a ``.tflite``
            (LiteRT Quantizer) the same rule picks the calibration (min/max or moving
            average). Refused where nothing is decided (another recipe, ``methods="none"``,
            ONNX).
        layer_errors: Also measure every quantized tensor against the float reference on
            up to 64 of the representative samples (``result.layer_errors``; ``.tflite``).
        safe_mode: See :func:`tfcompress.models.load_model` (paths only).
        progress: Show a progress bar during calibration.
        format: ``"tflite"`` (default: the TFLite converter) or ``"onnx"`` (tf2onnx export,
            verified against Keras, then ONNX Runtime's quantizers; see
            :mod:`tfcompress.quantization.onnx_ptq`). Default: ``"onnx"`` for an
            :class:`~tfcompress.quantization.onnx_ptq.OnnxRecipe`, else ``"tflite"``.
        recipe: ``"dynamic"``, ``"float16"``, ``"int8"`` (default; a target may name its
            own: ``float16`` for ``target="gpu"``), ``"int16x8"``
            (``.tflite`` only), ``"int4-weights"``, ``"int4-dynamic"`` (LiteRT Quantizer) or
            a :class:`Recipe` (an ``OnnxRecipe`` for ONNX). The options below override its
            fields.
        input_type: The recipe's input dtype (``int8``/``uint8`` for ``int8``); ``.tflite``
            only (ONNX models keep float32 inputs and outputs).
        output_type: The recipe's output dtype; defaults to ``input_type``.
        per_channel: Per-channel weight quantization (False: per tensor).
        calibration_samples: How many samples calibrate (a seeded random subset).
        integer_only: ``int8``/``int16x8``: raise :class:`ConversionError` for a model with
            ops that have no integer kernel, instead of keeping them in float (the default,
            as in the TFLite converter; they are then listed in ``result.float_ops`` and
            logged as a warning). Integer-only hardware needs it; ``target="edgetpu"``
            implies it. ``.tflite`` only.
        static_batch: A static batch dimension for the file (1 for the Edge TPU; an RNN
            whose converter error says ``TensorListReserve ... element_shape to be static``
            converts with one). ``.tflite`` only.
        float_nodes: ``int8``: op outputs to keep in float, as
            :func:`~tfcompress.quantization.selective.rank_layers` names them (the
            converter's ``denylisted_nodes``); ``.tflite`` only.
        rules: Per-op :class:`~tfcompress.quantization.rules.Rule` s (or their dicts), in
            order, on top of the recipe. See ``docs/quantization.md``.
        block_size: LiteRT Quantizer, weight-only/dynamic recipes: blockwise weight scales
            of 32, 64 or 128 values.
        engine: ``"converter"`` (the TFLite converter; the default for Keras and SavedModel
            input) or ``"litert-quantizer"`` (the default for a ``.tflite`` input and for the
            recipes only it makes). See :mod:`tfcompress.quantization.engines`.
        methods: ``int8``: post-training methods to try against the converter's plain int8
            (``"auto"``, ``"none"``, or names such as ``["equalize", "bias-correction"]``;
            see :mod:`tfcompress.quantization.methods`); every candidate and plain int8 are
            scored against the float32 reference (and judged by ``gate``) and one is kept by
            :func:`~tfcompress.quantization.methods.selection.choose` (plain int8 wins
            ties), its methods recorded in ``result.recipe.methods``. Candidates that cannot
            run on the model (weight methods on a SavedModel) are skipped by ``"auto"`` and
            refused when named. Default: none (the converter's int8), or ``"auto"`` when
            plain int8 fails ``gate``. A recipe that names methods applies them as given (a
            replay) and is still compared.
        calibration_method: ``format="onnx"``, ``int8``: ``"minmax"`` (default),
            ``"entropy"`` or ``"percentile"`` (ONNX Runtime's calibrators).
        opset: ``format="onnx"``: the ONNX opset of the export (13 to 18, default 17).
        target: ``"edgetpu"``: the ``int8`` recipe as Coral's compiler wants it (uint8 input
            and output unless ``input_type="int8"``, a static batch of 1), then the Edge TPU
            linter, and ``edgetpu_compiler`` where it is installed; ``result.edgetpu`` holds
            the verdict (see :mod:`tfcompress.targets.edgetpu.target`). ``"gpu"``:
            ``float16`` unless a recipe is named (``float32`` and ``int8`` too), a static
            batch (1 unless ``static_batch`` says), then the GPU check: compiled where LiteRT
            finds a GPU, checked statically otherwise (:mod:`tfcompress.targets.gpu.target`).
        compiler: ``target="edgetpu"``: the ``edgetpu_compiler`` to run (default: the one on
            PATH, if any); one of the target options.
        target_options: Options of the target's check, by name (its declared
            ``Target.options``; ``compiler`` is one); an option the target does not declare
            is refused.
        seed: Seed of the calibration subset (default 0).
        batch_dims: Input name -> the dimension of the calibration arrays that is its
            batch, for inputs whose signature cannot tell (``{"state": 1}``; ``--batch-dim``);
            the data is read in the model's own layout, as ``benchmark`` and ``gate`` read it.
        input_values: Input name -> one value fed on every calibration call, for inputs
            the data lacks (``{"sr": 16000}``; ``--input-value``).

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
    options = {
        "format": format,
        "recipe": recipe,
        "input_type": input_type,
        "output_type": output_type,
        "per_channel": per_channel,
        "calibration_samples": calibration_samples,
        "integer_only": integer_only,
        "static_batch": static_batch,
        "float_nodes": float_nodes,
        "rules": rules,
        "block_size": block_size,
        "engine": engine,
        "methods": methods,
        "calibration_method": calibration_method,
        "opset": opset,
        "target": target,
        "compiler": compiler,
        "target_options": target_options,
        "seed": seed,
        "batch_dims": batch_dims,
        "input_values": input_values,
    }
    config = config_or_options(
        config,
        PTQConfig,
        options,
        PTQConfig.from_options,
        holds="the artifact",
        example="PTQConfig(recipe=...)",
        put_it="dataclasses.replace(config, ...) or Recipe(..., option=...)",
    )
    return _quantize(
        model,
        config,
        representative_data=representative_data,
        eval_data=eval_data,
        layer_errors=layer_errors,
        safe_mode=safe_mode,
        progress=progress,
        gate=gate,
    )


def _quantize(
    model: ModelLike,
    config: PTQConfig,
    *,
    representative_data: DataLike | None,
    eval_data: DataLike | None,
    layer_errors: bool,
    safe_mode: bool,
    progress: bool,
    gate: GateConfig | None = None,
) -> QuantizationResult | OnnxQuantizationResult:
    """Make the artifact ``config`` describes (see :func:`quantize`)."""
    started = time.perf_counter()  # auto's budget counts what plain int8's call does too
    _check_gate(gate, config, eval_data)
    if config.format == "onnx":
        return _onnx_result(
            model, config, representative_data, eval_data, layer_errors, safe_mode, progress
        )
    warm_converter(model)  # its child imports TensorFlow while the model loads here
    if layer_errors and representative_data is None:
        raise InvalidInputError(
            "layer_errors (--layer-errors) compares tensors on sample inputs: pass "
            "representative_data (--data)."
        )
    loaded = resolve_model(model, safe_mode=safe_mode)
    refuse_quantized(loaded)  # said first: whatever else this file or config has against it
    if isinstance(loaded, OnnxModel):  # nothing converts ONNX to .tflite here
        raise InvalidInputError(
            f"{model_name(loaded)} is an ONNX model, which is quantized with ONNX Runtime to "
            "an .onnx: pass format='onnx' (--format onnx, or an --out named .onnx)."
        )
    chosen = config.recipe
    engine = choose_engine(config.engine, loaded, chosen)
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
        result = _litert_result(
            loaded,
            chosen,
            representative_data,
            config.seed,
            progress,
            eval_data=eval_data,
            gate=gate,
        )
        result = replace(result, target=config.target)
    else:
        result = _converter_result(
            loaded,
            chosen,
            representative_data,
            config.seed,
            progress,
            None if config.target is None else get_target(config.target),
            config.target_options,
            methods=config.methods,
            eval_data=eval_data,
            feeding=feeding,
            gate=gate,
            started=started,
        )
    # What made the file: the recipe kept (the methods it chose, if it searched).
    result = replace(result, config=replace(config, recipe=result.recipe, methods=None))
    if layer_errors:
        result = replace(
            result,
            layer_errors=_layer_errors(result, representative_data, config.seed, feeding),
        )
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
    model: ModelLike,
    config: PTQConfig,
    representative_data: DataLike | None,
    eval_data: DataLike | None,
    layer_errors: bool,
    safe_mode: bool,
    progress: bool,
) -> OnnxQuantizationResult:
    from tfcompress.quantization.onnx_ptq import quantize_onnx

    if layer_errors:
        raise InvalidInputError(
            "layer_errors (--layer-errors) applies to .tflite only: it compares LiteRT's "
            "tensors; drop it, or use --format tflite."
        )
    if eval_data is not None:
        raise InvalidInputError(
            "methods and eval_data (the post-training methods) apply to .tflite only: "
            "ONNX Runtime calibrates its own way (calibration_method); drop them, or use "
            "--format tflite."
        )
    result = quantize_onnx(
        model,
        recipe=config.recipe,  # type: ignore[arg-type]
        representative_data=representative_data,
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


def quantized_content(
    model: ModelLike,
    *,
    recipe: str | Recipe = "int8",
    representative_data: DataLike | None = None,
    calibration_samples: int | None = None,
    seed: int = 0,
) -> Conversion:
    """The quantized ``.tflite`` of :func:`quantize`, without converting the float32 reference.

    :func:`quantize` converts the float32 ``.tflite`` of the model too (its ``reference``,
    for the size ratio, layer errors and post-training methods). A caller that keeps only
    the quantized bytes (model selection measures and scores hundreds of them) saves that
    conversion here: the model is traced once and converted once, by the same converter
    settings, calibration subset and seed, so ``content`` is byte for byte
    ``quantize(model, recipe=recipe, representative_data=..., calibration_samples=...,
    seed=seed).model_content``. The same checks run on the file (ops without an integer
    kernel are logged, or refused by an ``integer_only`` recipe; weights not captured).

    Args:
        model: A Keras model (Keras 3 or tf-keras), a SavedModel, or a path to one.
        recipe: A recipe name or :class:`Recipe` the TFLite converter makes, without
            post-training methods.
        representative_data: Calibration samples (needed by ``int8`` and ``int16x8``).
        calibration_samples: Overrides how many samples calibrate (a seeded random subset).
        seed: Seed of the calibration subset.

    Returns:
        The quantized flatbuffer (``content``), the trace and conversion time (``seconds``)
        and the converter's ``warnings``.

    Raises:
        InvalidInputError: An unknown recipe, one only LiteRT Quantizer makes, a ``.tflite``
            model, a recipe that names post-training methods (they are scored against the
            float32 reference: use :func:`quantize`), calibration data missing, or
            ``calibration_samples`` below 1.
        InvalidDataError: Calibration data does not fit the model.
        ConversionError: As for :func:`quantize`.

    Example:
        >>> int8 = quantized_content(model, representative_data=x_train)  # doctest: +SKIP
        >>> int8.content == tfcompress.quantize(model, representative_data=x_train).model_content
        ... # doctest: +SKIP
        True
    """
    if not isinstance(recipe, str | Recipe):
        raise InvalidInputError(
            f"quantized_content makes a .tflite: pass a recipe name or a Recipe, not {recipe!r}."
        )
    loaded = resolve_model(model)
    chosen = Recipe.coerce(recipe).with_options(calibration_samples=calibration_samples)
    if isinstance(loaded, TFLiteModel):
        raise InvalidInputError(
            f"{model_name(loaded)} is a .tflite, which LiteRT Quantizer quantizes; pass the "
            "Keras model or SavedModel, or use tfcompress.quantize()."
        )
    if choose_engine(None, loaded, chosen) != "converter":
        raise InvalidInputError(
            f"recipe {chosen.name!r} is made by LiteRT Quantizer from the float32 .tflite; "
            "use tfcompress.quantize() for it."
        )
    if chosen.methods:
        raise InvalidInputError(
            f"recipe {chosen.name!r} names post-training methods, which are scored against "
            "the float32 reference; use tfcompress.quantize() for it."
        )
    calibration = _calibration_set(loaded, chosen, representative_data, seed)
    _, quantized, kept = _plain_conversions(
        loaded, chosen, _configure_for(calibration, False), with_reference=False
    )
    check_weights_captured(quantized.content, loaded)
    _checked_float_ops(loaded, chosen, kept, quantized.content)
    logger.info("quantized %s with %s in %.1fs", model_name(loaded), chosen.name, quantized.seconds)
    return quantized


def _litert_result(
    loaded: Any,
    chosen: Recipe,
    data: DataLike | None,
    seed: int,
    progress: bool,
    *,
    eval_data: DataLike | None = None,
    gate: GateConfig | None = None,
) -> QuantizationResult:
    from tfcompress.quantization.engines.litert_quantizer import quantize_litert

    # eval_data: both calibrations are made and the better kept (engines/calibration.py).
    made = quantize_litert(
        loaded,
        chosen,
        representative_data=data,
        seed=seed,
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
        engine="litert-quantizer",
        notes=(*made.notes, *artifact_notes(made.content)),
        calibration=made.calibration,
    )


def _layer_errors(
    result: QuantizationResult, data: DataLike, seed: int, feeding: Mapping[str, Any]
) -> LayerErrors:
    from tfcompress.quantization.layer_errors import MAX_SAMPLES

    signature = model_signature(result.reference)
    samples = calibration_set(signature, data, limit=MAX_SAMPLES, seed=seed, **feeding)
    return contained_layer_errors(result, samples)


def contained_layer_errors(result: QuantizationResult, samples: Dataset) -> LayerErrors:
    """Every quantized tensor against the float reference, run in a child process.

    Both files run on the user's data, every tensor kept: native code whose allocations the
    data can size (a FILL whose shape is an input value), so it runs where a crash or a
    runaway allocation is one error (:mod:`tfcompress._child`).

    Raises:
        NativeCrashError: LiteRT crashed on one of the files.
        ResourceLimitError: It allocated past the child's memory limit.
        ChildTimeoutError: It ran past its time limit.
    """
    from tfcompress._child import call

    return call(
        "tfcompress.quantization.layer_errors:measure_layer_errors",
        result.reference_content,
        result.model_content,
        samples,
        what=f"the layer-error report of {model_name(result.reference)!r}",
    )


def _converter_result(
    loaded: Any,
    chosen: Recipe,
    representative_data: DataLike | None,
    seed: int,
    progress: bool,
    chosen_target: Target | None,
    check_options: Mapping[str, Any],
    *,
    methods: str | Sequence[str] | None,
    eval_data: DataLike | None,
    feeding: Mapping[str, Any] | None = None,
    gate: GateConfig | None = None,
    started: float | None = None,
) -> QuantizationResult:
    has_eval = eval_data is not None
    plan = plan_candidates(chosen.name, chosen.methods, methods, has_eval=has_eval)
    only_if_fails = auto_if_plain_fails(
        chosen.name, chosen.methods, methods, has_eval=has_eval, gated=gate is not None
    )
    if only_if_fails:  # plain int8 judged first; auto only if it fails the gate
        plan = (AUTO_CANDIDATES, True)
    if has_eval and not plan[0]:  # an accepted option is used or refused
        raise InvalidInputError(
            "eval_data scores the int8 post-training methods, and none run here: pass "
            "methods='auto' (--method auto) or a gate (gate=, --min-snr...) to run them, or "
            "drop eval_data and judge the file with tfcompress.evaluate."
        )
    check_runnable(loaded, plan[0], source=model_name(loaded))  # before any data is read
    calibration = _calibration_set(loaded, chosen, representative_data, seed, feeding)
    skipped: tuple[str, ...] = ()
    if plan[0] and _fed_otherwise(calibration):
        plan, note = _no_methods_here(loaded, chosen, methods, calibration)
        skipped = (note,)
    configure_for = _configure_for(calibration, progress)
    report = None
    kept = chosen
    if plan[0] and calibration is not None:
        outcome = run_methods(
            loaded,
            chosen,
            plan,
            calibration,
            eval_data,
            configure_for=configure_for,
            seed=seed,
            gate=gate,
            only_if_plain_fails=only_if_fails,
            started=started,
        )
        reference, quantized = outcome.reference, outcome.quantized
        chosen, report = outcome.recipe, outcome.report
        kept = chosen
    else:
        conversions, quantized, kept = _plain_conversions(
            loaded, chosen, configure_for, with_reference=True
        )
        reference = conversions[0]
    check_weights_captured(reference.content, loaded)
    float_ops = _checked_float_ops(loaded, chosen, kept, quantized.content, chosen_target)
    logger.info("quantized %s with %s in %.1fs", model_name(loaded), chosen.name, quantized.seconds)
    verdict = None
    if chosen_target is not None and chosen_target.checks:
        verdict = chosen_target.check(quantized.content, **check_options)
    return QuantizationResult(
        recipe=chosen,
        model_content=quantized.content,
        reference_content=reference.content,
        source=model_name(loaded),
        conversion_seconds=quantized.seconds,
        calibration_samples=0 if calibration is None else len(calibration),
        warnings=quantized.warnings,
        float_ops=float_ops,
        target=None if chosen_target is None else chosen_target.name,
        target_verdict=verdict,
        float_nodes=kept.float_nodes,
        notes=(*skipped, *artifact_notes(quantized.content)),
        methods=report,
    )


def _fed_otherwise(calibration: Dataset | None) -> bool:
    """Whether the model takes its samples other than batch first (a state, a scalar)."""
    layout = getattr(calibration, "layout", None)
    return layout is not None and not layout.batch_first


def _no_methods_here(
    loaded: Any, chosen: Recipe, methods: Any, calibration: Dataset | None
) -> tuple[tuple[tuple[Any, ...], bool], str]:
    """No post-training methods for a model fed otherwise than batch first.

    They score batch-first samples on LiteRT's interpreter: a model fed in another layout
    (a ``(layers, N, units)`` state, a scalar) gets plain int8 when only a gate would have
    started them (``auto`` when plain int8 fails it), with a note that says so; asked for
    (``methods=``, ``--method``, ``auto`` included, or a recipe that records them), they
    are refused.

    Returns:
        The empty plan, and the note for the result.

    Raises:
        UnsupportedModelError: Methods asked for.
    """
    layout = getattr(calibration, "layout", None)
    how = "; ".join(layout.explain()) if layout is not None else "not batch first"
    if chosen.methods or methods is not None:
        from tfcompress.errors import UnsupportedModelError

        raise UnsupportedModelError(
            f"the post-training methods score batch-first samples, but {model_name(loaded)} "
            f"is fed otherwise ({how}); drop --method (methods=) for the converter's int8."
        )
    note = (
        "post-training methods not tried: the model is fed otherwise than batch first "
        f"({how}), and they score batch-first samples; this is the converter's plain int8, "
        "not chosen by the gate: judge it with tfcompress.check_gate (batch_dims=, "
        "input_values=) or `tfcompress gate` (--batch-dim, --input-value)"
    )
    logger.warning("%s: %s", model_name(loaded), note)
    return ((), False), note


def _plain_conversions(
    loaded: Any, chosen: Recipe, configure_for: ConfigureFor, *, with_reference: bool
) -> tuple[tuple[Conversion, ...], Conversion, Recipe]:
    """The converter's own conversion of ``chosen`` (no methods), from one trace.

    Returns:
        The converter's outputs (the float32 reference first when ``with_reference``, or
        when ``chosen`` is ``float32``), the final quantized conversion and the recipe as
        kept (the nodes of ``float`` rules joined to ``float_nodes``).
    """
    selective = bool(chosen.float_nodes or chosen.rules)
    # One trace for both outputs (None: the float32 defaults); float32 asks for the
    # reference itself, converted once.
    configures: list[ConverterSettings | None] = []
    if with_reference or chosen.name == "float32":
        configures.append(None)
    if chosen.name != "float32":
        configures.append(configure_for(chosen, selective))
    conversions = convert_all(loaded, configures, static_batch=chosen.static_batch)
    quantized, kept = conversions[-1], chosen
    if selective:  # the nodes of float rules join float_nodes
        nodes = converter_float_nodes(quantized.content, chosen, source=model_name(loaded))
        kept = replace(chosen, float_nodes=nodes, rules=())
        quantized = quantize_calibrated(quantized, kept, source=model_name(loaded))
    return conversions, quantized, kept


def _checked_float_ops(
    loaded: Any, chosen: Recipe, kept: Recipe, content: bytes, target: Target | None = None
) -> tuple[str, ...] | None:
    """The ops that stayed float, after checking the file keeps the recipe's promises."""
    from tfcompress.quantization.selective_names import keras_layer_names

    if not chosen.spec.integer_activations:
        return None
    fix = None
    if target is not None and target.rules.integer_only:  # the user cannot drop it
        fix = (
            f"--target {target.name} runs integer kernels only: replace those layers with ones "
            "that quantize (BatchNormalization where it is a LayerNormalization, ReLU for an "
            "exotic activation), or take them out of the model and compute them outside it"
        )
    float_ops = check_integer_model(  # check what the file really holds
        content,
        recipe=chosen.name,
        input_type=chosen.input_type,
        output_type=chosen.output_type,
        integer_only=chosen.integer_only and not kept.float_nodes,
        source=model_name(loaded),
        layers=keras_layer_names(loaded),
        fix=fix,
    )
    check_kept_float(float_ops, kept, source=model_name(loaded))
    if len(float_ops) > len(kept.float_nodes):
        on_purpose = (
            f", {len(kept.float_nodes)} of them kept on purpose" if kept.float_nodes else ""
        )
        logger.warning(
            "%s: %d op(s) have no %s kernel and stayed float (%s%s); integer_only=True "
            "(--integer-only) refuses such a model",
            model_name(loaded),
            len(float_ops) - len(kept.float_nodes),
            chosen.name,
            describe_float_ops(float_ops),
            on_purpose,
        )
    return float_ops


def _calibration_set(
    model: Any,
    recipe: Recipe,
    data: DataLike | None,
    seed: int,
    feeding: Mapping[str, Any] | None = None,
) -> Dataset | None:
    """The calibration samples, read in the model's layout.

    ``feeding``: ``batch_dims`` and ``input_values``, as ``benchmark`` and ``gate`` take them.
    """
    return calibration_for(
        model_signature(model),
        data,
        recipe_name=recipe.name,
        needs_calibration=recipe.spec.needs_calibration,
        limit=recipe.calibration_samples,
        seed=seed,
        **(feeding or {}),
    )


def _configure_for(calibration: Dataset | None, progress: bool) -> ConfigureFor:
    """The converter settings of a recipe, stopping after calibration when asked.

    The samples are fed one at a time by input name (:class:`ConverterSettings`); the bar
    is drawn by the converter's child, on the caller's stderr.
    """

    def configure_for(recipe: Recipe, calibrate: bool) -> ConverterSettings:
        return ConverterSettings(recipe, calibration, calibrate_only=calibrate, progress=progress)

    return configure_for
