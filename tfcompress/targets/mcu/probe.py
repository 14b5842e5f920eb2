"""Every TFLM call, made in a child process: a crash, a hang or a refusal comes back as data.

Each call goes through :func:`tfcompress._child.call` and comes back as an :class:`Outcome`:
the answer, what TFLM printed on its standard error (kept in a file a crash cannot take with
it), and a :class:`Failure` (crash with its signal, time-out, the memory limit, an exception
the runtime raised there) that callers turn into findings. A :class:`Budget` made once and
passed as every call's ``timeout`` holds the whole check to one time limit; a call made after
it ran out is a time-out without a child.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tfcompress._child import call, last_words, signal_name
from tfcompress._limits import CHILD_TIMEOUT
from tfcompress.errors import ChildTimeoutError, NativeCrashError, ResourceLimitError

_LOG_TAIL = 16 * 1024
_CHILD = "tfcompress.targets.mcu._tflm"


@dataclass(frozen=True)
class Failure:
    """A call that did not answer: it crashed (a signal), ran past its time, or raised.

    Attributes:
        kind: ``"crash"``, ``"timeout"``, ``"error"`` (the runtime raised: LiteRT refused an
            op, TFLM's ``invoke`` failed) or ``"memory"`` (past the memory limit).
        signal: The signal's number for a crash (11 for SIGSEGV), else None.
        message: One line: what was running, how it ended, TFLM's last words.
    """

    kind: str
    signal: int | None
    message: str

    @property
    def signal_name(self) -> str | None:
        """``SIGSEGV`` for signal 11; None for a time-out."""
        return None if self.signal is None else signal_name(self.signal)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {**asdict(self), "signal_name": self.signal_name}


class Budget:
    """What is left of one time limit shared by every call of a check.

    Example:
        >>> Budget(60.0).left() <= 60.0
        True
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left (0 once it ran out)."""
        return max(0.0, self._end - time.monotonic())


@dataclass(frozen=True)
class Outcome:
    """What one TFLM call came back with.

    Attributes:
        log: What TFLM printed on its standard error during the call (the tail).
        progress: What the function wrote in its progress file (the bisection's brackets).
        failure: The crash or time-out, None when it answered.
    """

    value: Any
    log: str
    progress: str = ""
    failure: Failure | None = None


def in_child(
    function: str,
    *args: Any,
    what: str,
    timeout: float | Budget | None = None,
    progress: bool = False,
    **kwargs: Any,
) -> Outcome:
    """Call ``tfcompress.targets.mcu._tflm:function`` in the child; never raise for a crash.

    ``function`` takes ``log=`` (and ``progress=``: a progress file whose text comes back);
    ``what`` says what the call does, for messages; ``timeout`` is seconds, or the
    :class:`Budget` of the whole check (default: the one time limit, ``TFCOMPRESS_TIMEOUT``).

    Raises:
        TFCompressError: What the function raised on purpose there (``tflite-micro``
            missing: :class:`~tfcompress.errors.MissingDependencyError`).
    """
    if isinstance(timeout, Budget):
        limit = timeout.left()
        if limit <= 0:
            said = f"{what} was not started: the check's time limit ({timeout.seconds:g} s) ran out"
            return Outcome(None, "", "", Failure("timeout", None, said))
    else:
        limit = CHILD_TIMEOUT.given(timeout)
    with tempfile.TemporaryDirectory(prefix="tfcompress-tflm-") as folder:
        log = Path(folder) / "tflm.log"
        steps = Path(folder) / "progress.txt"
        if progress:
            kwargs["progress"] = str(steps)
        failure: Failure | None = None
        value = None
        try:
            value = call(f"{_CHILD}:{function}", *args, what=what, timeout=limit, log=str(log),
                         **kwargs)  # fmt: skip
        except NativeCrashError as crash:
            number = getattr(crash, "signal_number", None)
            shown = signal_name(number) if number is not None else "a signal"
            failure = Failure(
                "crash", number, f"{what} crashed TFLM ({shown}) in its child process"
            )
        except ChildTimeoutError:
            failure = Failure("timeout", None, f"{what} ran past {limit:g} s and was stopped")
        except ResourceLimitError as error:
            failure = Failure("memory", None, _words(str(error)))
        except RuntimeError as error:  # what the runtime raised there, in its own words
            said = str(error).split(" in its child process: ", 1)[-1]
            failure = Failure("error", None, f"{what} failed: {_words(said)}")
        text = _tail(log)
        last = last_words(text.encode())
        if failure is not None and last:
            said = f"{failure.message}; TFLM's last words: {last}"
            failure = Failure(failure.kind, failure.signal, said)
        return Outcome(value, text, _tail(steps), failure)


def _words(text: str, limit: int = 400) -> str:
    """One line of at most ``limit`` characters (a runtime's message can span lines)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else f"{line[: limit - 30]}... ({len(line):,} characters)"


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - _LOG_TAIL))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
