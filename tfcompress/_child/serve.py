"""The child's side of every flavour: one loop that answers calls until its parent lets go.

A child started as a fresh interpreter runs :data:`BOOTSTRAP`, which takes the parent's
import path and calls :func:`main`; one forked by the zygote calls :func:`serve` directly.
Either way the child has no core file, dies with its parent, allocates at most the memory
limit (:mod:`tfcompress._lifetime`), and answers each request (:mod:`.wire`) by calling
``module:qualname`` with its arguments. It exits when the parent closes its end of the
requests pipe; a ``call`` child also after :data:`IDLE_SECONDS` without a request.

Two roles:

* ``call`` (the warm and the one-shot child of :func:`tfcompress._child.call`): Keras'
  global state is reset after each answer, so the next call starts as in a fresh process;
* ``worker`` (:class:`tfcompress._child.Worker`): the state a call leaves (a runner
  holding a model) is kept for the next call.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import sys
import traceback
from typing import Any

from tfcompress._child import wire
from tfcompress._compat.heap import own_this_process, settled_import
from tfcompress.errors import TFCompressError

__all__ = ["BOOTSTRAP", "IDLE_SECONDS", "IN_PROCESS", "main", "resolve", "serve"]

#: A ``call`` child with nothing to do for this long exits (it holds TensorFlow's memory).
IDLE_SECONDS = 300.0
#: Seconds a child whose parent let go of it may still take to leave by itself.
HANG_UP_GRACE = 1.0
#: ``1``: calls run in the caller (for a debugger; then nothing is contained). Every child
#: sets it for itself: a call it makes runs there, contained already.
IN_PROCESS = "TFCOMPRESS_IN_PROCESS"
#: What a fresh interpreter runs: the parent's import path first, then :func:`main`.
BOOTSTRAP = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from tfcompress._child.serve import main; sys.exit(main(sys.argv[2:]))"
)
ROLES = ("call", "worker")
#: True in a child, once it serves.
SERVING = False


def main(argv: list[str]) -> int:
    """``PARENT MEMORY FD_IN FD_OUT ROLE [WARM_UP...]``: prepare this process, then serve.

    PARENT 0: do not ask to die with the parent (it was started from a passing thread).
    WARM_UP: ``module:function`` names called with no arguments first, or bare modules to
    import (the TensorFlow import a conversion needs, done while the parent works).
    """
    if len(argv) < 5 or argv[4] not in ROLES or not all(a.isdigit() for a in argv[:4]):
        print(
            "usage: BOOTSTRAP SYS_PATH PARENT MEMORY FD_IN FD_OUT call|worker [WARM_UP...]",
            file=sys.stderr,
        )
        return 2
    parent, memory, fd_in, fd_out = (int(a) for a in argv[:4])
    prepare(parent, memory)
    for name in argv[5:]:  # a failure here is the first call's to report
        with contextlib.suppress(Exception), settled_import():  # what it imports stays
            found = resolve(name if ":" in name else f"{name}:__name__")
            if callable(found):
                found()
    code = serve(fd_in, fd_out, role=argv[4])
    if argv[4] == "worker":  # nothing left to flush but stderr: skip the runtimes' teardown
        sys.stderr.flush()
        os._exit(code)
    return code


def prepare(parent: int, memory: int) -> None:
    """No core file, death with ``parent`` (0: none), at most ``memory`` bytes allocated."""
    from tfcompress._lifetime import die_with_parent, limit_memory, no_core_files

    own_this_process()  # the heavy imports it serves with are frozen (_compat/heap.py)
    no_core_files()  # a crash must not leave a core file of an untrusted model
    if parent:
        die_with_parent(parent)
    limit_memory(memory)


def serve(fd_in: int, fd_out: int, *, role: str) -> int:
    """Answer requests from ``fd_in`` on ``fd_out`` until the parent closes ``fd_in``.

    Returns:
        The exit status: 0.
    """
    global SERVING
    SERVING = True
    os.environ[IN_PROCESS] = "1"  # a call this one makes runs here: it is contained already
    watch_parent(fd_in)
    # Native code that prints to stdout writes to stderr: the answers have their own pipe,
    # and what the libraries print is the child's last words, never an answer.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    idle = IDLE_SECONDS if role == "call" else None
    while True:
        request = wire.receive(fd_in, idle)
        if request is None:  # closed, or idle: the parent starts a fresh child when needed
            return 0
        wire.send(fd_out, answer(request))
        if role == "call":
            _forget_models()  # after the answer: the caller goes on meanwhile


def watch_parent(fd_in: int) -> None:
    """Die when the parent holds the requests pipe no more, even in the middle of a call.

    Only the parent holds the pipe's write end: when it dies (SIGKILL, the OOM killer) the
    kernel closes it, and a thread here sees the hang-up while the main thread still works.
    This is what ends a child started off the parent's main thread, where the kernel's
    parent-death signal (keyed to the thread that started us) cannot be asked for.
    """
    import select
    import threading
    import time

    def watch() -> None:
        poller = select.poll()
        poller.register(fd_in, 0)  # only POLLHUP, POLLERR and POLLNVAL are reported
        ((_, mask), *_) = poller.poll()  # blocks until one of them
        if mask & select.POLLNVAL:  # closed here: nothing to watch
            return
        time.sleep(HANG_UP_GRACE)  # an idle child leaves by itself meanwhile, cleanly
        os._exit(1)

    threading.Thread(target=watch, name="tfcompress-parent-watch", daemon=True).start()


def answer(request: bytes) -> bytes:
    """The answer to one request, pickled (see :mod:`.wire`)."""
    try:
        target, args, kwargs = wire.decode_request(request)
    except Exception as error:  # a class only the parent's __main__ defines, say
        return pickle.dumps(("transfer", f"{type(error).__name__}: {_words(error)}"))
    reply: tuple[Any, ...]
    try:
        reply = ("ok", resolve(target)(*args, **kwargs))
    except TFCompressError as error:
        reply = ("error", error)
    except MemoryError as error:
        reply = ("memory", f"MemoryError: {error}"[:200])
    # Anything else is the function's own failure: its caller decides what it means.
    except Exception as error:
        print("".join(traceback.format_exception(error)), file=sys.stderr)
        reply = ("bug", f"{type(error).__name__}: {_words(error)}", _portable(error))
    try:
        return pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as failure:  # a result or an error holding something unpicklable
        if reply[0] == "error":
            return pickle.dumps(("error_text", str(reply[1]), reply[1].exit_code))
        what = "result" if reply[0] == "ok" else "error"
        text = f"its {what} cannot be handed back ({type(failure).__name__}: {_words(failure)})"
        return pickle.dumps(("bug", text, None))


def _words(error: BaseException) -> str:
    return " ".join(str(error).split())[:300]


def _portable(error: BaseException) -> BaseException | None:
    """The error itself when it survives pickling both ways, else None."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:  # any error that does not round-trip goes back as words only
        return None
    return error


def resolve(target: str) -> Any:
    """The object ``module:qualname`` names (importing the module).

    Example:
        >>> resolve("os.path:join")("a", "b")
        'a/b'
    """
    module, _, name = target.partition(":")
    if not module or not name:  # pragma: no cover - our own callers
        raise ValueError(f"not a module:function name: {target!r}")
    found: Any = importlib.import_module(module)
    for part in name.split("."):
        found = getattr(found, part)
    return found


def _forget_models() -> None:
    """Reset Keras' global state, so the next call starts as in a fresh process.

    Layer-name counters and graphs of the last model would otherwise change the names (and
    so the bytes) of the next export.
    """
    import gc

    for name in ("keras", "tf_keras"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "backend"):
            module.backend.clear_session()
    gc.collect()
    # What survives is the libraries' own state: frozen, later collections skip it (TensorFlow
    # holds millions of objects; a full collection over them took a second a call).
    gc.freeze()
