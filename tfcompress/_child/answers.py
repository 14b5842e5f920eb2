"""What a child's reply means to its caller: a result, or one typed error.

Every flavour of child ends a call the same way (:class:`~.process.Reply`):

* an answer: the function's result, or what it raised (a
  :class:`~tfcompress.errors.TFCompressError` as it was; a ``MemoryError`` as a
  :class:`~tfcompress.errors.ResourceLimitError` naming the limit);
* a death: one :class:`~tfcompress.errors.NativeCrashError` naming the signal (or the
  exit status) and the child's last words;
* the time limit: one :class:`~tfcompress.errors.ChildTimeoutError` naming the limit and
  how to raise it.

Example:
    >>> result(Reply(answer=("ok", 3)), what="adding")
    3
"""

from __future__ import annotations

import signal
from typing import Any

from tfcompress._child.process import Reply
from tfcompress._lifetime import last_words, signal_name
from tfcompress.errors import (
    ChildTimeoutError,
    NativeCrashError,
    ResourceLimitError,
    TFCompressError,
)

__all__ = ["ChildTransferError", "crash_error", "result", "retold", "timeout_error"]

#: How to raise the one time limit, at the end of every message about it.
RAISE_TIME = "raise it with --timeout or TFCOMPRESS_TIMEOUT=SECONDS"
#: How to raise the one memory limit.
RAISE_MEMORY = "set TFCOMPRESS_MEMORY_LIMIT=BYTES to allow more"


class ChildTransferError(TFCompressError):
    """A call's arguments could not be handed to the child, or not be read there.

    A runner class defined in the caller's ``__main__``, or an argument holding a lambda.
    """


def result(
    reply: Reply,
    *,
    what: str,
    seconds: float = 0.0,
    memory: int = 0,
    keep_errors: bool = False,
) -> Any:
    """The call's result, or its one typed error.

    Args:
        reply: What became of the call.
        what: What the call did, for messages (``"converting 'mnist' to int8"``).
        seconds: Its time limit, for the message when it passed.
        memory: Its memory limit, for the messages about memory.
        keep_errors: A worker's call: raise another exception the function raised as it was
            (a runner's error is the runtime's own refusal, which its caller handles as
            in-process), and an exit without an answer as a ``NativeCrashError`` (the
            runtime's own exit). Else (``call``) both are a bug of the function, raised as a
            ``RuntimeError`` with its words.

    Raises:
        NativeCrashError: The child died by a signal (a worker: or exited unanswered).
        ChildTimeoutError: The time limit passed; the child was killed.
        ResourceLimitError: The function allocated past the memory limit.
        ChildTransferError: The child could not read the request.
        TFCompressError: What the function raised, as it was.
    """
    if reply.timed_out:
        raise timeout_error(what, seconds, reply.said)
    if reply.answer is None:
        if not keep_errors and (reply.code is None or reply.code >= 0):
            # A call's child that exits without answering, by no signal, left a function of
            # tfcompress's own half done (an exit() in it): a bug, as before.
            last = last_words(reply.said)
            words = f" (its last words: {last})" if last else ""
            raise RuntimeError(
                f"the child process {what} exited with status {reply.code} unanswered{words}"
            )
        raise crash_error(what, reply.code, reply.said, memory)
    status, value, *rest = reply.answer
    if status == "ok":
        return value
    if status == "error":
        raise value
    if status == "error_text":  # a typed error that would not pickle: same words, same code
        error = TFCompressError(value)
        error.exit_code = rest[0]
        raise error
    if status == "memory":
        raise ResourceLimitError(
            f"{what} needed more memory than the limit of {gib(memory)} ({value}); "
            f"{RAISE_MEMORY}, if the model really needs it."
        )
    if status == "transfer":
        raise ChildTransferError(f"the child process {what} could not read its request ({value})")
    original = rest[0] if rest else None
    if keep_errors and original is not None:
        raise original
    raise RuntimeError(f"{what} failed in its child process: {value}")


def crash_error(what: str, code: int | None, said: bytes, memory: int) -> NativeCrashError:
    """The error for a child that ended without an answer: a signal (``-N``) or a status."""
    number = -code if code is not None and code < 0 else 0
    if number == signal.SIGKILL:
        cause = "was killed (SIGKILL), usually by the out-of-memory killer"
        fix = "free memory, or use a smaller model or batch"
    elif number and _out_of_memory(said):
        cause = f"ran out of its memory limit of {gib(memory)} ({signal_name(number)})"
        fix = f"{RAISE_MEMORY}, if the model needs it"
    elif number:
        cause = f"crashed in native code ({signal_name(number)})"
        fix = (
            "the model or data drove the runtime into a state it cannot handle; check the "
            "weights and data are finite and in a sane range"
        )
    else:
        status = "an unknown status" if code is None else f"status {code}"
        cause = f"ended with {status} without answering"
        fix = "the runtime or tfcompress gave up on this model or data"
    return _told(what, cause, fix, number, code, said)


def retold(crash: NativeCrashError, what: str, *, cause: str, fix: str) -> NativeCrashError:
    """``crash`` with the cause and fix its caller knows (the stage it asked for), facts kept.

    Example:
        >>> str(retold(NativeCrashError("x"), "converting", cause="crashed", fix="try"))
        'converting crashed in its child process; try. Nothing was written.'
    """
    return _told(what, cause, fix, crash.signal_number, crash.exit_status, crash.said)


def _told(
    what: str, cause: str, fix: str, number: int, code: int | None, said: bytes
) -> NativeCrashError:
    last = last_words(said)
    words = f"; its last words: {last}" if last else ""
    crash = NativeCrashError(
        f"{what} {cause} in its child process{words}; {fix}. Nothing was written."
    )
    crash.signal_number, crash.exit_status, crash.said = number, code, said
    return crash


def timeout_error(what: str, seconds: float, said: bytes = b"") -> ChildTimeoutError:
    """The error for a call that ran past its time limit (the child was killed)."""
    error = ChildTimeoutError(
        f"{what} ran past its time limit of {seconds:g} s and was stopped; {RAISE_TIME}."
    )
    error.seconds, error.said = seconds, said
    return error


def _out_of_memory(said: bytes) -> bool:
    text = said.decode("utf-8", errors="replace").lower()
    return any(word in text for word in ("bad_alloc", "out of memory", "cannot allocate"))


def gib(size: int) -> str:
    """``'1 GiB'`` for 2**30 bytes.

    Example:
        >>> gib(3 * 2**29)
        '1.5 GiB'
    """
    return f"{size / 2**30:.3g} GiB"
