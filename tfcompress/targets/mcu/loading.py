"""The ``.tflite`` a microcontroller check or a C export reads: checked before TFLM sees it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tfcompress.errors import InvalidArgumentTypeError, ModelLoadError
from tfcompress.models.formats import is_tflite_bytes, read_tflite_path

_TFLITE_ONLY = (
    "TFLite Micro runs .tflite files: convert it first with `tfcompress quantize MODEL "
    "--target mcu --data CALIB.npz --out model_int8.tflite`."
)
# What `tfcompress gpu` says instead: a GPU file needs no calibration data.
GPU_TFLITE_ONLY = (
    "LiteRT's GPU delegate runs .tflite files: convert it first with `tfcompress quantize "
    "MODEL --target gpu --out model_gpu.tflite`."
)


def read_checked(model: Any, *, tflite_only: str = _TFLITE_ONLY) -> tuple[bytes, str]:
    """The bytes of ``model`` (a path, bytes or TFLiteModel), validated, and its name.

    ``tflite_only`` is the advice for another format: which runtime reads ``.tflite`` files
    and the command that makes one for it.

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
        content, source = read_tflite_path(Path(model), tflite_only), str(model)
    else:
        raise InvalidArgumentTypeError(
            f"expected a .tflite path, its bytes or a TFLiteModel, got {type(model).__name__}; "
            + tflite_only
        )
    if not is_tflite_bytes(content):
        raise ModelLoadError(
            f"{source}: not a TFLite model (no 'TFL3' identifier) or truncated; " + tflite_only
        )
    parsed = read_tflite(content, source=source)
    parsed.validate(source=source)
    if not parsed.subgraphs:
        raise ModelLoadError(f"{source}: the .tflite has no subgraph; re-export the model.")
    return content, source
