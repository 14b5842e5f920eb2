"""The one input (and output) a model expects, whatever its format."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tfcompress.errors import UnsupportedModelError
from tfcompress.models.loading import SavedModelDir, TFLiteModel, model_name, saved_model_errors
from tfcompress.models.onnx import OnnxModel, onnx_input_spec

Shape = tuple[int | None, ...]


@dataclass(frozen=True)
class InputSpec:
    """Shape (batch dimension first, None = any size) and dtype of a model's single input.

    Example:
        >>> InputSpec(shape=(None, 28, 28, 1), dtype="float32").sample_shape
        (28, 28, 1)
    """

    shape: Shape
    dtype: str = "float32"
    name: str = "input"

    @property
    def sample_shape(self) -> Shape:
        """The shape of one sample (without the batch dimension)."""
        return self.shape[1:]

    def describe(self) -> str:
        """Human form, e.g. ``(N, 28, 28, 1) float32``."""
        dims = ", ".join("N" if i == 0 else str(d) for i, d in enumerate(self.shape))
        return f"({dims}) {self.dtype}"


def input_spec(model: Any) -> InputSpec:
    """Read the single input a loaded model expects.

    For a quantized ``.tflite`` the spec is float32: runners quantize float data with the
    input's scale and zero point, so callers always feed the same data to every variant.

    Args:
        model: A loaded model (see :func:`tfcompress.models.load_model`).

    Returns:
        The input spec.

    Raises:
        UnsupportedModelError: The model has several inputs or no known input signature.

    Example:
        >>> input_spec(keras_model).describe()  # doctest: +SKIP
        '(N, 28, 28, 1) float32'
    """
    if isinstance(model, TFLiteModel):
        return _tflite_input_spec(model)
    if isinstance(model, SavedModelDir):
        return _saved_model_input_spec(model)
    if isinstance(model, OnnxModel):
        return onnx_input_spec(model)
    inputs = _keras_inputs(model)
    tensor = inputs[0]
    shape = tensor.shape.as_list() if hasattr(tensor.shape, "as_list") else list(tensor.shape)
    dtype = getattr(tensor.dtype, "name", tensor.dtype)
    return InputSpec(tuple(shape), str(dtype), str(getattr(tensor, "name", "input")))


def _keras_inputs(model: Any) -> list[Any]:
    try:
        inputs = list(model.inputs or [])
    except (AttributeError, ValueError):
        inputs = []
    if not inputs:
        raise UnsupportedModelError(
            f"model {model_name(model)!r} has no input signature (subclassed or never built); "
            "build it as a Sequential/Functional model starting with keras.Input(shape=...)."
        )
    if len(inputs) > 1:
        raise UnsupportedModelError(
            f"model {model_name(model)!r} has {len(inputs)} inputs; tfcompress handles "
            "single-input models only, so wrap the extra inputs into one tensor."
        )
    return inputs


def _tflite_input_spec(model: TFLiteModel) -> InputSpec:
    from tfcompress._compat.litert import make_interpreter

    details = make_interpreter(model.content, num_threads=1, use_xnnpack=False).get_input_details()
    if len(details) != 1:
        raise UnsupportedModelError(
            f"{model.name} has {len(details)} inputs; tfcompress handles single-input models only."
        )
    detail = details[0]
    signature = detail.get("shape_signature", detail["shape"])
    shape = tuple(None if int(d) < 0 else int(d) for d in signature)
    scale, _ = detail["quantization"]
    dtype = np.dtype(detail["dtype"])
    float_fed = dtype.kind in "iu" and scale > 0
    return InputSpec(shape, "float32" if float_fed else dtype.name, str(detail["name"]))


def _saved_model_input_spec(model: SavedModelDir) -> InputSpec:
    from tfcompress._compat.tf import tensorflow

    with saved_model_errors(model.path):
        loaded = tensorflow().saved_model.load(str(model.path))
    signature = loaded.signatures.get(model.signature_key)
    if signature is None:
        raise UnsupportedModelError(
            f"{model.path}: no {model.signature_key!r} signature; export the model with one."
        )
    specs = list(signature.structured_input_signature[1].values())
    if len(specs) != 1:
        raise UnsupportedModelError(
            f"{model.path}: {len(specs)} inputs; tfcompress handles single-input models only."
        )
    return InputSpec(tuple(specs[0].shape.as_list()), specs[0].dtype.name, specs[0].name or "input")
