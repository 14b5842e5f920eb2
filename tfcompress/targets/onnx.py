"""ONNX export of Keras models (tf2onnx) and ONNX Runtime static int8 quantization.

The minimum the benchmark harness needs; a full ONNX target (opset choice, validation
against Keras, dynamic quantization) can grow here.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from tfcompress._compat.keras import flavour_of
from tfcompress._compat.onnx import ort_quantization, tf2onnx_module
from tfcompress._compat.tf import tensorflow
from tfcompress.data import DataLike, load_data, validate_for_model
from tfcompress.errors import ConversionError, UnsupportedModelError
from tfcompress.models.loading import ModelLike, resolve_model
from tfcompress.models.onnx import OnnxModel
from tfcompress.models.signature import input_spec
from tfcompress.models.saving import PathLike, check_output_path, write_bytes_atomic
from tfcompress.models.signature import input_spec

logger = logging.getLogger(__name__)

DEFAULT_OPSET = 17
INPUT_NAME = "input"


def export_onnx(
    model: ModelLike,
    path: PathLike | None = None,
    *,
    opset: int = DEFAULT_OPSET,
    overwrite: bool = False,
) -> OnnxModel:
    """Convert a Keras model (Keras 3 or tf-keras) to ONNX with tf2onnx.

    The graph is traced from ``model(x, training=False)`` with a dynamic batch dimension;
    the input is named ``"input"``.

    Args:
        model: A Keras model or a path to one.
        path: Where to write the ``.onnx`` (atomically); None keeps it in memory.
        opset: ONNX opset to target.
        overwrite: Replace ``path`` if it exists.

    Returns:
        The ONNX model.

    Raises:
        UnsupportedModelError: Not a Keras model, or several inputs.
        ConversionError: tf2onnx rejected the model.
        MissingDependencyError: tf2onnx/onnx are not installed.

    Example:
        >>> onnx_model = export_onnx(keras_model, "model.onnx")  # doctest: +SKIP
    """
    loaded = resolve_model(model)
    if flavour_of(loaded) is None:
        raise UnsupportedModelError(
            f"export_onnx converts Keras models; got {type(loaded).__name__}. Load the .keras "
            "or .h5 file (or pass the model object)."
        )
    spec = input_spec(loaded)
    if path is not None:
        check_output_path(path, overwrite=overwrite)
    tf = tensorflow()
    tf2onnx = tf2onnx_module()
    signature = (tf.TensorSpec((None, *spec.sample_shape), spec.dtype, name=INPUT_NAME),)
    function = tf.function(lambda x: loaded(x, training=False), input_signature=signature)
    try:
        proto, _ = tf2onnx.convert.from_function(function, input_signature=signature, opset=opset)
    except (ValueError, TypeError, RuntimeError, KeyError) as error:
        raise ConversionError(
            f"tf2onnx could not convert {getattr(loaded, 'name', 'the model')} "
            f"({type(error).__name__}: {error}); try another opset."
        ) from error
    content = proto.SerializeToString()
    label = f"{getattr(loaded, 'name', 'model')}_float32.onnx"
    if path is None:
        return OnnxModel(content, label=label)
    written = write_bytes_atomic(path, content, overwrite=overwrite)
    return OnnxModel(content, written)


def quantize_onnx_static(
    model: OnnxModel | PathLike,
    representative_data: DataLike,
    path: PathLike | None = None,
    *,
    per_channel: bool = True,
    max_samples: int = 200,
    overwrite: bool = False,
) -> OnnxModel:
    """Quantize an ONNX model to int8 with ONNX Runtime's static quantizer (QDQ format).

    Activations and weights become int8 (weights per channel by default), calibrated with
    min-max ranges on ``representative_data``; inputs and outputs stay float.

    Args:
        model: The float ONNX model or its path.
        representative_data: Samples like the ones the model will see (labels ignored).
        path: Where to write the quantized ``.onnx``; None keeps it in memory.
        per_channel: One scale per output channel for weights.
        max_samples: Calibration samples used at most.
        overwrite: Replace ``path`` if it exists.

    Returns:
        The int8 ONNX model.

    Raises:
        InvalidDataError: The data does not fit the model's input.
        ConversionError: ONNX Runtime's quantizer failed.
        MissingDependencyError: onnxruntime is not installed.

    Example:
        >>> int8 = quantize_onnx_static("m.onnx", x_train, "m_int8.onnx")  # doctest: +SKIP
    """
    source = model if isinstance(model, OnnxModel) else resolve_model(model)
    if not isinstance(source, OnnxModel):
        raise UnsupportedModelError("quantize_onnx_static takes an .onnx model; export first.")
    spec = input_spec(source)
    raw = load_data(representative_data, sample_rank=len(spec.sample_shape))
    dataset = validate_for_model(raw.take(max_samples), spec, what="calibration data")
    if path is not None:
        check_output_path(path, overwrite=overwrite)
    quantization = ort_quantization()
    reader = _Reader(quantization.CalibrationDataReader, spec.name, dataset.x)
    with tempfile.TemporaryDirectory() as folder:
        source_path, target_path = Path(folder) / "float.onnx", Path(folder) / "int8.onnx"
        source_path.write_bytes(source.content)
        try:
            quantization.quantize_static(
                str(source_path),
                str(target_path),
                reader.instance,
                quant_format=quantization.QuantFormat.QDQ,
                activation_type=quantization.QuantType.QInt8,
                weight_type=quantization.QuantType.QInt8,
                per_channel=per_channel,
            )
        except (ValueError, RuntimeError, KeyError) as error:
            raise ConversionError(
                f"ONNX Runtime could not quantize {source.name} ({type(error).__name__}: {error})."
            ) from error
        content = target_path.read_bytes()
    stem = Path(source.name).stem.removesuffix("_float32")
    if path is None:
        return OnnxModel(content, label=f"{stem}_int8.onnx")
    return OnnxModel(content, write_bytes_atomic(path, content, overwrite=overwrite))


class _Reader:
    """Feeds calibration samples one at a time to ONNX Runtime's calibrator."""

    def __init__(self, base: type, input_name: str, x: np.ndarray) -> None:
        samples: Iterator[dict[str, Any]] = ({input_name: x[i : i + 1]} for i in range(len(x)))

        class Reader(base):  # type: ignore[misc, valid-type]
            def get_next(self) -> dict[str, Any] | None:
                return next(samples, None)

        self.instance = Reader()
