"""The ``.tflite`` a microcontroller check or a C export reads: checked before TFLM sees it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tfcompress._files import read_regular_bytes
from tfcompress.errors import InvalidArgumentTypeError, ModelLoadError, UnsupportedModelError
from tfcompress.models.formats import is_tflite_bytes, sniff_format

__all__ = ["read_checked"]

_TFLITE_ONLY = (
    "TFLite Micro runs .tflite files: convert it first with `tfcompress quantize MODEL "
    "--target mcu --data CALIB.npz --out model_int8.tflite`."
)


def read_checked(model: Any) -> tuple[bytes, str]:
    """The bytes of ``model`` (a path, bytes or TFLiteModel), validated, and its name.

    The structural checks of :mod:`tfcompress.models.tflite_checks` run here, in Python,
    before any native code reads the bytes (docs/security.md).

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
        content, source = _read_path(Path(model)), str(model)
    else:
        raise InvalidArgumentTypeError(
            f"expected a .tflite path, its bytes or a TFLiteModel, got {type(model).__name__}; "
            + _TFLITE_ONLY
        )
    if not is_tflite_bytes(content):
        raise ModelLoadError(
            f"{source}: not a TFLite model (no 'TFL3' identifier) or truncated; " + _TFLITE_ONLY
        )
    parsed = read_tflite(content, source=source)
    parsed.validate(source=source)
    if not parsed.subgraphs:
        raise ModelLoadError(f"{source}: the .tflite has no subgraph; re-export the model.")
    return content, source


def _read_path(path: Path) -> bytes:
    if not path.exists():
        raise ModelLoadError(f"{path}: no such file; pass the path of the .tflite to check.")
    if path.is_dir():
        raise UnsupportedModelError(f"{path}: a directory; {_TFLITE_ONLY}")
    content = read_regular_bytes(path, error=ModelLoadError, what="a .tflite file")
    if is_tflite_bytes(content):
        return content
    try:
        found = sniff_format(path)
    except ModelLoadError:  # no format we know: report it as a bad .tflite
        found = None
    if found is not None:
        raise UnsupportedModelError(f"{path}: a {found.value} model, not a .tflite; {_TFLITE_ONLY}")
    return content
