"""Recognise a model file by its bytes, not its name, before any heavy library sees it."""

from __future__ import annotations

import enum
import json
import zipfile
import zlib
from pathlib import Path

from tfcompress._files import read_regular_bytes
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
    head = read_regular_bytes(path, error=ModelLoadError, what="a model file", limit=8)
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
    """Read the Keras version a .keras or .h5 file was saved with ('' when not recorded).

    Args:
        path: A ``.keras`` archive or an ``.h5`` file.
        model_format: Its sniffed format.

    Returns:
        The recorded version, e.g. ``"3.15.1"`` or ``"2.21.0"``.

    Raises:
        ModelLoadError: The file is truncated or corrupt, or its ``metadata.json`` is not a
            JSON object.

    Example:
        >>> keras_version_of(Path("model.keras"), ModelFormat.KERAS)  # doctest: +SKIP
        '3.15.1'
    """
    try:
        if model_format is ModelFormat.KERAS:
            with zipfile.ZipFile(path) as archive:
                if archive.getinfo("metadata.json").file_size > 2**20:
                    raise ValueError("metadata.json is over 1 MiB")
                metadata = json.loads(archive.read("metadata.json"))
        else:
            import h5py  # ships with TensorFlow and Keras

            with h5py.File(path, "r") as handle:
                version = handle.attrs.get("keras_version", "")
            return version.decode() if isinstance(version, bytes) else str(version)
    except RecursionError:
        raise ModelLoadError(
            f"{path}: metadata.json nests deeper than any real file (hostile or corrupt); "
            "save the model again."
        ) from None
    # zlib.error, EOFError, NotImplementedError: a damaged or exotic deflate stream;
    # RuntimeError: h5py's word for HDF5 library errors.
    except (
        OSError,
        KeyError,
        ValueError,
        RuntimeError,
        zipfile.BadZipFile,
        zlib.error,
        EOFError,
    ) as error:
        reason = " ".join(str(error).split())[:200] or type(error).__name__
        raise ModelLoadError(
            f"{path}: the {model_format.value} file is truncated or corrupt ({reason}); "
            "save the model again."
        ) from error
    if not isinstance(metadata, dict):
        raise ModelLoadError(
            f"{path}: metadata.json is a JSON {type(metadata).__name__}, not an object; the "
            ".keras file is corrupt; save the model again."
        )
    return str(metadata.get("keras_version", ""))
