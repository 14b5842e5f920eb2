"""Stated limits on what an untrusted file may make tfcompress allocate, and how to raise them.

A small file can declare a huge result: a PNG of 20000x20000 pixels decodes to 1.6 GB, a
1.5 MB ``.npz`` of zeros inflates to gigabytes. Such sizes are read from the headers and
compared with these limits *before* anything is decoded; a refusal names the limit and the
environment variable that raises it, for the rare genuine file that needs more.

Example:
    >>> MAX_IMAGE_PIXELS.value() >= 100_000_000
    True
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from tfcompress.errors import InvalidInputError


@dataclass(frozen=True)
class Limit:
    """A limit with a default, read from an environment variable when it is set.

    Attributes:
        env: The variable that overrides the default (a positive integer).
        default: The limit when the variable is unset.
        unit: What is counted, for messages (``"pixels"``, ``"bytes"``).

    Example:
        >>> Limit("TFCOMPRESS_EXAMPLE_LIMIT", 10, "pixels").value()
        10
    """

    env: str
    default: int
    unit: str

    def value(self) -> int:
        """The limit in force.

        Raises:
            InvalidInputError: The variable is set to something that is not a positive
                integer.
        """
        text = os.environ.get(self.env, "").strip()
        if not text:
            return self.default
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise InvalidInputError(
                f"{self.env} must be a positive whole number of {self.unit}, got {text!r}."
            )
        return value

    def hint(self) -> str:
        """How to raise the limit, for the end of a message."""
        return f"for a file you trust, raise the limit with {self.env}=<{self.unit}>"


MAX_IMAGE_PIXELS = Limit("TFCOMPRESS_MAX_IMAGE_PIXELS", 100_000_000, "pixels")
"""Pixels one image may declare (width x height x animation frames): 100 million, four
times a 50-megapixel photo, whose decoded float32 RGBA would take 1.6 GB."""

MAX_INFLATED_BYTES = Limit("TFCOMPRESS_MAX_INFLATED_BYTES", 2**30, "bytes")
"""Bytes the compressed arrays of one ``.npz`` may inflate to: 1 GiB. Arrays stored
uncompressed (``np.savez``) are bounded by the file's own size and are not counted."""


#: The most seconds a time limit may name: a week (``select`` and the OS wait that long).
MAX_TIMEOUT_S = 7 * 24 * 3600.0


@dataclass(frozen=True)
class TimeLimit:
    """A time limit in seconds, read from an environment variable when it is set.

    Example:
        >>> TimeLimit("TFCOMPRESS_EXAMPLE_TIMEOUT", 60.0).seconds()
        60.0
    """

    env: str
    default: float

    def seconds(self) -> float:
        """The limit in force.

        Raises:
            InvalidInputError: The variable is not a finite number of seconds in
                (0, :data:`MAX_TIMEOUT_S`].
        """
        text = os.environ.get(self.env, "").strip()
        if not text:
            return self.default
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        return self.check(value, shown=f"{self.env}={text[:40]!r}")

    def given(self, value: object, *, name: str = "timeout") -> float:
        """``value`` when it is a valid limit, else (None) the limit in force.

        Args:
            value: Seconds a caller passed (a ``timeout`` keyword), or None.
            name: How messages name it.

        Raises:
            InvalidInputError: ``value`` is not a number of seconds in (0, a week].

        Example:
            >>> TimeLimit("TFCOMPRESS_EXAMPLE_TIMEOUT", 60.0).given(None)
            60.0
        """
        if value is None:
            return self.seconds()
        try:
            seconds = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            seconds = math.nan
        return self.check(seconds, shown=f"{name} {repr(value)[:40]}")

    def check(self, value: float, *, shown: str | None = None) -> float:
        """``value`` if it is a valid limit.

        Raises:
            InvalidInputError: It is not finite, not positive or above a week.
        """
        if not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT_S):
            raise InvalidInputError(
                f"{shown or f'a time limit of {value!r}'} is not a time limit: give a finite "
                f"number of seconds above 0 and at most {MAX_TIMEOUT_S:g} (a week)."
            )
        return value


CHILD_TIMEOUT = TimeLimit("TFCOMPRESS_TIMEOUT", 6 * 3600.0)
"""The one time limit: seconds one call in a child process may take (:mod:`tfcompress._child`:
a conversion, a calibration, a layer-error report, a fine-tune, a load probe, a measurement,
the Edge TPU compiler): six hours by default, room for a CPU fine-tune of an edge model,
while a hung run still ends the same day. ``--timeout`` sets it for one run, a ``timeout``
keyword for one call. Past it the child is killed and the call is one error line."""


MAX_MEMORY_BYTES = 2**60
"""The largest memory limit a variable may set (1 EiB): more than any machine has, and an
rlimit the OS takes."""


