"""The one wire format between tfcompress and its children: framed pickles on two pipes.

A request is ``pickle((target, args, kwargs))``: ``target`` is ``"module:qualname"``,
imported in the child. An answer is one pickled tuple:

    ("ok", result)
    ("error", error)                  a TFCompressError, raised in the parent as it was
    ("error_text", text, exit_code)   one that would not pickle: the same words and code
    ("memory", text)                  a MemoryError: the child's memory limit
    ("bug", text, error_or_None)      any other exception (its type and words, and itself
                                      when it survives pickling)
    ("transfer", text)                the request could not be unpickled there

Each message is an 8-byte big-endian length, then that many bytes. The parent's ends are
non-blocking and every read and write it makes has a deadline, so a child that stops
reading (a hang while it imports) cannot block its parent past the call's time limit; the
child's ends block. Both sides are one program, so pickles never cross a trust boundary.

Example:
    >>> decode_request(encode_request("os:getpid", (), {}))
    ('os:getpid', (), {})
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import time
from collections.abc import Callable
from typing import Any

__all__ = ["decode_request", "encode_request", "read_message", "write_message"]

_HEADER = struct.Struct("!Q")
_CHUNK = 1 << 20
_SMALL = 1 << 16  # copied behind its header: cheaper than a second wake-up of the reader
# The parent wakes this often while it waits: a signal the kernel gave another thread (a
# progress bar's monitor) is handled by the main thread within this, not at the deadline.
_WAKE = 0.2


class TransferError(Exception):
    """A request that cannot be pickled here (an argument holding a lambda, a socket...)."""


def encode_request(target: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
    """The request's bytes.

    Raises:
        TransferError: An argument cannot be pickled.
    """
    try:
        return pickle.dumps((target, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, AttributeError, TypeError) as error:
        raise TransferError(" ".join(str(error).split())[:200]) from error


def decode_request(data: bytes) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """``(target, args, kwargs)`` from a request's bytes (the parent's own pickle)."""
    target, args, kwargs = pickle.loads(data)
    return target, args, kwargs


# --- the parent's side: non-blocking, with a deadline --------------------------------------


def write_message(fd: int, data: bytes, deadline: float) -> bool:
    """Write one framed message on a non-blocking ``fd``; False at the deadline.

    Raises:
        BrokenPipeError: The child closed its end (it died).
    """
    for part in _parts(data):
        while part:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            _, writable, _ = select.select([], [fd], [], min(left, _WAKE))
            if not writable:
                continue
            try:
                part = part[os.write(fd, part[:_CHUNK]) :]
            except BlockingIOError:
                continue
    return True


def read_message(
    fd: int, deadline: float, *, waiting: Callable[[], None] | None = None
) -> bytes | None:
    """Read one framed message from a non-blocking ``fd``; None at the deadline.

    Args:
        fd: The parent's read end.
        deadline: ``time.monotonic()`` past which the read gives up.
        waiting: Called about every ``_WAKE`` seconds while nothing arrives (echoing the
            child's stderr).

    Raises:
        EOFError: The child closed its end before a whole message (it died).
    """
    header = _read_exactly(fd, _HEADER.size, deadline, waiting)
    if header is None:
        return None
    return _read_exactly(fd, _HEADER.unpack(header)[0], deadline, waiting)


def _read_exactly(
    fd: int, size: int, deadline: float, waiting: Callable[[], None] | None
) -> bytes | None:
    buffer = bytearray()
    while len(buffer) < size:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        readable, _, _ = select.select([fd], [], [], min(left, _WAKE))
        if waiting is not None:
            waiting()
        if not readable:
            continue
        try:
            chunk = os.read(fd, min(size - len(buffer), _CHUNK))
        except BlockingIOError:
            continue
        if not chunk:
            raise EOFError("the child closed its end")
        buffer += chunk
    return bytes(buffer)


# --- the child's side: blocking --------------------------------------------------------------


def receive(fd: int, idle: float | None) -> bytes | None:
    """The next request on a blocking ``fd``; None when the parent closed it, or after ``idle``."""
    if idle is not None:
        ready, _, _ = select.select([fd], [], [], idle)
        if not ready:
            return None
    header = _read_blocking(fd, _HEADER.size)
    return None if header is None else _read_blocking(fd, _HEADER.unpack(header)[0])


def _read_blocking(fd: int, size: int) -> bytes | None:
    buffer = bytearray()
    while len(buffer) < size:
        chunk = os.read(fd, min(size - len(buffer), _CHUNK))
        if not chunk:
            return None
        buffer += chunk
    return bytes(buffer)


def send(fd: int, data: bytes) -> None:
    """Write one framed message on a blocking ``fd`` (the answer)."""
    for part in _parts(data):
        while part:
            part = part[os.write(fd, part[:_CHUNK]) :]


def _parts(data: bytes) -> tuple[memoryview, ...]:
    """The header and the data; one write for a small message (one wake-up of the reader)."""
    header = _HEADER.pack(len(data))
    if len(data) <= _SMALL:
        return (memoryview(header + data),)
    return memoryview(header), memoryview(data)
