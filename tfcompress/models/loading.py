"""Load every model format tfcompress accepts into one of three in-memory forms.

* a Keras model object (Keras 3 or tf-keras),
* :class:`TFLiteModel` (the flatbuffer bytes, validated),
* :class:`SavedModelDir` (a plain TensorFlow SavedModel that is not a Keras model),
* :class:`~tfcompress.models.onnx.OnnxModel` (an ``.onnx`` file, run by ONNX Runtime).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfcompress._compat.keras import KerasFlavour, flavour_of, keras_module
from tfcompress.errors import ModelLoadError
from tfcompress.models.formats import ModelFormat, is_tflite_bytes, keras_version_of, sniff_format
from tfcompress.models.onnx import OnnxModel, load_onnx

logger = logging.getLogger(__name__)

_LAMBDA_CONFIG = b'"class_name":"Lambda"'
ModelLike = Any  # a Keras model, a TFLiteModel, a SavedModelDir, .tflite bytes or a path


@dataclass(frozen=True)
class TFLiteModel:
    """A ``.tflite`` flatbuffer held in memory.

    Example:
        >>> TFLiteModel(b"not a model")
        Traceback (most recent call last):
        ...
        tfcompress.errors.ModelLoadError: <bytes>: not a TFLite model (no 'TFL3' identifier) ...
    """

    content: bytes = field(repr=False)
    path: Path | None = None
    label: str | None = None

    def __post_init__(self) -> None:
        if not is_tflite_bytes(self.content):
            raise ModelLoadError(
                f"{self.path or '<bytes>'}: not a TFLite model (no 'TFL3' identifier) or "
                "truncated; re-export it with `tfcompress quantize`."
            )

    @property
    def size_bytes(self) -> int:
        """Size of the flatbuffer in bytes."""
        return len(self.content)

    @property
    def name(self) -> str:
        """A short label: ``label``, else the file name, else 'tflite'."""
        return self.label or (self.path.name if self.path else "tflite")


@dataclass(frozen=True)
class SavedModelDir:
    """A TensorFlow SavedModel directory that is not a Keras model (e.g. from model.export())."""

    path: Path
    signature_key: str = "serving_default"

    @property
    def name(self) -> str:
        """The directory name."""
        return self.path.name


def load_model(path: str | os.PathLike[str], *, safe_mode: bool = True) -> Any:
    """Load a model file or directory.

    Args:
        path: A ``.keras`` or ``.h5`` file, a SavedModel directory, a ``.tflite`` or an
            ``.onnx`` file.
        safe_mode: Refuse Keras files whose Lambda layers carry Python bytecode. Only turn
            it off for files you trust: such a layer can run arbitrary code.

    Returns:
        A Keras model, a :class:`TFLiteModel`, a :class:`SavedModelDir` or an
        :class:`~tfcompress.models.onnx.OnnxModel`.

    Raises:
        ModelLoadError: Missing, truncated, corrupt or unsafe model.

    Example:
        >>> model = load_model("mnist_cnn.keras")  # doctest: +SKIP
    """
    path = Path(path)
    model_format = sniff_format(path)
    if model_format is ModelFormat.TFLITE:
        content = path.read_bytes()
        _check_tflite_loads(content, path)
        return TFLiteModel(content, path)
    if model_format is ModelFormat.ONNX:
        return load_onnx(path)
    if model_format is ModelFormat.SAVED_MODEL:
        if (path / "keras_metadata.pb").is_file():
            return _load_keras(path, KerasFlavour.TF_KERAS, safe_mode=safe_mode)
        return SavedModelDir(path)
    version = keras_version_of(path, model_format)
    flavour = KerasFlavour.TF_KERAS if version.startswith("2.") else KerasFlavour.KERAS3
    return _load_keras(path, flavour, safe_mode=safe_mode)


def resolve_model(model: ModelLike, *, safe_mode: bool = True) -> Any:
    """Turn whatever the user passed into a loaded model (loading paths, wrapping bytes).

    Raises:
        ModelLoadError: ``model`` is a bad path or bytes that are not a ``.tflite``.
        TypeError: ``model`` is of a type tfcompress does not know.
    """
    if isinstance(model, str | os.PathLike):
        return load_model(model, safe_mode=safe_mode)
    if isinstance(model, bytes | bytearray):
        content = bytes(model)
        tflite = TFLiteModel(content)
        _check_tflite_loads(content, "<bytes>")
        return tflite
    if isinstance(model, TFLiteModel | SavedModelDir | OnnxModel) or flavour_of(model) is not None:
        return model
    raise TypeError(
        f"expected a Keras model, .tflite bytes or a model path, got {type(model).__name__}"
    )


def model_name(model: Any) -> str:
    """A short human label for a loaded model."""
    if isinstance(model, TFLiteModel | SavedModelDir | OnnxModel):
        return model.name
    return str(getattr(model, "name", type(model).__name__))


def _load_keras(path: Path, flavour: KerasFlavour, *, safe_mode: bool) -> Any:
    if safe_mode and flavour is KerasFlavour.TF_KERAS and _has_lambda_layer(path):
        # tf-keras enforces safe_mode only for .keras files; we extend it to .h5/SavedModel.
        raise ModelLoadError(
            f"{path}: the model holds a Lambda layer, which can run arbitrary code when loaded; "
            "pass safe_mode=False (--unsafe) only if you trust the file."
        )
    keras = keras_module(flavour)
    logger.debug("loading %s with %s (safe_mode=%s)", path, flavour, safe_mode)
    try:
        return keras.models.load_model(path, compile=False, safe_mode=safe_mode)
    except (ValueError, OSError, TypeError, KeyError, AttributeError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        hint = (
            " It holds a Lambda layer: pass safe_mode=False (--unsafe) only if you trust the file."
            if "lambda" in reason.lower() or "safe_mode" in reason
            else " Check that the file is complete and saved by Keras."
        )
        raise ModelLoadError(f"{path}: cannot load the Keras model: {reason}.{hint}") from error


def _has_lambda_layer(path: Path) -> bool:
    if path.is_dir():
        metadata = path / "keras_metadata.pb"
        return metadata.is_file() and _LAMBDA_CONFIG in metadata.read_bytes().replace(b" ", b"")
    if path.suffix.lower() == ".keras":
        return False  # tf-keras checks .keras archives itself
    import h5py

    with h5py.File(path, "r") as handle:
        config = handle.attrs.get("model_config", b"")
    config = config if isinstance(config, bytes) else str(config).encode()
    return _LAMBDA_CONFIG in config.replace(b" ", b"")


def _check_tflite_loads(content: bytes, source: object) -> None:
    # The identifier can survive truncation; the interpreter's verifier catches the rest.
    from tfcompress._compat.litert import make_interpreter

    try:
        make_interpreter(content, num_threads=1, use_xnnpack=False)
    except (ValueError, RuntimeError) as error:
        raise ModelLoadError(
            f"{source}: the .tflite file is truncated or corrupt ({str(error).splitlines()[0]}); "
            "re-export it."
        ) from error
