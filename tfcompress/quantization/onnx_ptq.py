"""Post-training quantization to ``.onnx`` with ONNX Runtime: ``quantize(..., format="onnx")``.

The Keras model is exported with tf2onnx and verified against Keras
(:func:`tfcompress.targets.onnx.export_onnx`); that float ``.onnx`` is the reference, and
ONNX Runtime's quantizers make the variant: ``int8`` (static, QDQ, calibrated on the same
representative-data adapter as the ``.tflite`` path), ``dynamic`` (int8 weights, activations
quantized at run time) or ``float16``. ``int16x8`` has no counterpart here and is refused.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from tfcompress._compat.keras import flavour_of
from tfcompress._config_fields import check_fields, option
from tfcompress.data import DataLike
from tfcompress.data.calibration import calibration_for
from tfcompress.errors import ConversionError, InvalidInputError, UnsupportedModelError
from tfcompress.models.loading import ModelLike, model_name, resolve_model
from tfcompress.models.onnx import OnnxModel
from tfcompress.models.quantized import refuse_quantized
from tfcompress.models.signature import model_signature
from tfcompress.quantization.artifact import QuantizedArtifact
from tfcompress.quantization.recipes import (
    DEFAULT_CALIBRATION_SAMPLES,
    RecipeData,
    check_calibration_samples,
)
from tfcompress.targets.onnx import ort_quantize
from tfcompress.targets.onnx.export import DEFAULT_OPSET, check_opset, export_onnx
from tfcompress.targets.onnx.verify import OnnxVerification

logger = logging.getLogger(__name__)

#: Recipe name -> (summary, calibrates activation ranges).
ONNX_RECIPES: dict[str, tuple[str, bool]] = {
    "float32": ("the verified tf2onnx export, no quantization (reference)", False),
    "dynamic": ("int8 weights, activations quantized at run time (ORT dynamic)", False),
    "float16": ("float16 weights and compute, float32 inputs/outputs", False),
    "int8": ("int8 weights (per channel) and activations, QDQ, calibrated (ORT static)", True),
}
_PER_CHANNEL_RECIPES = ("dynamic", "int8")


@dataclass(frozen=True)
class OnnxRecipe(RecipeData):
    """A post-training quantization recipe for ONNX Runtime (JSON round-trippable data).

    Attributes:
        name: ``int8``, ``dynamic``, ``float16`` or ``float32`` (the export itself).
        per_channel: Per-channel weight scales (``int8``/``dynamic``; None for the others).
        calibration_samples: Representative samples used at most to calibrate (``int8``).
        calibration_method: ``minmax`` (default), ``entropy`` or ``percentile`` for
            ``int8``; None for the recipes that do not calibrate.
        opset: ONNX opset of the export.

    Example:
        >>> OnnxRecipe.from_json(OnnxRecipe("int8", calibration_method="entropy").to_json())
        OnnxRecipe(name='int8', per_channel=True, calibration_samples=200, \
calibration_method='entropy', opset=17)
    """

    format: ClassVar[str] = "onnx"
    kind: ClassVar[str] = "ONNX recipe"

    name: str
    per_channel: bool | None = None
    calibration_samples: int = DEFAULT_CALIBRATION_SAMPLES
    calibration_method: str | None = option(
        None,
        names="CALIBRATION_METHODS",
        help="--format onnx, int8: ONNX Runtime's calibration method (default minmax)",
        check=lambda _, v: v if v is None else ort_quantize.check_calibration_method(v),
    )
    opset: int = option(
        DEFAULT_OPSET, help="ONNX opset of the tf2onnx export, 13 to 18", check=check_opset
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if self.name == "int16x8":
            raise InvalidInputError(
                "recipe 'int16x8' is .tflite only: tfcompress quantizes .onnx with ONNX "
                "Runtime's 8-bit recipes (int8, dynamic) or float16; use --recipe int8, or "
                "int16x8 with --format tflite."
            )
        if self.name not in ONNX_RECIPES:
            raise InvalidInputError(
                f"unknown ONNX recipe {self.name!r}; choose one of {', '.join(ONNX_RECIPES)}."
            )
        if self.per_channel is None and self.name in _PER_CHANNEL_RECIPES:
            object.__setattr__(self, "per_channel", True)
        elif self.per_channel is not None and self.name not in _PER_CHANNEL_RECIPES:
            raise InvalidInputError(
                f"recipe {self.name!r} has no integer weights: per_channel (--no-per-channel) "
                f"applies to {' and '.join(_PER_CHANNEL_RECIPES)}."
            )
        if self.calibration_method is None and self.needs_calibration:
            object.__setattr__(self, "calibration_method", "minmax")
        elif self.calibration_method is not None and not self.needs_calibration:
            raise InvalidInputError(
                f"recipe {self.name!r} does not calibrate: calibration_method "
                "(--calibration-method) applies to int8."
            )
        object.__setattr__(
            self, "calibration_samples", check_calibration_samples(self.calibration_samples)
        )

    @property
    def needs_calibration(self) -> bool:
        """Whether the recipe calibrates activation ranges on representative data."""
        return ONNX_RECIPES[self.name][1]


@dataclass(frozen=True)
class OnnxQuantizationResult(QuantizedArtifact):
    """A quantized ``.onnx`` and what it cost to make (the ``.tflite`` result's interface).

    Attributes (besides :class:`~tfcompress.quantization.artifact.QuantizedArtifact`'s):
        reference_content: The float32 ``.onnx`` (the verified export) it was made from.
        conversion_seconds: Wall time of the export, its check and the quantization.
        export_check: How far the float export is from Keras (None for an ``.onnx`` input).

    Example:
        >>> result = tfcompress.quantize(model, format="onnx", representative_data=x)
        ... # doctest: +SKIP
        >>> print(result)  # doctest: +SKIP
        small_cnn [int8, onnx]: 242,417 bytes (26.8% of float32 903,903) in 2.1s
    """

    format: ClassVar[str] = "onnx"

    recipe: OnnxRecipe
    export_check: OnnxVerification | None = None
    warnings: tuple[str, ...] = ()
    config: Any = None

    @property
    def float_ops(self) -> None:
        """Not tracked for ONNX: ONNX Runtime leaves ops it cannot quantize in float itself."""
        return None

    @property
    def model(self) -> OnnxModel:
        """The quantized model, ready for :func:`tfcompress.evaluate` or a runner."""
        return OnnxModel(self.model_content, label=f"{self.source}_{self.recipe.name}.onnx")

    @property
    def reference(self) -> OnnxModel:
        """The float32 ``.onnx`` of the same model."""
        return OnnxModel(self.reference_content, label=f"{self.source}_float32.onnx")

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports (no model bytes)."""
        check = None if self.export_check is None else self.export_check.to_dict()
        return {**self.common_dict(), "export_check": check}

    def __str__(self) -> str:
        return self.summary(f"{self.recipe.name}, onnx")


def quantize_onnx(
    model: ModelLike,
    *,
    recipe: OnnxRecipe,
    representative_data: DataLike | None = None,
    seed: int = 0,
    safe_mode: bool = True,
    progress: bool = False,
    batch_dims: Mapping[str, int] | None = None,
    input_values: Mapping[str, float] | None = None,
) -> OnnxQuantizationResult:
    """Quantize a Keras model (or a float ``.onnx``) to ``.onnx`` with ONNX Runtime.

    Called by :func:`tfcompress.quantize` for a config whose recipe is an
    :class:`OnnxRecipe` (``format="onnx"``); see it for the options.

    Raises:
        InvalidInputError: Calibration data missing, or an opset other than the default
            for an ``.onnx`` input (it is exported already).
        InvalidDataError: Calibration data does not fit the model.
        ConversionError: The export failed its check, or ONNX Runtime failed.
    """
    start = time.perf_counter()
    loaded = resolve_model(model, safe_mode=safe_mode)
    refuse_quantized(loaded)  # a QDQ or QLinear file: said before its opset or data
    chosen = recipe
    reference: OnnxModel | None = None
    check: OnnxVerification | None = None
    if isinstance(loaded, OnnxModel):
        if chosen.opset != DEFAULT_OPSET:
            raise InvalidInputError(
                f"{loaded.name} is already ONNX: opset applies to the export of a Keras model."
            )
        reference = loaded
    elif flavour_of(loaded) is None:
        raise UnsupportedModelError(
            f"format='onnx' quantizes Keras models or a float .onnx; got {model_name(loaded)} "
            f"({type(loaded).__name__}): load the .keras or .h5 file."
        )
    # The data is matched to the model first: a mismatch costs nothing, not an export.
    calibration = calibration_for(
        model_signature(loaded),
        representative_data,
        recipe_name=chosen.name,
        needs_calibration=chosen.needs_calibration,
        limit=chosen.calibration_samples,
        seed=seed,
        batch_dims=batch_dims,
        input_values=input_values,
    )
    if reference is None:
        export = export_onnx(loaded, opset=chosen.opset, safe_mode=safe_mode)
        reference, check = export, export.verification
    source, notes = reference, ()
    if chosen.name in ("int8", "dynamic") and chosen.per_channel:  # opset 11/12: upgraded
        source, per_channel, note = ort_quantize.per_channel_ready(reference)
        chosen = replace(chosen, per_channel=per_channel)
        notes = () if note is None else (note,)
        for line in notes:
            logger.warning("%s: %s", model_name(loaded), line)
    content = _apply(chosen, source, calibration, progress)
    _check_loads(content, chosen.name, model_name(loaded))
    seconds = time.perf_counter() - start
    logger.info("quantized %s to ONNX %s in %.1fs", model_name(loaded), chosen.name, seconds)
    return OnnxQuantizationResult(
        recipe=chosen,
        model_content=content,
        reference_content=reference.content,
        source=model_name(loaded),
        conversion_seconds=seconds,
        calibration_samples=0 if calibration is None else len(calibration),
        export_check=check,
        warnings=notes,
    )


def _apply(recipe: OnnxRecipe, reference: OnnxModel, calibration: Any, progress: bool) -> bytes:
    if recipe.name == "int8":
        return ort_quantize.static_int8(
            reference,
            calibration,
            method=str(recipe.calibration_method),
            per_channel=bool(recipe.per_channel),
            progress=progress,
        )
    if recipe.name == "dynamic":
        return ort_quantize.dynamic_int8(reference, per_channel=bool(recipe.per_channel))
    return ort_quantize.float16(reference) if recipe.name == "float16" else reference.content


def _check_loads(content: bytes, recipe: str, source: str) -> None:
    """The quantized model must open in ONNX Runtime (CPU) before anyone gets it (in a child)."""
    from tfcompress._child import call

    try:
        call(
            "tfcompress.quantization.onnx_ptq:opens",
            OnnxModel(content, label=f"{source}_{recipe}"),
            what=f"ONNX Runtime opening the {recipe} model of {source}",
        )
    except UnsupportedModelError as error:
        raise ConversionError(
            f"ONNX Runtime made a {recipe} model of {source} that it cannot load ({error})."
        ) from error


def opens(model: OnnxModel) -> None:
    """In the child: open ``model`` in ONNX Runtime's CPU provider, and close it."""
    from tfcompress.runtime.onnxruntime import CPU, OnnxRuntimeRunner

    OnnxRuntimeRunner(model, providers=[CPU]).close()
