"""Read ``.npy`` and ``.npz`` files from strangers: every declared size is checked first.

``np.load`` trusts a file's header: a ``.npy`` whose header declares shape
``(10**12, 28, 28)`` makes it try to allocate terabytes, a zip member that claims an
absurd uncompressed size is a zip bomb, and a FIFO named ``data.npz`` blocks forever.
Here the kind of file, the header, the dtype and the size the header declares are all
checked against what the file can hold *before* any array memory is allocated, and every
failure is one :class:`~tfcompress.errors.InvalidDataError` naming the file.
"""

from __future__ import annotations

import math
import os
import stat
import tokenize
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import numpy as np
from numpy.lib import format as npy_format

from tfcompress._files import check_regular_file, file_kind
from tfcompress._limits import MAX_INFLATED_BYTES
from tfcompress.errors import InvalidDataError, TFCompressError

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = b"PK\x03\x04"
_MAX_HEADER = 10_000  # numpy's own limit on .npy header length
_CHUNK = 1 << 24  # read 16 MiB at a time so a lying stream cannot force one huge read
# Deflate cannot expand data more than 1032:1; a member claiming more lies about its size.
_MAX_DEFLATE_RATIO = 1032
_DEFLATE_SLACK = 1 << 16
_KIND_NAMES = {
    "V": "structured or void records",
    "c": "complex numbers",
    "S": "byte strings",
    "U": "text strings",
    "M": "dates",
    "m": "time deltas",
}
# Errors numpy and zipfile raise on malformed input; our own (also ValueErrors) pass through.
# numpy parses a .npy header with Python's tokenizer and ast.literal_eval: an unclosed
# bracket is a TokenError, a deep one a SyntaxError or RecursionError, a huge literal an
# OverflowError or MemoryError; every one of them means a bad header.
_FORMAT_ERRORS = (
    ValueError,
    EOFError,
    OSError,
    zipfile.BadZipFile,
    zlib.error,
    TypeError,
    KeyError,
    SyntaxError,
    tokenize.TokenError,
    RecursionError,
    OverflowError,
    MemoryError,
)


