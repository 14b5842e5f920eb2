"""``call``: one function in a child process, warm per process or a child of its own.

TensorFlow's converter and its MLIR quantizer, LiteRT's calibration, the quantization
debugger and tfmot's fine-tuning are native code that a model file or a data file steers,
run with TensorFlow imported. Such work is a call:

    >>> content = call(  # doctest: +SKIP
    ...     "tfcompress.quantization.converter:convert_saved_model",
    ...     export_dir, settings, what="converting mnist",
    ... )

A child stays warm for the next call of the same process while the environment and the
memory limit are the same (``warm=True``, the default): its imports (TensorFlow takes
seconds) are paid once per process, which is what makes a ``compress`` search of a dozen
conversions, or a notebook that quantizes again and again, no slower than converting
in-process (docs/benchmarks.md, ``child_cost``). Keras' global state is reset between calls
(:mod:`.serve`). It exits when its parent closes its pipe, or after
:data:`~.serve.IDLE_SECONDS` without a call, and is killed when its parent exits (every
answer is in; a child started early may still be importing TensorFlow); the next call
after a crash or a time-out starts a fresh one. Its temporary files go in a private folder
removed with it, even when it is killed. ``warm=False`` runs one call in a child of its
own (a retry in another environment). ``TFCOMPRESS_IN_PROCESS=1`` runs calls in the caller
(for a debugger); then nothing is contained.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from tfcompress._child import wire
from tfcompress._child.answers import ChildTransferError, result
from tfcompress._child.process import Child, Reply, settled, start_fresh
from tfcompress._child.serve import IDLE_SECONDS, IN_PROCESS, resolve
from tfcompress.errors import TFCompressError

__all__ = ["call", "close_warm_child", "prestart", "usable"]

#: Reuse a child only well inside its idle limit, so it never exits under a call.
REUSE_SECONDS = IDLE_SECONDS - 30.0

_lock = threading.RLock()
_current: Child | None = None


def call(
    target: str,
    /,
    *args: Any,
    what: str,
    timeout: float | None = None,
    memory: int | None = None,
    env: Mapping[str, str] | None = None,
    warm: bool = True,
    echo: bool = False,
    follow: str | None = None,
    **kwargs: Any,
) -> Any:
    """Run ``module:function(*args, **kwargs)`` in a child process and return its result.

    Args:
        target: ``"package.module:function"``, imported in the child.
        *args: Positional arguments (pickled).
        what: What the call does, for messages (``"converting 'mnist' to int8"``).
        timeout: Seconds the call may take; None: ``TFCOMPRESS_TIMEOUT`` or its default.
        memory: Bytes the child may allocate; None: ``TFCOMPRESS_MEMORY_LIMIT``, or (unset)
            its default scaled to the call (:func:`tfcompress._limits.call_memory`).
        env: The child's environment (default: this process's).
        warm: Use (or leave behind) the warm child of this process; False: a child of its own.
        echo: Copy what the child writes on stderr to ours while it works (its progress
            bars); it is kept for the error message either way.
        follow: Run where this module is: here when it is imported here, or when no warm
            child runs (reading a SavedModel goes where TensorFlow is, or is starting: the
            warm child that ``quantize`` starts first).
        **kwargs: Keyword arguments (pickled).

    Returns:
        What the function returned there.

    Raises:
        NativeCrashError: The child died by a signal.
        ChildTimeoutError: The call ran past ``timeout``; the child was killed.
        ResourceLimitError: The call allocated past ``memory``, or no child could start.
        ChildTransferError: An argument cannot be handed to the child.
        TFCompressError: What the function raised there, as it was.
        RuntimeError: A bug in the function (its type and message), or a child that
            exited without answering.
    """
    from tfcompress._limits import CHILD_MEMORY, CHILD_TIMEOUT

    limit_s = CHILD_TIMEOUT.given(timeout)
    limit_bytes = CHILD_MEMORY.value() if memory is None else memory
    scaled = memory is None and not CHILD_MEMORY.is_set()
    environment = dict(os.environ if env is None else env)
    here = follow is not None and (follow in sys.modules or not running())
    if environment.get(IN_PROCESS, "") == "1" or here:
        return resolve(target)(*args, **kwargs)
    try:
        request = wire.encode_request(target, args, kwargs)
    except wire.TransferError as error:
        raise ChildTransferError(f"cannot hand {what} to a child process ({error})") from error
    with _lock:
        reply, applied = _run(request, environment, limit_s, limit_bytes, warm, echo, scaled)
    return result(reply, what=what, seconds=limit_s, memory=applied)


#: What the converter's child runs first: it imports TensorFlow's converter.
CONVERTER = "tfcompress.quantization.converter:_import_converter"


def prestart(*warm_up: str) -> None:
    """Start this process's warm child now, running ``warm_up`` there while the caller works.

    A conversion's child imports TensorFlow (seconds); started when a verb begins, it does so
    while the caller loads and traces the model, instead of after. Nothing is raised here:
    a child that cannot start is reported by the call that needs it.

    Args:
        *warm_up: ``module:function`` names called with no arguments when the child starts
            (``"tfcompress._compat.tf:tensorflow"``), or bare modules to import.
    """
    global _current
    environment = dict(os.environ)
    if environment.get(IN_PROCESS, "") == "1":
        return
    from tfcompress._limits import CHILD_MEMORY

    with _lock:
        try:
            memory = CHILD_MEMORY.value()
            if _current is not None and usable(_current, environment, memory):
                return
            close_warm_child()
            _current = _start(environment, memory, warm_up)
        except TFCompressError:  # a bad limit or no process: the call itself will say so
            return


def running() -> bool:
    """Whether this process has a warm child up now (for diagnostics; calls start one)."""
    with _lock:
        return _current is not None and _current.owner == os.getpid()


def close_warm_child(*, kill: bool = False) -> None:
    """End this process's warm child, if any (the next call starts a fresh one).

    Args:
        kill: Kill it rather than wait for it to leave (at exit: every answer is in, and a
            child started early may still be importing TensorFlow, which it would finish
            before reading that its pipe closed).

    Example:
        >>> close_warm_child()
    """
    global _current
    with _lock:
        if _current is not None and _current.owner == os.getpid():
            _current.close(kill=kill)
        _current = None


atexit.register(close_warm_child, kill=True)


def usable(child: Child, env: Mapping[str, str], memory: int) -> bool:
    """Whether ``child`` may serve a call of this process with ``env`` and ``memory`` now.

    TensorFlow reads its environment once: another environment (pytest's name of the
    current test aside) or another memory limit needs another child; so does a forked
    caller, and a child idle for so long that it may be exiting on its own.
    """
    return (
        not child.closed
        and child.owner == os.getpid()
        and child.process.poll() is None
        and child.env == settled(env)
        and child.memory == memory
        and time.monotonic() - child.last_used < REUSE_SECONDS
    )


def _start(env: Mapping[str, str], memory: int, warm_up: tuple[str, ...] = ()) -> Child:
    return start_fresh(role="call", memory=memory, env=env, warm_up=warm_up, private_tmp=True)


def _run(
    request: bytes,
    env: dict[str, str],
    timeout: float,
    memory: int,
    warm: bool,
    echo: bool,
    scaled: bool,
) -> tuple[Reply, int]:
    """Send one call to the warm child (or a child of its own); what became of it, its limit."""
    global _current
    if not warm:
        child = _start(env, memory)
        try:
            applied = child.limit_call(request, scaled=scaled)
            return child.exchange(request, timeout, echo=echo), applied
        finally:
            child.close(kill=True)
    if _current is not None and usable(_current, env, memory):
        applied = _current.limit_call(request, scaled=scaled)
        reply = _current.exchange(request, timeout, echo=echo)
        idle_death = reply.answer is None and not reply.timed_out
        code = reply.code
        idle_death = idle_death and (code is None or code >= 0 or code == -signal.SIGKILL)
        if not idle_death:
            if reply.answer is None:
                _current = None  # closed by the exchange: the next call starts a fresh one
            return reply, applied
        # A reused child that ended unanswered without a crash of its own may have died
        # while idle (killed, or leaving just as the call came): the call gets a fresh child
        # before it counts. A crash (SIGSEGV...) is the call's, and is not run twice.
    close_warm_child()
    _current = _start(env, memory)
    applied = _current.limit_call(request, scaled=scaled)
    reply = _current.exchange(request, timeout, echo=echo)
    if reply.answer is None:
        _current = None
    return reply, applied