@dataclass(frozen=True)
class MemoryLimit:
    """Bytes a child process may allocate; the default is a share of the machine's memory.

    The share is the ceiling a child starts with; each call then gets :func:`call_memory`
    of it, unless the variable is set (:meth:`is_set`: the user's number holds for every
    call).

    Example:
        >>> MemoryLimit("TFCOMPRESS_EXAMPLE_MEMORY", 0.5).value() > 0
        True
    """

    env: str
    share: float

    def is_set(self) -> bool:
        """Whether the variable names a limit (then no call gets less than it)."""
        return bool(os.environ.get(self.env, "").strip())

    def value(self) -> int:
        """The limit in force (at least 1 GiB).

        Raises:
            InvalidInputError: The variable is set to something that is not a whole number
                of bytes from 1 GiB to 1 EiB (``8589934592``, or with a unit: ``8GB``, ``8GiB``).
        """
        text = os.environ.get(self.env, "").strip()
        if not text:
            return max(2**30, int(physical_memory() * self.share))
        value = _bytes(text)
        # Above 2**63 the rlimit call overflows in the child (1e308 was an internal error).
        if value is None or value < 2**30 or value > MAX_MEMORY_BYTES:
            raise InvalidInputError(
                f"{self.env} must be a number of bytes of at least 1 GiB and at most 1 EiB "
                f"(8589934592, 8GB or 8GiB), got {text[:40]!r}."
            )
        return value


_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
_UNITS |= {"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def _bytes(text: str) -> int | None:
    number = text.rstrip("KMGTiBb").strip()
    unit = text[len(number) :].strip().upper()
    if unit not in _UNITS or not number or len(number) > 20:
        return None
    try:
        value = float(number)
    except ValueError:
        return None
    return int(value * _UNITS[unit]) if math.isfinite(value) and value > 0 else None


def physical_memory() -> int:
    """The machine's memory in bytes (8 GiB where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: a guess, stated above
        return 8 * 2**30


CHILD_MEMORY = MemoryLimit("TFCOMPRESS_MEMORY_LIMIT", 0.5)
"""The one memory limit: bytes one child process may allocate (``RLIMIT_DATA`` on Linux: its
heap and private mappings; every child of :mod:`tfcompress._child`, and the program the Edge
TPU compiler's worker runs). Set, it holds for every call. Unset, a child starts with half
the machine's memory as its ceiling and each call gets :func:`call_memory` of it: what the
child holds already, plus :data:`CALL_HEADROOM`, plus :data:`CALL_FACTOR` times the bytes the
job brings (what the call hands the child, or the model file, whichever is larger), so an
allocation a model's data decides (a FILL sized by an input value) ends as one error line
within seconds, at about 2 GiB over the runtime's own, instead of at half the machine.
Fine-tuning, whose memory grows with the batch and the model rather than with any file,
gets the ceiling (a MobileNetV2 step at 224x224, batch 32, holds 5.3 GB)."""

#: What a call may allocate over what its child holds already (the runtime's imports, its
#: warm state), when ``TFCOMPRESS_MEMORY_LIMIT`` is unset: 2 GiB, twice what converting and
#: calibrating MobileNetV2 (224x224, 32 samples) took above TensorFlow's import (0.45 GB).
CALL_HEADROOM = 2 * 2**30
#: And per byte the job brings (a model, its data): 16, room for a model's tensors and the
#: runtime's copies of its data.
CALL_FACTOR = 16

_JOB = {"bytes": 0}


def note_job_bytes(size: int) -> None:
    """Record a model file this process read: calls get headroom for the largest."""
    _JOB["bytes"] = max(_JOB["bytes"], int(size))


def job_bytes(handed: int) -> int:
    """What a call brings: its request's bytes, or the largest model file read, if larger."""
    return max(int(handed), _JOB["bytes"])


def call_memory(ceiling: int, held: int | None, brought: int) -> int:
    """The memory limit of one call: held, plus headroom scaled to the job, at most the ceiling.

    Args:
        ceiling: The child's own limit (half the machine by default).
        held: Bytes the child holds before the call (``VmData``); None: unknown, the ceiling.
        brought: Bytes the job brings (:func:`job_bytes`).

    Example:
        >>> call_memory(12 * 2**30, 2**29, 2048) == 2**29 + 2 * 2**30 + 16 * 2048
        True
        >>> call_memory(4 * 2**30, 2**29, 10**9) == 4 * 2**30  # never above the ceiling
        True
    """
    if held is None:
        return ceiling
    return min(ceiling, held + CALL_HEADROOM + CALL_FACTOR * brought)


def command_ceiling(budget: int, held: int | None, used: int | None) -> int:
    """A child's memory limit under the command's one budget, shared with the caller.

    The memory limit bounds the whole command: the caller and every child it runs together
    (``used``: their resident bytes now, this child's included) stay within ``budget``; a
    child may grow by what is left, on top of what it holds.

    Args:
        budget: ``TFCOMPRESS_MEMORY_LIMIT``, or half the machine.
        held: Bytes the child holds (``VmData``, what its limit counts); None: unknown.
        used: Resident bytes of the caller and all its children; None: unknown.

    Example:
        >>> command_ceiling(12 * 2**30, 2**30, 11 * 2**30) == 2 * 2**30  # 1 GiB left
        True
        >>> command_ceiling(12 * 2**30, None, None) == 12 * 2**30  # unknown: the budget
        True
    """
    if held is None or used is None:
        return budget
    return min(budget, held + max(0, budget - used))


def out_of_memory() -> str:
    """The one line for a command whose own process ran out of memory (a ``MemoryError``)."""
    try:
        limit = f"its memory limit of {CHILD_MEMORY.value() / 2**30:.3g} GiB"
    except InvalidInputError:
        limit = "its memory limit"
    return (
        f"this command ran out of {limit} (the caller and its child processes together); "
        "set TFCOMPRESS_MEMORY_LIMIT=BYTES to allow more, or use a smaller model or batch."
    )
