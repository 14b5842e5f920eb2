"""Private copies: a loader reads the bytes tfcompress checked, never the user's path again.

Between the safety check of a model and its load, the file at the user's path could be
replaced (another process, a shared folder). So the checked bytes are written into a
folder only this user can open (``mkdtemp`` makes it ``0700``), under a name whose
extension is the format tfcompress decided, and the loader is given that copy.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import shutil
import stat
import tempfile
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path

from tfcompress._files import file_kind, open_regular
from tfcompress.errors import ModelLoadError, OutputLocationError

_PREFIX = "tfcompress-checked-"
_lock = threading.Lock()
_root: Path | None = None


def _private_root() -> Path:
    """One ``0700`` folder per process for every private copy, removed when it exits."""
    global _root
    with _lock:
        if _root is None or not _root.is_dir():
            _root = Path(tempfile.mkdtemp(prefix=_PREFIX))
            atexit.register(shutil.rmtree, _root, ignore_errors=True)
        return _root


@contextlib.contextmanager
def private_file(content: bytes, suffix: str) -> Iterator[Path]:
    """Write ``content`` to a private file named ``model<suffix>``, removed after the block.

    Args:
        content: The checked bytes.
        suffix: The extension of the decided format (``.keras``, ``.h5``): Keras loaders
            choose their reader by the name, so the name must say what was checked.
    """
    with temporary_space():
        folder = Path(tempfile.mkdtemp(dir=_private_root()))
    try:
        path = folder / f"model{suffix}"
        with temporary_space():
            path.write_bytes(content)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def temporary_space() -> Iterator[None]:
    """Make a full temporary folder, met while writing a private copy, one line of bad input.

    Raises:
        OutputLocationError: The block failed with ENOSPC or EDQUOT; the message names the
            temporary folder and how to give tfcompress another (other errors pass through).
    """
    try:
        yield
    except OSError as failure:
        if failure.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise OutputLocationError(
            f"no space left in the temporary folder {tempfile.gettempdir()} (tfcompress writes "
            "a private copy of the model there); free space or set TMPDIR to a folder with room."
        ) from None


class PrivateFolder:
    """A private folder that lives as long as this object (or the process), then goes.

    A loaded SavedModel keeps reading its folder (TensorFlow opens ``variables/`` and
    ``assets/`` when a converter or runner loads it), so its copy must outlive the load:
    objects that use it hold this and the folder is removed when the last one is dropped.
    """

    def __init__(self, name: str) -> None:
        parent = Path(tempfile.mkdtemp(dir=_private_root()))
        self.path = parent / name
        self.path.mkdir()
        self._finalizer = weakref.finalize(self, shutil.rmtree, parent, ignore_errors=True)

    def remove(self) -> None:
        """Remove the folder now."""
        self._finalizer()


def copy_regular_tree(source: Path, target: Path, *, what: str) -> None:
    """Copy the regular files and folders under ``source`` into the new folder ``target``.

    Each file is opened without blocking and checked to be regular on its open descriptor
    before it is read, so a FIFO or device swapped in cannot hang or feed the copy. Links
    are followed, as TensorFlow's reader would follow them.

    Raises:
        ModelLoadError: A special file, an unreadable entry, or a folder that loops.
    """
    target.mkdir()
    seen = {_identity(source)}
    pending = [(source, target)]
    while pending:
        folder, copy = pending.pop()
        try:
            entries = sorted(folder.iterdir())
        except OSError as failure:
            raise ModelLoadError(
                f"{folder}: cannot be listed inside {what} ({failure.strerror})."
            ) from None
        for entry in entries:
            try:
                mode = entry.stat().st_mode
            except OSError:
                raise ModelLoadError(
                    f"{entry}: a broken link or unreadable entry inside {what}; remove it."
                ) from None
            if stat.S_ISDIR(mode):
                identity = _identity(entry)
                if identity in seen:
                    raise ModelLoadError(f"{entry}: a folder link loop inside {what}; remove it.")
                seen.add(identity)
                (copy / entry.name).mkdir()
                pending.append((entry, copy / entry.name))
            elif stat.S_ISREG(mode):
                _copy_file(entry, copy / entry.name, what=what)
            else:
                raise ModelLoadError(
                    f"{entry}: is {file_kind(mode)} inside {what}; only regular files are read."
                )


def _identity(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_dev, info.st_ino


def _copy_file(source: Path, target: Path, *, what: str) -> None:
    with (
        open_regular(source, error=ModelLoadError, what=f"a regular file inside {what}") as handle,
        target.open("wb") as out,
    ):
        shutil.copyfileobj(handle, out, 1 << 20)
