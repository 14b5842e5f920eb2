"""Recognise a model file by its bytes, not its name, before any heavy library sees it."""

from __future__ import annotations

import enum
import json
import zipfile
from pathlib import Path

from tfcompress.errors import ModelLoadError
from tfcompress.models.onnx import is_onnx_bytes

TFLITE_IDENTIFIER = b"TFL3"
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_ZIP_MAGIC = b"PK\x03\x04"
_SUPPORTED = "a .keras file, an .h5 file, a SavedModel directory, a .tflite or an .onnx file"


class ModelFormat(enum.StrEnum):
    """On-disk model formats tfcompress reads."""

    KERAS = "keras"
    H5 = "h5"
    SAVED_MODEL = "saved_model"
    TFLITE = "tflite"
    ONNX = "onnx"


def is_tflite_bytes(content: bytes) -> bool:
    r"""True when ``content`` carries the TFLite flatbuffer file identifier at offset 4.

    Example:
        >>> is_tflite_bytes(b"\x1c\x00\x00\x00TFL3....")
        True
    """
    return len(content) >= 8 and content[4:8] == TFLITE_IDENTIFIER


def sniff_format(path: Path) -> ModelFormat:
    """Tell the format of the model at ``path`` from its content.

    Args:
        path: A file or a SavedModel directory.

    Returns:
        The detected format.

    Raises:
        ModelLoadError: The path is missing, or its bytes match no supported format.

    Example:
        >>> sniff_format(Path("model.keras"))  # doctest: +SKIP
        <ModelFormat.KERAS: 'keras'>
    """
    if not path.exists():
        raise ModelLoadError(f"{path}: no such file or directory; pass {_SUPPORTED}.")
    if path.is_dir():
        if (path / "saved_model.pb").is_file() or (path / "saved_model.pbtxt").is_file():
            return ModelFormat.SAVED_MODEL
        raise ModelLoadError(f"{path}: directory holds no saved_model.pb; pass {_SUPPORTED}.")
    with path.open("rb") as handle:
        head = handle.read(8)
    if is_tflite_bytes(head):
        return ModelFormat.TFLITE
    if head.startswith(_HDF5_MAGIC):
        return ModelFormat.H5
    if head.startswith(_ZIP_MAGIC):
        return ModelFormat.KERAS
    claimed = path.suffix.lower()
    if claimed == ".onnx":
        if not is_onnx_bytes(head):
            raise ModelLoadError(
                f"{path}: not an ONNX model (no ModelProto header); the file is corrupt or "
                "another format; export it again."
            )
        return ModelFormat.ONNX
    if claimed == ".tflite":
        raise ModelLoadError(
            f"{path}: not a TFLite model (no 'TFL3' identifier); the file is corrupt or not "
            "a .tflite; re-export it with `tfcompress quantize`."
        )
    if claimed in {".keras", ".h5", ".hdf5"}:
        raise ModelLoadError(
            f"{path}: not a Keras {claimed} file (wrong magic bytes); it is corrupt or another "
            "format; save it again with model.save()."
        )
    raise ModelLoadError(f"{path}: unrecognised model format; pass {_SUPPORTED}.")


def keras_version_of(path: Path, model_format: ModelFormat) -> str:
    """Read the Keras version a .keras or .h5 file was saved with ('' when not recorded)."""
    try:
        if model_format is ModelFormat.KERAS:
            with zipfile.ZipFile(path) as archive:
                metadata = json.loads(archive.read("metadata.json"))
            return str(metadata.get("keras_version", ""))
        import h5py  # ships with TensorFlow and Keras

        with h5py.File(path, "r") as handle:
            version = handle.attrs.get("keras_version", "")
        return version.decode() if isinstance(version, bytes) else str(version)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as error:
        raise ModelLoadError(
            f"{path}: the {model_format.value} file is truncated or corrupt ({error}); "
            "save the model again."
        ) from error
