"""Atomic, non-destructive writes: a crash never leaves half an artifact, inputs are never hit."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from tfcompress.errors import OutputExistsError

PathLike = str | os.PathLike[str]


def check_output_path(
    path: PathLike, *, overwrite: bool = False, inputs: Iterable[PathLike] = ()
) -> Path:
    """Validate an output path before any long work starts.

    Args:
        path: Where the artifact will be written.
        overwrite: Allow replacing an existing file.
        inputs: Paths read by the same operation; the output may never be one of them.

    Returns:
        The output path as a :class:`~pathlib.Path`.

    Raises:
        OutputExistsError: The path exists without ``overwrite``, is a directory, or is an input.

    Example:
        >>> check_output_path("model_int8.tflite", overwrite=True)
        PosixPath('model_int8.tflite')
    """
    out = Path(path)
    resolved = out.resolve()
    for source in inputs:
        if Path(source).resolve() == resolved:
            raise OutputExistsError(
                f"{out}: the output would overwrite an input; choose another output path."
            )
    if out.is_dir():
        raise OutputExistsError(f"{out}: is a directory; give a file path for the output.")
    if out.exists() and not overwrite:
        raise OutputExistsError(
            f"{out}: already exists; pass --force (overwrite=True) to replace it."
        )
    if not out.parent.exists():
        raise OutputExistsError(f"{out}: the folder {out.parent} does not exist; create it first.")
    return out


def write_bytes_atomic(
    path: PathLike, data: bytes, *, overwrite: bool = False, inputs: Iterable[PathLike] = ()
) -> Path:
    """Write ``data`` to ``path`` through a temporary file and an atomic rename.

    Args:
        path: Destination file.
        data: The bytes to write.
        overwrite: Allow replacing an existing file.
        inputs: Paths that must not be overwritten.

    Returns:
        The destination path.

    Raises:
        OutputExistsError: See :func:`check_output_path`.

    Example:
        >>> write_bytes_atomic("model_int8.tflite", result.model_content)  # doctest: +SKIP
    """
    out = check_output_path(path, overwrite=overwrite, inputs=inputs)
    handle, temporary = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, out)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return out


def write_text_atomic(
    path: PathLike, text: str, *, overwrite: bool = False, inputs: Iterable[PathLike] = ()
) -> Path:
    """Write UTF-8 ``text`` atomically; see :func:`write_bytes_atomic`."""
    return write_bytes_atomic(path, text.encode("utf-8"), overwrite=overwrite, inputs=inputs)
