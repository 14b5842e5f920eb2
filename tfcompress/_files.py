"""Files in and out: what a stranger hands us is read without blocking; what we write is atomic.

Reading. A FIFO, socket or device passed as a model or a data file makes ``open()`` or
``read()`` block forever (or read endless bytes from ``/dev/zero``). Every reader of user-given
paths checks the kind of file first, and :func:`read_regular_bytes` re-checks it on the open
descriptor, opened non-blocking, so a file swapped in between cannot hang the process.

Writing. A crash never leaves half an artifact and inputs are never hit. Rules every output
follows, checked by :func:`check_output_path` before long work starts:

* an existing path (a dangling symlink counts) is replaced only with ``overwrite``;
* a directory, pipe, socket or device is never replaced, even with ``overwrite``;
* an input of the same operation is never an output;
* the folder must accept a new file of that name now (a real probe, so ``/proc``, ``/sys``,
  read-only mounts and over-long names fail in a second, not after the conversion).

Written files get the mode ``open()`` would give them (``0o666`` less the umask).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from tfcompress.errors import OutputExistsError, OutputLocationError, TFCompressError

PathLike = str | os.PathLike[str]

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

    Returns its ``stat`` result; ``what`` is what the file should be, for the message.

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

    The path is checked, then opened by :func:`open_regular` (checked again, never blocking).

    Raises:
        TFCompressError: ``error`` when the path is missing, unreadable or not a regular file.

    Example:
        >>> read_regular_bytes(Path("model.tflite"), error=TFCompressError, what="a model")
        ... # doctest: +SKIP
    """
    check_regular_file(path, error=error, what=what)
    with open_regular(path, error=error, what=what) as handle:
        return handle.read() if limit is None else handle.read(limit)


@contextlib.contextmanager
def open_regular(path: Path, *, error: type[TFCompressError], what: str) -> Iterator[IO[bytes]]:
    """Open ``path`` to read, never blocking (``O_NONBLOCK``); ``error`` unless it is regular.

    ``fstat`` on the open descriptor refuses a FIFO or device swapped in after any check.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as failure:
        raise error(f"{path}: cannot be opened ({failure.strerror}); check it.") from None
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise error(f"{path}: is {file_kind(mode)}, not {what}; pass a regular file.")
        yield handle


# -- writing --------------------------------------------------------------------------------------
_TEMP_PREFIX = ".tfcompress-"  # short, so a long final name still fits beside it


def check_output_path(
    path: PathLike, *, overwrite: bool = False, inputs: Iterable[PathLike] = ()
) -> Path:
    """Validate an output path before any long work starts.

    ``overwrite`` allows replacing an existing regular file (or symlink); ``inputs`` are the
    paths the same operation reads, which the output may never be.

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
    try:
        resolved = out.resolve()
    except (RuntimeError, OSError):  # ELOOP: `ln -s loop loop` (RuntimeError before 3.13)
        raise OutputLocationError(
            f"{out}: the path goes through a symbolic link loop; remove the link or choose "
            "another output path."
        ) from None
    for source in inputs:
        try:
            same = Path(source).resolve() == resolved
        except (RuntimeError, OSError):  # an input in a loop is not this output
            same = False
        if same:
            raise OutputExistsError(
                f"{out}: the output would overwrite an input; choose another output path."
            )
    _check_folder_and_name(out)
    _check_existing(out, overwrite)
    return out


def _check_folder_and_name(out: Path) -> None:
    folder = out.parent
    try:
        is_folder = folder.is_dir()
    except OSError as failure:  # ENAMETOOLONG: a path longer than PATH_MAX (4,096 bytes)
        raise OutputLocationError(
            f"{str(out)[:80]}... ({len(str(out)):,} characters): the folder cannot be checked "
            f"({failure.strerror}); choose a shorter path."
        ) from None
    if not is_folder:
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

    ``what`` is the output the message names (default: the folder).

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

    ``overwrite`` allows replacing an existing file; ``inputs`` must never be overwritten.

    Raises:
        OutputExistsError: See :func:`check_output_path`.
        OutputLocationError: The folder does not accept the file (full disk, read-only...).
    """
    return write_files_atomic({Path(path): data}, overwrite=overwrite, inputs=inputs)[0]


def write_text_atomic(
    path: PathLike, text: str, *, overwrite: bool = False, inputs: Iterable[PathLike] = ()
) -> Path:
    """Write UTF-8 ``text`` atomically; see :func:`write_bytes_atomic`."""
    return write_bytes_atomic(path, text.encode("utf-8"), overwrite=overwrite, inputs=inputs)


def write_files_atomic(
    files: dict[Path, bytes], *, overwrite: bool = False, inputs: Iterable[PathLike] = ()
) -> list[Path]:
    """Write several files all or nothing: each to a temporary file, then all renamed.

    Every file is written and synced before the first rename, so a full disk or any other
    failure while writing leaves none of them (and the existing files untouched); a rename
    that fails after others succeeded removes the ones already placed.

    Raises:
        OutputExistsError: See :func:`check_output_path`.
        OutputLocationError: A folder does not accept a file (full disk, read-only...).

    Example:
        >>> write_files_atomic({Path("m.h"): b"...", Path("m.cc"): b"..."})  # doctest: +SKIP
        [PosixPath('m.h'), PosixPath('m.cc')]
    """
    outs = [_check_destination(p, overwrite=overwrite, inputs=inputs) for p in files]
    staged: list[tuple[str, Path]] = []
    placed: list[Path] = []
    current = outs[0] if outs else Path()
    try:
        for current, data in zip(outs, files.values(), strict=True):
            # The temporary file is itself the writability probe: no second file is created.
            handle, temporary = _temporary_file(current.parent, what=current, suffix=".tmp")
            staged.append((temporary, current))
            with os.fdopen(handle, "wb") as stream:
                os.fchmod(stream.fileno(), 0o666 & ~_umask())
                stream.write(data)
                stream.flush()
                os.fsync(stream.fileno())
        for temporary, current in staged:
            os.replace(temporary, current)
            placed.append(current)
    except BaseException as failure:
        for temporary, _ in staged:
            Path(temporary).unlink(missing_ok=True)
        for done in placed:
            done.unlink(missing_ok=True)
        if not isinstance(failure, OSError):
            raise
        hint = "free some space" if failure.errno == errno.ENOSPC else "choose another folder"
        what = "nothing was" if len(outs) == 1 else f"none of the {len(outs)} files was"
        raise OutputLocationError(
            f"{current}: writing failed ({failure.strerror}); {what} written; {hint}."
        ) from failure
    return outs


def _umask() -> int:
    # The only portable way to read the umask is to set it; set it straight back.
    current = os.umask(0o022)
    os.umask(current)
    return current
