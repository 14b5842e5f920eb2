"""Atomic, non-destructive writes: a crash never leaves half an artifact, inputs are never hit.

Rules every output follows, checked by :func:`check_output_path` before long work starts:

* an existing path (a dangling symlink counts) is replaced only with ``overwrite``;
* a directory, pipe, socket or device is never replaced, even with ``overwrite``;
* an input of the same operation is never an output;
* the folder must accept a new file of that name now (a real probe, so ``/proc``, ``/sys``,
  read-only mounts and over-long names fail in a second, not after the conversion).

Written files get the mode ``open()`` would give them (``0o666`` less the umask).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from tfcompress._files import file_kind
from tfcompress.errors import OutputExistsError, OutputLocationError

PathLike = str | os.PathLike[str]
_TEMP_PREFIX = ".tfcompress-"  # short, so a long final name still fits beside it


def check_output_path(
    path: PathLike, *, overwrite: bool = False, inputs: Iterable[PathLike] = ()
) -> Path:
    """Validate an output path before any long work starts.

    Args:
        path: Where the artifact will be written.
        overwrite: Allow replacing an existing regular file (or symlink).
        inputs: Paths read by the same operation; the output may never be one of them.

    Returns:
        The output path as a :class:`~pathlib.Path`.

    Raises:
        OutputExistsError: The path exists without ``overwrite``, is a directory or special
            file, or is an input.
        OutputLocationError: The folder is missing or does not accept a new file there.

    Example:
        >>> check_output_path("model_int8.tflite", overwrite=True)
        PosixPath('model_int8.tflite')
    """
    out = _check_destination(path, overwrite=overwrite, inputs=inputs)
    check_writable_folder(out.parent, what=out)
    return out


def _check_destination(path: PathLike, *, overwrite: bool, inputs: Iterable[PathLike]) -> Path:
    """Every check of :func:`check_output_path` except the writability probe."""
    out = Path(path)
    if not out.name or out.name in {".", ".."}:
        raise OutputLocationError(f"{out}: give a file path for the output, not a folder.")
    resolved = out.resolve()
    for source in inputs:
        if Path(source).resolve() == resolved:
            raise OutputExistsError(
                f"{out}: the output would overwrite an input; choose another output path."
            )
    _check_folder_and_name(out)
    _check_existing(out, overwrite)
    return out


def _check_folder_and_name(out: Path) -> None:
    folder = out.parent
    if not folder.is_dir():
        raise OutputLocationError(f"{out}: the folder {folder} does not exist; create it first.")
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    if len(os.fsencode(out.name)) > limit:
        raise OutputLocationError(
            f"{out.name[:40]}...: the file name is longer than this file system allows "
            f"({limit} bytes); choose a shorter name."
        )


def _check_existing(out: Path, overwrite: bool) -> None:
    try:
        link = out.lstat()
    except FileNotFoundError:
        return
    except OSError as failure:
        raise OutputLocationError(f"{out}: cannot be checked ({failure.strerror}).") from None
    if stat.S_ISLNK(link.st_mode) and not out.exists() and not overwrite:
        raise OutputExistsError(
            f"{out}: is a symlink to a missing file; pass --force (overwrite=True) to replace "
            "the link."
        )
    mode = out.stat().st_mode if out.exists() else link.st_mode
    if stat.S_ISDIR(mode):
        raise OutputExistsError(f"{out}: is a directory; give a file path for the output.")
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise OutputExistsError(
            f"{out}: is {file_kind(mode)}; tfcompress only replaces regular files, even with "
            "--force; choose another output path."
        )
    if not overwrite:
        raise OutputExistsError(
            f"{out}: already exists; pass --force (overwrite=True) to replace it."
        )


def check_writable_folder(folder: PathLike, *, what: PathLike | None = None) -> None:
    """Create and delete a temporary file in ``folder``: the only honest writability test.

    ``os.access`` says yes to root in ``/proc``, ``/sys`` and on read-only mounts; a real
    file creation does not.

    Args:
        folder: An existing directory.
        what: The output the message should name (default: the folder).

    Raises:
        OutputLocationError: ``folder`` does not accept new files.

    Example:
        >>> check_writable_folder("/proc")
        Traceback (most recent call last):
        ...
        tfcompress.errors.OutputLocationError: /proc: cannot write in /proc (...); ...
    """
    handle, temporary = _temporary_file(Path(folder), what=what, suffix=".probe")
    os.close(handle)
    os.unlink(temporary)


def _temporary_file(folder: Path, *, what: PathLike | None, suffix: str) -> tuple[int, str]:
    try:
        return tempfile.mkstemp(prefix=_TEMP_PREFIX, suffix=suffix, dir=folder)
    except OSError as failure:
        raise OutputLocationError(
            f"{what or folder}: cannot write in {folder} ({failure.strerror}); choose a "
            "writable folder."
        ) from None


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
        OutputLocationError: The folder does not accept the file (full disk, read-only...).

    Example:
        >>> write_bytes_atomic("model_int8.tflite", result.model_content)  # doctest: +SKIP
    """
    out = _check_destination(path, overwrite=overwrite, inputs=inputs)
    # The temporary file is itself the writability probe: no second file is created.
    handle, temporary = _temporary_file(out.parent, what=out, suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            os.fchmod(stream.fileno(), 0o666 & ~_umask())
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, out)
    except OSError as failure:
        Path(temporary).unlink(missing_ok=True)
        hint = "free some space" if failure.errno == errno.ENOSPC else "choose another folder"
        raise OutputLocationError(
            f"{out}: writing failed ({failure.strerror}); nothing was written; {hint}."
        ) from failure
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return out


def write_text_atomic(
    path: PathLike, text: str, *, overwrite: bool = False, inputs: Iterable[PathLike] = ()
) -> Path:
    """Write UTF-8 ``text`` atomically; see :func:`write_bytes_atomic`."""
    return write_bytes_atomic(path, text.encode("utf-8"), overwrite=overwrite, inputs=inputs)


def _umask() -> int:
    # The only portable way to read the umask is to set it; set it straight back.
    current = os.umask(0o022)
    os.umask(current)
    return current
