"""Post-training quantization through the TFLite converter."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from tfcompress._compat.tf import tensorflow
from tfcompress.data import (
    DataLike,
    Dataset,
    load_data,
    validate_for_model,
    validate_for_signature,
)
from tfcompress.data.sources import describe_source
from tfcompress.data.validation import check_count
from tfcompress.errors import InvalidInputError
from tfcompress.models.loading import ModelLike, TFLiteModel, model_name, resolve_model
from tfcompress.models.saving import PathLike, write_bytes_atomic
from tfcompress.models.signature import model_signature
from tfcompress.quantization.converter import Configure, convert_all
from tfcompress.quantization.float_ops import check_integer_model, describe_float_ops
from tfcompress.quantization.recipes import Recipe

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class QuantizationResult:
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

    Example:
        >>> result = tfcompress.quantize(model, recipe="int16x8", representative_data=x,
        ...     float_fallback=True)  # doctest: +SKIP
        >>> result.float_ops  # doctest: +SKIP
        ('NEG',)
    """

    recipe: Recipe
    model_content: bytes = field(repr=False)
    reference_content: bytes = field(repr=False)
    source: str
    conversion_seconds: float
    calibration_samples: int
    warnings: tuple[str, ...] = ()
    float_ops: tuple[str, ...] | None = None

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

    @property
    def size_bytes(self) -> int:
        """Bytes of the quantized ``.tflite``."""
        return len(self.model_content)

    @property
    def reference_size_bytes(self) -> int:
        """Bytes of the float32 ``.tflite``."""
        return len(self.reference_content)

    @property
    def size_ratio(self) -> float:
        """Quantized bytes / float32 bytes (0.26 means 26% of the float32 file)."""
        return self.size_bytes / self.reference_size_bytes

    def save(self, path: PathLike, *, overwrite: bool = False) -> Path:
        """Write the quantized model atomically; refuses to replace a file unless ``overwrite``."""
        return write_bytes_atomic(path, self.model_content, overwrite=overwrite)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports (no model bytes)."""
        return {
            "source": self.source,
            "recipe": self.recipe.to_dict(),
            "size_bytes": self.size_bytes,
            "reference_size_bytes": self.reference_size_bytes,
            "size_ratio": round(self.size_ratio, 4),
            "conversion_seconds": round(self.conversion_seconds, 3),
            "calibration_samples": self.calibration_samples,
            "warnings": list(self.warnings),
            "float_ops": None if self.float_ops is None else list(self.float_ops),
        }

    def __str__(self) -> str:
        text = (
            f"{self.source} [{self.recipe.name}]: {self.size_bytes:,} bytes "
            f"({self.size_ratio:.1%} of float32 {self.reference_size_bytes:,}) "
            f"in {self.conversion_seconds:.1f}s"
        )
        if self.float_ops:
            text += (
                f"; {len(self.float_ops)} op(s) stayed float: {describe_float_ops(self.float_ops)}"
            )
        return text


def quantize(
    model: ModelLike,
    *,
    recipe: str | Recipe = "int8",
    representative_data: DataLike | None = None,
    input_type: str | None = None,
    output_type: str | None = None,
    per_channel: bool | None = None,
    calibration_samples: int | None = None,
    float_fallback: bool | None = None,
    seed: int = 0,
    safe_mode: bool = True,
    progress: bool = False,
) -> QuantizationResult:
    """Quantize a Keras model or SavedModel to ``.tflite`` with one recipe.

    Args:
        model: A Keras model (Keras 3 or tf-keras), a SavedModel, or a path to one.
        recipe: ``"dynamic"``, ``"float16"``, ``"int8"``, ``"int16x8"`` or a :class:`Recipe`.
        representative_data: Calibration samples (needed by ``int8`` and ``int16x8``): any
            source :func:`tfcompress.data.load_data` reads. Labels are ignored.
        input_type: Overrides the recipe's input dtype (``int8``/``uint8`` for ``int8``).
        output_type: Overrides the recipe's output dtype; defaults to ``input_type``.
        per_channel: Overrides per-channel weight quantization.
        calibration_samples: Overrides how many samples calibrate (a seeded random subset).
        float_fallback: ``int8``/``int16x8``: keep ops without an integer kernel in float
            (listed in ``result.float_ops``) instead of raising :class:`ConversionError`.
        seed: Seed of the calibration subset.
        safe_mode: See :func:`tfcompress.models.load_model` (paths only).
        progress: Show a progress bar during calibration.

    Returns:
        The quantized model with its recipe, sizes and converter warnings.

    Raises:
        InvalidInputError: Unknown recipe or option, calibration data missing, or
            ``calibration_samples`` below 1.
        InvalidArgumentTypeError: ``model`` (or ``calibration_samples``) of the wrong type.
        InvalidDataError: Calibration data does not fit the model.
        ConversionError: The converter rejected the model, or an ``int8``/``int16x8`` model
            has ops without an integer kernel and ``float_fallback`` is off (the message
            names them), or an integer input/output type could not be kept.

    Example:
        >>> result = tfcompress.quantize(model, recipe="int8", representative_data=x_train)
        >>> result.save("model_int8.tflite")  # doctest: +SKIP
    """
    if calibration_samples is not None:
        check_count(calibration_samples, "calibration_samples", "e.g. 200 (the default)")
    loaded = resolve_model(model, safe_mode=safe_mode)
    chosen = Recipe.coerce(recipe).with_options(
        input_type=input_type,
        output_type=output_type or input_type,
        per_channel=per_channel,
        calibration_samples=calibration_samples,
        float_fallback=float_fallback,
    )
    calibration = _calibration_set(loaded, chosen, representative_data, seed)
    tf = tensorflow()

    def configure(converter: Any) -> None:
        chosen.spec.configure(converter, chosen, tf)
        if not chosen.per_channel:
            converter._experimental_disable_per_channel = True  # only switch the API offers
        if calibration is not None:
            converter.representative_dataset = lambda: _representative(calibration, progress)

    # One trace for both outputs (None: the float32 defaults); float32 asks for the reference
    # itself, converted once.
    configures: list[Configure | None] = [None]
    if chosen.name != "float32":
        configures.append(configure)
    conversions = convert_all(loaded, configures)
    reference, quantized = conversions[0], conversions[-1]
    float_ops = None
    if chosen.spec.float_fallback:  # integer activations: check what the file really holds
        float_ops = check_integer_model(
            quantized.content,
            recipe=chosen.name,
            input_type=chosen.input_type,
            output_type=chosen.output_type,
            float_fallback=chosen.float_fallback,
            source=model_name(loaded),
        )
    logger.info("quantized %s with %s in %.1fs", model_name(loaded), chosen.name, quantized.seconds)
    return QuantizationResult(
        recipe=chosen,
        model_content=quantized.content,
        reference_content=reference.content,
        source=model_name(loaded),
        conversion_seconds=quantized.seconds,
        calibration_samples=0 if calibration is None else len(calibration),
        warnings=quantized.warnings,
        float_ops=float_ops,
    )


def _calibration_set(
    model: Any, recipe: Recipe, data: DataLike | None, seed: int
) -> Dataset | None:
    if not recipe.spec.needs_calibration:
        if data is not None:
            logger.debug("recipe %s needs no calibration; representative data unused", recipe.name)
        return None
    if data is None:
        raise InvalidInputError(
            f"recipe {recipe.name!r} calibrates activation ranges: pass representative_data "
            "(--data CALIB.npz) with a few hundred typical samples."
        )
    signature = model_signature(model)
    limit = recipe.calibration_samples
    first = signature.inputs[0]
    dataset = load_data(data, sample_rank=len(first.sample_shape), max_samples=limit)
    what = describe_source(data, "calibration data")
    if len(signature.inputs) == 1:
        dataset = validate_for_model(Dataset(dataset.x), first, what=what)
    else:  # one array per input, by name; labels are not needed to calibrate
        dataset = Dataset(validate_for_signature(Dataset(dataset.x), signature, what=what).x)
    if len(dataset) > limit:
        chosen = np.sort(np.random.default_rng(seed).choice(len(dataset), limit, replace=False))
        dataset = Dataset(_rows(dataset.x, chosen))
    return dataset


def _rows(x: np.ndarray | dict[str, np.ndarray], chosen: np.ndarray) -> Any:
    if isinstance(x, dict):
        return {name: array[chosen] for name, array in x.items()}
    return x[chosen]


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
