"""Every TFLM call, made in a child process: a crash, a hang or a refusal comes back as data.

TFLM's host interpreter is native code that a model's bytes drive, and it is known to
segfault (an arena of a few hundred bytes for a model that needs thirty thousand). Each call
goes through :func:`tfcompress._child.call` (time and memory limits, a fresh child after a
crash) and comes back as an :class:`Outcome`: the function's answer, what TFLM printed on
its standard error (kept in a file the crash cannot take with it), and the crash or time-out
when there was one, as a :class:`Failure` with its signal; an exception the runtime raised
there (LiteRT refusing an op, TFLM's ``invoke`` failing, a file its Python side cannot read)
or the memory limit is a :class:`Failure` too. Callers turn failures into findings; none
reaches the user as an exception.

The whole check runs under one time limit: a :class:`Budget` made once and passed as the
``timeout`` of every call gives each call what is left of it, and a call made after it ran
out is a time-out without a child.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfcompress._child import call, signal_name
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
        return {
            "kind": self.kind,
            "signal": self.signal,
            "signal_name": self.signal_name,
            "message": self.message,
        }


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
        value: The function's answer; None when it failed.
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

    Args:
        function: A function of :mod:`._tflm` that takes ``log=`` (and ``progress=``).
        *args: Its positional arguments.
        what: What the call does, for messages.
        timeout: Seconds it may take, or the :class:`Budget` of the whole check (default:
            the one time limit, ``TFCOMPRESS_TIMEOUT``, which ``--timeout`` sets).
        progress: Give the function a progress file too, and return what it wrote.
        **kwargs: Its other keyword arguments.

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
        if failure is not None and _last_line(text):
            failure = Failure(
                failure.kind, failure.signal, f"{failure.message}; TFLM's last words: "
                f"{_last_line(text)}"
            )  # fmt: skip
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


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""
