"""How the CLI stops on SIGINT, SIGTERM and SIGHUP: clean-up runs, then one line and 128+N.

A signal whose default action kills the process at once would leave what a run holds
behind: measurement workers and the fine-tuning child keep running for nobody, private model
copies stay in ``$TMPDIR``. So the CLI (and only the CLI: library code never installs signal
handlers) turns each of these signals into an exception raised where the main thread stands.
It unwinds like any other, so every ``finally`` and ``with`` on the way runs (children are
killed and reaped, temporary folders removed, a half-written report taken back), and the
entry point ends the run with one line on stderr and exit code 130 (SIGINT), 143 (SIGTERM)
or 129 (SIGHUP), as a shell reports a process killed by that signal.

SIGINT keeps Python's own :class:`KeyboardInterrupt` (``compress`` reads a Ctrl-C as "stop
the search, keep the best artifact so far", and a second Ctrl-C stops that too). SIGTERM and
SIGHUP raise :class:`Terminated`, which is not a ``KeyboardInterrupt``: nothing reads it as a
request to finish early. Once it is raised, later signals are ignored so that the clean-up
it started runs to its end (each step of it is bounded; SIGKILL still works). A signal the
process was started with ignored (``nohup`` ignores SIGHUP) stays ignored.

Python runs a signal handler between two bytecodes of the main thread, wherever it is, and
drops an exception raised where nothing can receive it (a ``__del__`` the garbage collector
calls during an import, a weakref callback): it reports it to ``sys.unraisablehook``. The
interruption is then re-sent to the main thread a moment later, so it lands where it unwinds
the run instead of leaving the run going with every later signal ignored; the re-sending is
called off when the run ends (:func:`settle`), so it never reaches what runs after it.

Example:
    >>> install()  # doctest: +SKIP
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType
from typing import Any

EXIT_SIGINT = 130
#: The signals the CLI handles, by name (SIGHUP does not exist on Windows).
SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: the run unwinds (clean-up included) and exits 128+N.

    A :class:`BaseException`, so ``except Exception`` blocks let it pass, and not a
    :class:`KeyboardInterrupt`, so no code reads it as a Ctrl-C.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_quiet = False  # True once a Terminated was raised, or the run is over: ignore the rest
_over = False  # the run has ended (settle): nothing is sent again
#: The signals the handler turned into exceptions during this run, in order.
_received: list[int] = []
#: The interruption to send again (:func:`_unraisable`), until it is sent or the run ends.
_resend: threading.Timer | None = None
_resend_lock = threading.RLock()  # the hook may run in any thread, or inside settle()


def _handler(signum: int, frame: FrameType | None) -> None:
    global _quiet
    del frame
    if _quiet:
        return  # the clean-up of the first signal, or the exit, is under way: let it end
    _received.append(signum)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    _quiet = True
    raise Terminated(signum)


def install() -> None:
    """Install the handlers: SIGINT, SIGTERM and SIGHUP raise where the main thread stands.

    Only the CLI's entry points call this, first thing; signals ignored at start stay ignored.
    """
    global _quiet, _over
    _quiet = _over = False
    _received.clear()
    for name in SIGNALS:
        number = getattr(signal, name, None)
        if number is not None and signal.getsignal(number) is not signal.SIG_IGN:
            signal.signal(number, _handler)
    if sys.unraisablehook is not _unraisable:
        _previous_hook[0] = sys.unraisablehook
        sys.unraisablehook = _unraisable


_previous_hook: list[Any] = [sys.__unraisablehook__]
#: How long after a dropped interruption it is sent again (the code that dropped it returns).
_RESEND_S = 0.05


def _unraisable(unraisable: Any) -> None:
    """An interruption Python dropped (raised in a ``__del__``...): send it again, silently."""
    global _quiet, _resend
    error = unraisable.exc_value
    if not isinstance(error, Terminated | KeyboardInterrupt):
        _previous_hook[0](unraisable)
        return
    number = error.signum if isinstance(error, Terminated) else signal.SIGINT
    with _resend_lock:
        if _over or _resend is not None:
            return  # the run is over, or this interruption is on its way already
        _quiet = False  # it did not unwind anything: the next one must raise
        _resend = threading.Timer(_RESEND_S, _send_again, (number,))
        _resend.daemon = True
        _resend.start()


def _send_again(number: int) -> None:
    """The timer's: the dropped interruption to the main thread, unless the run ended."""
    global _resend
    with _resend_lock:
        if _over or _resend is not threading.current_thread():
            return
        _resend = None
        signal.pthread_kill(threading.main_thread().ident or 0, number)


def settle() -> None:
    """The run is over: a signal from now on is ignored, so the exit's clean-up runs whole.

    An interruption waiting to be sent again is called off. Handlers stay installed (a
    Python function, never ``SIG_IGN``, which children would inherit).
    """
    global _quiet, _over, _resend
    with _resend_lock:
        _quiet = _over = True
        if _resend is not None:
            _resend.cancel()
            _resend = None


def cause(error: BaseException) -> BaseException | None:
    """The interruption ``error`` is, or was raised from; None if it is not one.

    Code on the way may wrap it: Python reports an exception raised while a class is being
    created (``__set_name__``) as a ``RuntimeError`` caused by it; a library may replace it
    without a cause at all, so an error after a signal the handler received is that signal.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt | Terminated):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    # Some library code replaces what it caught without chaining it (LiteRT's lazy import
    # turns an exception during its import into "Could not import ..."): a signal received
    # during the run is what ended it.
    if _received:
        number = _received[-1]
        return KeyboardInterrupt() if number == signal.SIGINT else Terminated(number)
    return None


def exit_code(interruption: BaseException) -> int:
    """130 for a Ctrl-C, 128+N for :class:`Terminated` by signal N."""
    return 128 + interruption.signum if isinstance(interruption, Terminated) else EXIT_SIGINT


def message(interruption: BaseException) -> str:
    """The one line the CLI prints for an interruption."""
    number = interruption.signum if isinstance(interruption, Terminated) else signal.SIGINT
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    return f"tfcompress: interrupted ({name}); nothing partial was left behind"
