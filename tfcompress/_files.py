"""Open what a stranger hands us without blocking: only regular files and directories.

A FIFO, socket or device passed as a model or a data file makes ``open()`` or ``read()``
block forever (or read endless bytes from ``/dev/zero``). Every reader of user-given paths
checks the kind of file first, and :func:`read_regular_bytes` re-checks it on the open
descriptor, opened non-blocking, so a file swapped in between cannot hang the process.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tfcompress.errors import TFCompressError

__all__ = ["check_regular_file", "check_tree", "file_kind", "read_regular_bytes"]

_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
)


def file_kind(mode: int) -> str:
    """Name the kind of file a ``st_mode`` describes, for error messages.

    Example:
        >>> file_kind(os.stat(".").st_mode)
        'a directory'
    """
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "a special file"


def check_regular_file(path: Path, *, error: type[TFCompressError], what: str) -> os.stat_result:
    """Stat ``path`` and fail unless it is a regular file (symlinks are followed).

    Args:
        path: The file the user named.
        error: The error class to raise (e.g. ``ModelLoadError``, ``InvalidDataError``).
        what: What the file should be, for the message ("a model file", "a data file").

    Returns:
        The file's ``stat`` result.

    Raises:
        TFCompressError: ``error`` when the path is missing, unreadable or not a regular file.

    Example:
        >>> check_regular_file(Path("/dev/null"), error=TFCompressError, what="a model")
        Traceback (most recent call last):
        ...
        tfcompress.errors.TFCompressError: /dev/null: is a character device, not a model ...
    """
    try:
        info = path.stat()
    except FileNotFoundError:
        raise error(f"{path}: no such file; check the path.") from None
    except OSError as failure:
        raise error(f"{path}: cannot be read ({failure.strerror}); check the path.") from None
    if not stat.S_ISREG(info.st_mode):
        raise error(
            f"{path}: is {file_kind(info.st_mode)}, not {what}; pass a regular file "
            "(tfcompress never reads pipes or devices, which could block forever)."
        )
    return info


def check_tree(root: Path, *, error: type[TFCompressError], what: str) -> None:
    """Fail when anything under directory ``root`` is neither a regular file nor a directory.

    Symlinked directories are not followed (as :meth:`Path.rglob` does), so a link loop
    cannot make the walk endless.

    Raises:
        TFCompressError: ``error`` naming the first special file or unreadable folder found.

    Example:
        >>> check_tree(Path("saved_model_dir"), error=TFCompressError, what="a SavedModel")
        ... # doctest: +SKIP
    """

    def unreadable(failure: OSError) -> None:
        raise error(f"{failure.filename}: cannot be listed inside {what} ({failure.strerror}).")

    for current, folders, files in os.walk(root, onerror=unreadable, followlinks=False):
        for name in (*folders, *files):
            entry = Path(current, name)
            try:
                mode = entry.stat().st_mode
            except OSError:
                raise error(
                    f"{entry}: a broken link or unreadable entry inside {what}; remove it."
                ) from None
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise error(
                    f"{entry}: is {file_kind(mode)} inside {what}; only regular files are read."
                )


def read_regular_bytes(
    path: Path, *, error: type[TFCompressError], what: str, limit: int | None = None
) -> bytes:
    """Read a regular file whole (or its first ``limit`` bytes) without ever blocking.

    The file is opened with ``O_NONBLOCK`` (a no-op for regular files; for a FIFO it makes
    ``open()`` return at once) and checked again with ``fstat`` before the first read.

    Raises:
        TFCompressError: ``error`` when the path is missing, unreadable or not a regular file.

    Example:
        >>> read_regular_bytes(Path("model.tflite"), error=TFCompressError, what="a model")
        ... # doctest: +SKIP
    """
    check_regular_file(path, error=error, what=what)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as failure:
        raise error(f"{path}: cannot be opened ({failure.strerror}); check it.") from None
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise error(f"{path}: is {file_kind(mode)}, not {what}; pass a regular file.")
        return handle.read() if limit is None else handle.read(limit)