def read_npy(path: Path) -> np.ndarray:
    """Read the array of a ``.npy`` file after checking its header against the file size.

    Raises:
        InvalidDataError: Not a regular file, not a ``.npy``, a pickled/object, string,
            complex or structured array, a 0-d array, or a header that declares more data
            than the file holds (or than this machine's memory).
    """
    wrong = "is a .npz archive, not a .npy array; rename it to .npz (arrays x and y inside)"
    with _open_data(path, _ZIP_MAGIC, wrong, "a readable .npy file", "np.save") as handle:
        size = os.fstat(handle.fileno()).st_size
        return _read_array(handle, size, str(path), key="x", exact=False)


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Read every array of a ``.npz`` archive, checking sizes first.

    Each member's declared uncompressed size is checked against its compressed size and
    against the shape its ``.npy`` header declares, and the compressed members together
    may inflate to ``TFCOMPRESS_MAX_INFLATED_BYTES`` (1 GiB by default; no zip bombs);
    CRCs are verified.

    Raises:
        InvalidDataError: Not a regular file or not a zip archive, no arrays, a corrupt or
            encrypted member, or any array :func:`read_npy` would refuse.
    """
    wrong = (
        "is a .npy array, not a .npz archive; rename it to .npy, or save samples and labels "
        "with np.savez(path, x=samples, y=labels)"
    )
    saving = "np.savez(path, x=samples, y=labels)"
    with (
        _open_data(path, _NPY_MAGIC, wrong, "a readable .npz file", saving) as handle,
        zipfile.ZipFile(handle) as archive,
    ):
        members = {_key(info.filename): info for info in archive.infolist()}
        if not members:
            raise InvalidDataError(f"{path}: the archive holds no arrays; save them with {saving}.")
        for info in members.values():  # every header first, then the total
            _check_member(info, path)
        _check_inflated(members.values(), path)
        return {key: _read_member(archive, info, path) for key, info in members.items()}


@contextmanager
def _open_data(
    path: Path, other_magic: bytes, wrong: str, what: str, saving: str
) -> Iterator[IO[bytes]]:
    """Open a regular file without blocking, refuse the other format, name format errors.

    A FIFO or device is refused before ``open``; a file that starts with ``other_magic`` is
    ``wrong``; numpy's and zipfile's errors on malformed input are "not {what}".
    """
    check_regular_file(path, error=InvalidDataError, what="a data file")
    try:
        # O_NONBLOCK: if a FIFO is swapped in after the check, open() still returns at once.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as failure:
        raise InvalidDataError(
            f"{path}: cannot be opened ({failure.strerror}); check it."
        ) from None
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InvalidDataError(
                f"{path}: is {file_kind(mode)}, not a data file; pass a regular file."
            )
        if handle.read(len(other_magic)) == other_magic:
            raise InvalidDataError(f"{path}: {wrong}.")
        handle.seek(0)
        try:
            yield handle
        except TFCompressError:
            raise
        except (*_FORMAT_ERRORS, NotImplementedError) as error:
            reason = " ".join(str(error).split())[:200] or type(error).__name__
            raise InvalidDataError(
                f"{path}: not {what} ({reason}); save it with {saving}."
            ) from error


def _key(member: str) -> str:
    """The array name np.load shows for a member (``x.npy`` -> ``x``)."""
    return member[: -len(".npy")] if member.endswith(".npy") else member


def _check_inflated(members: Iterable[zipfile.ZipInfo], path: Path) -> None:
    """Refuse compressed members that declare more bytes in total than the stated limit.

    zipfile never inflates a member past its declared size, and the array reader checks
    the declared size against the ``.npy`` header, so the declared sizes bound memory.
    """
    inflated = sum(i.file_size for i in members if i.compress_type != zipfile.ZIP_STORED)
    limit = MAX_INFLATED_BYTES.value()
    if inflated > limit:
        raise InvalidDataError(
            f"{path}: its compressed arrays inflate to {_bytes(inflated)}, over the limit of "
            f"{_bytes(limit)} ({MAX_INFLATED_BYTES.env}); it is a zip bomb or a very large "
            f"dataset; {MAX_INFLATED_BYTES.hint()}."
        )


def _check_member(info: zipfile.ZipInfo, path: Path) -> None:
    """What one member's zip header declares: no password, sizes deflate can produce."""
    origin = f"{path}: array {_key(info.filename)!r}"
    if info.flag_bits & 0x1:
        raise InvalidDataError(f"{origin} is encrypted; save the archive without a password.")
    if info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size:
        raise InvalidDataError(
            f"{origin} claims {_bytes(info.file_size)} stored in {_bytes(info.compress_size)}; "
            "the archive is corrupt: save it again with np.savez."
        )
    limit = info.compress_size * _MAX_DEFLATE_RATIO + _DEFLATE_SLACK
    if info.compress_type == zipfile.ZIP_DEFLATED and info.file_size > limit:
        raise InvalidDataError(
            f"{origin} claims {_bytes(info.file_size)} uncompressed from "
            f"{_bytes(info.compress_size)}, more than deflate can produce; the archive is "
            "corrupt or a zip bomb: save it again with np.savez_compressed."
        )


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path) -> np.ndarray:
    key = _key(info.filename)
    origin = f"{path}: array {key!r}"
    _check_memory(info.file_size, origin)
    with archive.open(info) as member:
        array = _read_array(member, info.file_size, origin, key=key, exact=True)
        # Reading past the last byte makes zipfile compare the CRC (BadZipFile if wrong).
        if member.read(1):
            raise InvalidDataError(f"{origin} has trailing bytes; save it again with np.savez.")
    return array


