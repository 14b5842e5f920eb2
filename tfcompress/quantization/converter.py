"""The one path from an in-memory model to ``.tflite`` bytes, used by PTQ, QAT and pruning."""

from __future__ import annotations

import contextlib
import logging
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tfcompress._compat.keras import KerasFlavour, flavour_of
from tfcompress._compat.tf import tensorflow
from tfcompress.errors import ConversionError, UnsupportedModelError
from tfcompress.models.loading import SavedModelDir, TFLiteModel, model_name, saved_model_errors

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Conversion:
    """Bytes out of the converter, with how long it took and what it warned about."""

    content: bytes
    seconds: float
    warnings: tuple[str, ...]


@contextlib.contextmanager
def converter_for(model: Any) -> Iterator[Any]:
    """Yield a ``tf.lite.TFLiteConverter`` for a Keras model or SavedModel.

    Keras 3 models are exported to a temporary SavedModel first (what
    ``from_keras_model`` does internally, minus its print to stdout).

    Raises:
        UnsupportedModelError: ``model`` is already a ``.tflite``.
        ModelLoadError: TensorFlow cannot read the SavedModel (truncated or corrupt).
    """
    tf = tensorflow()
    if isinstance(model, TFLiteModel):
        raise UnsupportedModelError(
            f"{model.name} is already a .tflite; quantize the original Keras model or SavedModel."
        )
    if isinstance(model, SavedModelDir):
        with saved_model_errors(model.path):  # not around the yield: the caller's errors pass
            converter = tf.lite.TFLiteConverter.from_saved_model(str(model.path))
        yield converter
        return
    if flavour_of(model) is KerasFlavour.TF_KERAS:
        yield tf.lite.TFLiteConverter.from_keras_model(model)
        return
    with tempfile.TemporaryDirectory(prefix="tfcompress-export-") as export_dir:
        model.export(export_dir, format="tf_saved_model", verbose=False)
        yield tf.lite.TFLiteConverter.from_saved_model(export_dir)


def convert(model: Any, configure: Callable[[Any], None]) -> Conversion:
    """Convert ``model`` to ``.tflite`` after ``configure(converter)`` sets the options.

    Args:
        model: A Keras model (either flavour) or a :class:`SavedModelDir`.
        configure: Sets optimizations, representative data, types... on the converter.

    Returns:
        The flatbuffer, the wall time and the converter's warnings.

    Raises:
        ConversionError: The converter rejected the model.

    Example:
        >>> conversion = convert(model, lambda converter: None)  # doctest: +SKIP
    """
    start = time.perf_counter()
    with _capture_warnings() as captured, converter_for(model) as converter:
        configure(converter)
        try:
            content = converter.convert()
        except Exception as error:  # the converter raises ConverterError, RuntimeError...
            raise ConversionError(
                f"the TFLite converter rejected {model_name(model)!r}: {_first_error(error)}; "
                "check the model's ops are TFLite built-ins (see docs/quantization.md)."
            ) from error
    return Conversion(bytes(content), time.perf_counter() - start, tuple(captured))


def _first_error(error: Exception) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    for line in lines:
        if "error:" in line.lower():
            return line
    return lines[0] if lines else type(error).__name__


@contextlib.contextmanager
def _capture_warnings() -> Iterator[list[str]]:
    """Collect Python warnings and TensorFlow/absl WARNING logs emitted during conversion."""
    captured: list[str] = []

    class _Collector(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            captured.append(record.getMessage().strip())

    collector = _Collector(level=logging.WARNING)
    loggers = [logging.getLogger(name) for name in ("tensorflow", "absl")]
    for lg in loggers:
        lg.addHandler(collector)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield captured
        captured.extend(str(w.message).strip() for w in caught)
    finally:
        for lg in loggers:
            lg.removeHandler(collector)
