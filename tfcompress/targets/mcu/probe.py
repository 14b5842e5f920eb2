"""Every TFLM call, made in a child process: a crash or a hang comes back as data.

TFLM's host interpreter is native code that a model's bytes drive, and it is known to
segfault (an arena of a few hundred bytes for a model that needs thirty thousand). Each call
goes through :func:`tfcompress._child.call` (time and memory limits, a fresh child after a
crash) and comes back as an :class:`Outcome`: the function's answer, what TFLM printed on
its standard error (kept in a file the crash cannot take with it), and the crash or time-out
when there was one, as a :class:`Failure` with its signal. Callers turn failures into
findings; none reaches the user as an exception.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfcompress._child import call, signal_name
from tfcompress._limits import CHILD_TIMEOUT
from tfcompress.errors import ChildTimeoutError, NativeCrashError

__all__ = ["Failure", "Outcome", "in_child"]

_LOG_TAIL = 16 * 1024
_CHILD = "tfcompress.targets.mcu._tflm"


@dataclass(frozen=True)
class Failure:
    """A TFLM call that did not answer: it crashed (a signal) or ran past its time limit.

    Attributes:
        kind: ``"crash"`` or ``"timeout"``.
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
    timeout: float | None = None,
    progress: bool = False,
    **kwargs: Any,
) -> Outcome:
    """Call ``tfcompress.targets.mcu._tflm:function`` in the child; never raise for a crash.

    Args:
        function: A function of :mod:`._tflm` that takes ``log=`` (and ``progress=``).
        *args: Its positional arguments.
        what: What the call does, for messages.
        timeout: Seconds it may take (default: the one time limit, ``TFCOMPRESS_TIMEOUT``,
            which ``--timeout`` sets).
        progress: Give the function a progress file too, and return what it wrote.
        **kwargs: Its other keyword arguments.

    Returns:
        The outcome: the answer or the failure, with TFLM's log either way.

    Raises:
        TFCompressError: What the function raised on purpose there (``tflite-micro``
            missing: :class:`~tfcompress.errors.MissingDependencyError`).
    """
    with tempfile.TemporaryDirectory(prefix="tfcompress-tflm-") as folder:
        log = Path(folder) / "tflm.log"
        steps = Path(folder) / "progress.txt"
        if progress:
            kwargs["progress"] = str(steps)
        failure: Failure | None = None
        value = None
        limit = CHILD_TIMEOUT.seconds() if timeout is None else CHILD_TIMEOUT.check(timeout)
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
        text = _tail(log)
        if failure is not None and _last_line(text):
            failure = Failure(
                failure.kind, failure.signal, f"{failure.message}; TFLM's last words: "
                f"{_last_line(text)}"
            )  # fmt: skip
        return Outcome(value, text, _tail(steps), failure)


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