def _read_array(stream: IO[bytes], size: int, origin: str, *, key: str, exact: bool) -> np.ndarray:
    """Parse a ``.npy`` header from ``stream``, check it against ``size`` bytes, read the data."""
    version = npy_format.read_magic(stream)
    if version == (1, 0):
        shape, fortran, dtype = npy_format.read_array_header_1_0(stream, _MAX_HEADER)
    elif version == (2, 0):
        shape, fortran, dtype = npy_format.read_array_header_2_0(stream, _MAX_HEADER)
    else:
        # Version 3.0 only differs by UTF-8 field names of structured dtypes, refused anyway.
        raise InvalidDataError(
            f"{origin}: .npy format version {version[0]}.{version[1]} is not supported; "
            "save plain numbers with np.save."
        )
    _check_dtype(dtype, origin)
    nbytes = _check_shape(shape, dtype, origin, key)
    available = size - stream.tell()
    if nbytes > available or (exact and nbytes != available):
        raise InvalidDataError(
            f"{origin}: the header declares shape {shape} {dtype} ({_bytes(nbytes)}) but the "
            f"data holds {_bytes(max(available, 0))}; the file is truncated or corrupt: save "
            "it again with numpy."
        )
    _check_memory(nbytes, origin)
    buffer = bytearray(nbytes)
    view = memoryview(buffer)
    filled = 0
    while filled < nbytes:
        got = stream.readinto(view[filled : filled + _CHUNK])
        if not got:
            raise InvalidDataError(
                f"{origin}: ends after {_bytes(filled)} of {_bytes(nbytes)}; the file is "
                "truncated: save it again with numpy."
            )
        filled += got
    array = np.frombuffer(buffer, dtype=dtype)  # a view of the bytearray: writable, no copy
    return array.reshape(shape, order="F" if fortran else "C")


def _check_dtype(dtype: np.dtype, origin: str) -> None:
    if dtype.hasobject:
        raise InvalidDataError(
            f"{origin}: holds Python objects (a pickled array), which tfcompress refuses "
            "because unpickling can run code; save plain numbers, e.g. "
            "np.save(path, x.astype(np.float32))."
        )
    if dtype.kind not in "biuf":
        kind = _KIND_NAMES.get(dtype.kind, "not plain numbers")
        raise InvalidDataError(
            f"{origin}: has dtype {dtype} ({kind}); save plain numbers, e.g. "
            "x.astype(np.float32) for samples or integer class indices for labels."
        )


def _check_shape(shape: tuple[int, ...], dtype: np.dtype, origin: str, key: str) -> int:
    """Return the bytes ``shape`` needs, refusing negative shapes and 0-d samples or labels.

    A 0-d array named after an input (``sr`` in ``np.savez(path, audio=a, sr=16000)``) is
    one value for every sample: the model's signature decides whether that input takes one.
    """
    if not shape and (key in {"x", "y"} or key.startswith("y_")):
        example = "(N,) class indices" if key == "y" else "(N, 28, 28, 1)"
        raise InvalidDataError(
            f"{origin}: is a single value (a 0-d array), not a batch; save an array with the "
            f"batch dimension first, e.g. shape {example}."
        )
    if any(dim < 0 for dim in shape):
        raise InvalidDataError(
            f"{origin}: the header declares a negative shape {shape}; the file is corrupt: "
            "save it again with numpy."
        )
    return math.prod(shape) * dtype.itemsize  # Python ints: no overflow on absurd shapes


def _check_memory(nbytes: int, origin: str) -> None:
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return  # the platform cannot say; the size checks against the file still hold
    if nbytes > memory:
        raise InvalidDataError(
            f"{origin}: needs {_bytes(nbytes)}, more than this machine's "
            f"{_bytes(memory)} of memory; pass fewer samples."
        )


def _bytes(count: int) -> str:
    """Human size, e.g. ``3.1 TB``."""
    if count < 1000:
        return f"{count} bytes"
    value = float(count)
    for unit in ("KB", "MB", "GB", "TB"):
        value /= 1000
        if value < 1000:
            return f"{value:.1f} {unit}"
    return f"{value / 1000:.1f} PB"


def write_npz(path: Path, arrays: dict[str, np.ndarray], *, overwrite: bool = False) -> Path:
    """Write ``arrays`` as a compressed ``.npz`` atomically (what ``--data``/``--eval`` read).

    Raises:
        OutputExistsError: ``path`` exists without ``overwrite``.
        OutputLocationError: The folder does not accept the file.
    """
    import io

    from tfcompress._files import write_bytes_atomic

    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return write_bytes_atomic(path, buffer.getvalue(), overwrite=overwrite)
