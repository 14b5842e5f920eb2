"""Measurement worker: one runner in its own process, driven by :mod:`.isolation`.

Started by :class:`tfcompress.bench.isolation.IsolatedRunner` as
``python -P -c BOOTSTRAP SYS_PATH PARENT FD_IN FD_OUT`` (or forked by :mod:`.zygote`): it
dies with ``PARENT`` (:mod:`tfcompress._lifetime`), reads requests from one pipe and
answers on the other (:class:`multiprocessing.connection.Connection` framing, pickles
between two processes of the same program). Requests::

    ("open", model, runner_class, options, batch_dims) -> (signature, layout, created_ms,
                                                         rss_mb)
    ("run", feed, batch_size)                            -> outputs (batch first)
    ("predict_batch", feed)                              -> outputs (model layout)
    ("time", feed, timing)                               -> (Timing, details, rss_mb, peak_mb)
    ("details",)                                         -> details

Each answer is ``("ok", value)``, ``("error", exception)``, or ``("transfer", reason)`` when
the request cannot be unpickled here (a runner class defined in the parent's ``__main__``).
A native crash kills only this process: the parent reads the signal from the exit status
and the last lines of stderr.
Native code that prints to stdout cannot corrupt the protocol: the pipes are their own
file descriptors and stdout goes to stderr.

Example:
    >>> # started only by IsolatedRunner  # doctest: +SKIP
"""

from __future__ import annotations

import os
import pickle
import time
from multiprocessing.connection import Connection
from typing import Any


class _State:
    """The one runner this worker holds."""

    runner: Any = None


def _open(
    state: _State,
    model: Any,
    runner_class: type,
    options: dict[str, Any],
    batch_dims: dict[str, int] | None,
) -> tuple[Any, Any, float, float | None]:
    from tfcompress.bench.memory import current_rss_mb

    # The parent resolved the backend name and checked the options: the class itself came
    # through the pipe (unpickling imported its module, a plugin's backend included).
    before = current_rss_mb()
    start = time.perf_counter()
    state.runner = runner_class(model, **options)
    created_ms = (time.perf_counter() - start) * 1000.0
    if batch_dims:
        state.runner.declare_batch_dims(batch_dims)
    return state.runner.signature, state.runner.layout, created_ms, before


def _run(state: _State, feed: dict[str, Any], batch_size: int | None) -> dict[str, Any]:
    return state.runner.run(feed, batch_size=batch_size)


def _predict_batch(state: _State, feed: dict[str, Any]) -> dict[str, Any]:
    return state.runner.predict_batch(feed)


def _time(
    state: _State, feed: dict[str, Any], timing: dict[str, float]
) -> tuple[Any, dict[str, object], float | None, float | None]:
    from tfcompress.bench.memory import current_rss_mb, peak_rss_mb
    from tfcompress.bench.stats import measure

    call = state.runner.bind(feed)
    measured = measure(call, **timing)
    return measured, state.runner.details(), current_rss_mb(), peak_rss_mb()


def _details(state: _State) -> dict[str, object]:
    return state.runner.details()


_HANDLERS = {
    "open": _open,
    "run": _run,
    "predict_batch": _predict_batch,
    "time": _time,
    "details": _details,
}


def _portable(error: BaseException) -> BaseException:
    """The error itself when it survives pickling, else a RuntimeError with its words."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:  # any unpicklable runtime error is sent as words
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error


def main(argv: list[str]) -> int:
    """Serve requests until the parent closes the pipe; return the exit status.

    ``argv`` ends with ``PARENT FD_IN FD_OUT``: the pid of the process that started this
    worker (0: do not die with it), then the two pipes.
    """
    from tfcompress._lifetime import die_with_parent, limit_memory, no_core_files
    from tfcompress._limits import CHILD_MEMORY

    no_core_files()  # no core file of an untrusted model in the user's folder
    limit_memory(CHILD_MEMORY.value())  # checked by the parent: an allocation the data sizes
    parent = int(argv[-3]) if len(argv) > 3 else 0
    if parent:  # measuring for nobody is pointless: go when the caller goes
        die_with_parent(parent)
    fd_in, fd_out = int(argv[-2]), int(argv[-1])
    os.dup2(2, 1)  # native code that prints to stdout writes to stderr instead
    requests, answers = Connection(fd_in, writable=False), Connection(fd_out, readable=False)
    state = _State()
    while True:
        try:
            request = requests.recv_bytes()
        except EOFError:
            return 0
        try:
            op, *args = pickle.loads(request)
        except Exception as error:  # a class only the parent's __main__ defines, say
            answers.send(("transfer", f"{type(error).__name__}: {error}"))
            continue
        try:
            answer: tuple[str, Any] = ("ok", _HANDLERS[op](state, *args))
        except Exception as error:  # every failure goes back to the parent
            answer = ("error", _portable(error))
        answers.send(answer)
