"""Decide a model file's format once, from its bytes, before any heavy library sees it.

A file can be built to be two formats at once: ZIP readers look for their directory at the
end of a file and HDF5 readers for their superblock at offset 0, 512, 1024, 2048..., so one
file can be a benign ``.keras`` archive to a check that reads its first bytes and an HDF5
model holding a ``Lambda`` layer to the loader that runs it. :func:`read_model_file` reads
a file once, asks every format whether the bytes are valid as that format, and refuses a
file that more than one format accepts (:mod:`tfcompress.models.format_detection`), or
whose extension names another format than its content. The bytes it returns are the only
ones any loader of tfcompress is given (:mod:`tfcompress.models.loading` hands each loader
a private copy of exactly them).
"""

from __future__ import annotations

import enum
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfcompress._files import read_regular_bytes
from tfcompress.errors import InvalidArgumentTypeError, ModelLoadError, UnsupportedModelError
from tfcompress.models.onnx import is_onnx_bytes

if TYPE_CHECKING:
    from tfcompress.models.tflite_file import TFLiteFile

TFLITE_IDENTIFIER = b"TFL3"
logger = logging.getLogger(__name__)


_SUPPORTED = "a .keras file, an .h5 file, a SavedModel directory, a .tflite or an .onnx file"


class ModelFormat(enum.StrEnum):
    """On-disk model formats tfcompress reads."""

    KERAS = "keras"
    H5 = "h5"
    SAVED_MODEL = "saved_model"
    TFLITE = "tflite"
    ONNX = "onnx"

    @property
    def description(self) -> str:
        """How messages name the format, e.g. ``'a .keras (zip) archive'``."""
        return _ABOUT[self][0]

    @property
    def suffix(self) -> str:
        """The file extension of the format (``''`` for a SavedModel directory)."""
        return _ABOUT[self][1]


_ABOUT = {
    ModelFormat.KERAS: ("a .keras (zip) archive", ".keras"),
    ModelFormat.H5: ("an HDF5 (.h5) model", ".h5"),
    ModelFormat.SAVED_MODEL: ("a SavedModel directory", ""),
    ModelFormat.TFLITE: ("a .tflite flatbuffer", ".tflite"),
    ModelFormat.ONNX: ("an ONNX model", ".onnx"),
}
_CLAIMS = {
    ".keras": ModelFormat.KERAS,
    ".h5": ModelFormat.H5,
    ".hdf5": ModelFormat.H5,
    ".tflite": ModelFormat.TFLITE,
    ".onnx": ModelFormat.ONNX,
}


@dataclass(frozen=True)
class CheckedFile:
    """A model file read once, with the one format its bytes were found to be.

    Attributes:
        path: The file the user named (for messages only: it is never opened again).
        format: The format decided from the content.
        content: Every byte that was read and checked; loaders get exactly these.
    """

    path: Path
    format: ModelFormat
    content: bytes = field(repr=False)


def is_tflite_bytes(content: bytes) -> bool:
    r"""True when ``content`` carries the TFLite flatbuffer file identifier at offset 4."""
    return len(content) >= 8 and content[4:8] == TFLITE_IDENTIFIER


def claimed_format(path: Path) -> ModelFormat | None:
    """The format a file's extension names, or None for an extension that names none."""
    return _CLAIMS.get(path.suffix.lower())


def read_model_file(path: Path, *, unsafe: bool = False) -> CheckedFile:
    """Read a model file once and decide its one format from the bytes.

    Args:
        path: A model file (not a directory).
        unsafe: The user consented to run code from the file (``--unsafe``): a polyglot
            is then read as the one of its formats that its extension names.

    Raises:
        ModelLoadError: The path is missing or not a regular file; the bytes are valid as
            no model format, or as more than one (a polyglot); or the extension names
            another format than the content.
    """
    from tfcompress.models.format_detection import detect_formats

    content = read_regular_bytes(path, error=ModelLoadError, what="a model file")
    formats = detect_formats(content)
    claimed = claimed_format(path)
    if len(formats) > 1 and unsafe and claimed in formats:
        logger.warning(
            "%s: the file is valid as %s; loading it as %s, as its extension says, because "
            "--unsafe was given",
            path,
            " and as ".join(f.description for f in formats),
            claimed.description,
        )
        formats = (claimed,)
    if len(formats) > 1:
        names = " and as ".join(f.description for f in formats)
        raise ModelLoadError(
            f"{path}: is valid both as {names} (a polyglot file, built to pass the check of "
            "one format and load as the other); tfcompress refuses it; save the model again "
            "in one format (or, trusting it, pass --unsafe and name it by the format to load)."
        )
    if not formats and claimed is ModelFormat.ONNX and is_onnx_bytes(content):
        # An .onnx that starts like one but does not parse: the ONNX loader says why.
        formats = (ModelFormat.ONNX,)
    if not formats:
        raise ModelLoadError(_unrecognised(path, content, claimed))
    decided = formats[0]
    if claimed is not None and claimed is not decided:
        raise ModelLoadError(
            f"{path}: the name says {claimed.description} ({path.suffix}) but the content is "
            f"{decided.description}; tfcompress loads a file only as what both say; rename "
            f"it to {path.stem}{decided.suffix} if it is meant to be {decided.description}."
        )
    return CheckedFile(path, decided, content)


def sniff_format(path: Path) -> ModelFormat:
    """Tell the format of the model at ``path`` from its content.

    A decision for routing and messages; loading reads the file once more through
    :func:`read_model_file` and uses only the bytes it checked then.

    Args:
        path: A file or a SavedModel directory.

    Raises:
        ModelLoadError: The path is missing, its bytes match no supported format or more
            than one, its extension disagrees with its content, or a directory holds no
            ``saved_model.pb``.

    Example:
        >>> sniff_format(Path("model.keras"))  # doctest: +SKIP
        <ModelFormat.KERAS: 'keras'>
    """
    if not path.exists():
        raise ModelLoadError(f"{path}: no such file or directory; pass {_SUPPORTED}.")
    return check_saved_model_dir(path) if path.is_dir() else read_model_file(path).format


def check_saved_model_dir(path: Path) -> ModelFormat:
    """Decide that directory ``path`` is a SavedModel, or refuse it in one line.

    Raises:
        ModelLoadError: No ``saved_model.pb``/``.pbtxt`` inside, or a name that claims a
            model file format (``model.h5/``): a loader that trusts the name would read the
            folder as that format.
    """
    if not ((path / "saved_model.pb").is_file() or (path / "saved_model.pbtxt").is_file()):
        raise ModelLoadError(f"{path}: directory holds no saved_model.pb; pass {_SUPPORTED}.")
    claimed = claimed_format(path)
    if claimed is not None:
        raise ModelLoadError(
            f"{path}: the name says {claimed.description} ({path.suffix}) but it is a "
            "SavedModel directory; tfcompress loads a model only as what both say; rename "
            "the folder without the extension."
        )
    return ModelFormat.SAVED_MODEL


def keras_version_of(checked: CheckedFile) -> str:
    """Read the Keras version a .keras or .h5 file was saved with ('' when not recorded).

    Raises:
        ModelLoadError: The file is truncated or corrupt, or its ``metadata.json`` is not a
            JSON object.
    """
    from tfcompress.models.keras_safety import h5_attribute, parse_config, zip_member

    if checked.format is ModelFormat.KERAS:
        text = zip_member(checked, "metadata.json", limit=2**20)
        metadata = parse_config(checked.path, text, "metadata.json", "an object")
        return str(metadata.get("keras_version", ""))
    version = h5_attribute(checked, "keras_version") or ""
    return version.decode() if isinstance(version, bytes) else str(version)


def _unrecognised(path: Path, content: bytes, claimed: ModelFormat | None) -> str:
    if claimed is ModelFormat.ONNX:
        return (
            f"{path}: not an ONNX model (no ModelProto header); the file is corrupt or "
            "another format; export it again."
        )
    if claimed is ModelFormat.TFLITE:
        return (
            f"{path}: not a TFLite model (no 'TFL3' identifier); the file is corrupt or not "
            "a .tflite; re-export it with `tfcompress quantize`."
        )
    if claimed in {ModelFormat.KERAS, ModelFormat.H5}:
        return (
            f"{path}: not a Keras {path.suffix.lower()} file (wrong magic bytes); it is corrupt "
            "or another format; save it again with model.save()."
        )
    return f"{path}: unrecognised model format; pass {_SUPPORTED}."


def read_tflite_input(model: Any, refusal: str) -> tuple[bytes, str, TFLiteFile]:
    """The bytes, name and parsed file of what a ``.tflite``-only tool was given.

    ``model`` is a path, bytes or a :class:`~tfcompress.models.TFLiteModel` (the Edge TPU
    linter and compiler, TFLM's checks, the GPU check). The structural checks of
    :mod:`tfcompress.models.tflite_checks` run here, in Python, before any native code reads
    the bytes (docs/security.md). ``refusal`` says which tool reads ``.tflite`` files and the
    command that makes one for it: the advice for another format, a folder or another type.

    Raises:
        ModelLoadError: A missing file, or bytes that are not a valid ``.tflite``.
        UnsupportedModelError: Another model format, or a directory.
        InvalidArgumentTypeError: ``model`` is none of the accepted types.
    """
    from tfcompress.models.loading import TFLiteModel
    from tfcompress.models.tflite_file import read_tflite

    if isinstance(model, TFLiteModel):
        content, source = model.content, str(model.path or model.name)
    elif isinstance(model, bytes | bytearray | memoryview):
        content, source = bytes(model), "<bytes>"
    elif isinstance(model, str | os.PathLike):
        content, source = _tflite_path_bytes(Path(model), refusal), str(model)
    else:
        raise InvalidArgumentTypeError(
            f"expected a .tflite path, its bytes or a TFLiteModel, got {type(model).__name__}; "
            + refusal
        )
    if not is_tflite_bytes(content):
        raise ModelLoadError(
            f"{source}: not a TFLite model (no 'TFL3' identifier) or truncated; " + refusal
        )
    parsed = read_tflite(content, source=source)
    parsed.validate(source=source)
    if not parsed.subgraphs:
        raise ModelLoadError(f"{source}: the .tflite has no subgraph; re-export the model.")
    return content, source, parsed


def _tflite_path_bytes(path: Path, refusal: str) -> bytes:
    # A missing file, a folder or a file of another format we know is refused here; bytes of
    # no known format come back for the caller to refuse as a bad .tflite.
    if not path.exists():
        raise ModelLoadError(f"{path}: no such file; pass the path of the .tflite to check.")
    if path.is_dir():
        raise UnsupportedModelError(f"{path}: a directory; {refusal}")
    content = read_regular_bytes(path, error=ModelLoadError, what="a .tflite file")
    if is_tflite_bytes(content):
        return content
    try:
        found = sniff_format(path)
    except ModelLoadError:
        return content
    raise UnsupportedModelError(f"{path}: a {found.value} model, not a .tflite; {refusal}")
