"""The one way tfcompress runs native work that model or data bytes can drive: in a child process.

TensorFlow's converter and its MLIR quantizer, LiteRT's calibration and its interpreter, and
tfmot's fine-tuning are native code that a model file or a data file steers. A crash there
(SIGSEGV on a NaN the quantizer did not expect), a hang, or an allocation whose size comes
from the data (a FILL op sized by an input value) must end as one line, never as the death of
the caller or a machine out of memory. So such work runs here, as a call:

    >>> content = call(  # doctest: +SKIP
    ...     "tfcompress.quantization.converter:convert_saved_model",
    ...     export_dir, settings, what="converting mnist",
    ... )

* the function is named by ``module:qualname`` and imported in the child; its arguments and
  result cross as pickles in a private temporary folder (0700), removed after the call;
* the child runs under a time limit (:data:`~tfcompress._limits.CHILD_TIMEOUT`, the call's
  ``timeout`` or ``TFCOMPRESS_TIMEOUT``) and a memory limit
  (:data:`~tfcompress._limits.CHILD_MEMORY`: ``RLIMIT_DATA``, what a process may allocate);
* a crash is one :class:`~tfcompress.errors.NativeCrashError` naming the signal and the
  child's last words; a call past its time limit one :class:`~tfcompress.errors.ChildTimeoutError`;
  an allocation past the memory limit one :class:`~tfcompress.errors.ResourceLimitError`;
  a :class:`~tfcompress.errors.TFCompressError` raised there is raised here as it was;
* the child dies with its parent (:mod:`tfcompress._lifetime`), writes no core file, and the
  next call after a crash or a time-out starts a fresh one.

A child stays warm for the next call of the same process while the environment is the same
(``warm=True``, the default): its imports (TensorFlow takes seconds) are paid once per
process, which is what makes a ``compress`` search of a dozen conversions, or a notebook that
quantizes again and again, no slower than converting in-process (docs/benchmarks.md,
``child_cost``). It exits when its parent closes its standard input, or after
:data:`IDLE_SECONDS` without a call. ``warm=False`` runs one call in a child of its own (a
retry in another environment). ``TFCOMPRESS_IN_PROCESS=1`` runs calls in the caller (for a
debugger); then nothing is contained.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import pickle
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

from tfcompress._environ import settled
from tfcompress._lifetime import last_words, signal_name
from tfcompress.errors import (
    ChildTimeoutError,
    NativeCrashError,
    ResourceLimitError,
    TFCompressError,
)

__all__ = ["IDLE_SECONDS", "call", "close_warm_child", "last_words", "prestart", "signal_name"]

#: A warm child with nothing to do for this long exits (it holds TensorFlow's memory).
IDLE_SECONDS = 300.0
#: Reuse a child only well inside its idle limit, so it never exits under a call.
_REUSE_SECONDS = IDLE_SECONDS - 30.0
_STDERR_TAIL = 64 * 1024
_SERVE = "--serve"
#: Tests make the child die by SIGSEGV as a call starts, as TensorFlow's kernels do: on a
#: fine-tuning call with ``always``, or ``onednn`` only while ``TF_ENABLE_ONEDNN_OPTS`` is
#: not ``0``; on any call with ``any``.
CRASH_HOOK = "TFCOMPRESS_TEST_CHILD_CRASH"
IN_PROCESS = "TFCOMPRESS_IN_PROCESS"


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
    **kwargs: Any,
) -> Any:
    """Run ``module:function(*args, **kwargs)`` in a child process and return its result.

    Args:
        target: ``"package.module:function"``, imported in the child.
        *args: Positional arguments (pickled).
        what: What the call does, for messages (``"converting 'mnist' to int8"``).
        timeout: Seconds the call may take; None: ``TFCOMPRESS_TIMEOUT`` or its default.
        memory: Bytes the child may allocate; None: ``TFCOMPRESS_MEMORY_LIMIT`` or its default.
        env: The child's environment (default: this process's).
        warm: Use (or leave behind) the warm child of this process; False: a child of its own.
        echo: Copy what the child writes on stderr to ours while it works (its progress
            bars); it is kept for the error message either way.
        **kwargs: Keyword arguments (pickled).

    Returns:
        What the function returned there.

    Raises:
        NativeCrashError: The child died by a signal.
        ChildTimeoutError: The call ran past ``timeout``; the child was killed.
        ResourceLimitError: The call allocated past ``memory``.
        TFCompressError: What the function raised there, as it was.
        RuntimeError: A bug in the function (its type and message).
    """
    from tfcompress._limits import CHILD_MEMORY, CHILD_TIMEOUT

    limit_s = CHILD_TIMEOUT.seconds() if timeout is None else CHILD_TIMEOUT.check(timeout)
    limit_bytes = CHILD_MEMORY.value() if memory is None else memory
    environment = dict(os.environ if env is None else env)
    if environment.get(IN_PROCESS, "") == "1":
        return _resolve(target)(*args, **kwargs)
    with tempfile.TemporaryDirectory(prefix="tfcompress-call-") as folder:
        request, reply = Path(folder) / "request.pickle", Path(folder) / "reply.pickle"
        request.write_bytes(pickle.dumps({"target": target, "args": args, "kwargs": kwargs}))
        with _lock:
            code, said = _run(request, reply, environment, limit_s, limit_bytes, warm, echo)
        if code == _TIMED_OUT:
            raise ChildTimeoutError(
                f"{what} ran past its time limit of {limit_s:g} s and was stopped; set "
                f"TFCOMPRESS_TIMEOUT=SECONDS to allow longer."
            )
        if code is not None and code < 0:
            crash = NativeCrashError(_crash_message(what, -code, said, limit_bytes))
            crash.signal_number, crash.said = -code, said  # for a caller that retries
            raise crash
        return _answer(what, reply, code, said, limit_bytes)


def prestart(*warm_up: str) -> None:
    """Start this process's warm child now, running ``warm_up`` there while the caller works.

    A conversion's child imports TensorFlow (seconds); started when a verb begins, it does so
    while the caller loads and traces the model, instead of after. Nothing is raised here:
    a child that cannot start is reported by the call that needs it.

    Args:
        *warm_up: ``module:function`` names called with no arguments when the child starts
            (``"tfcompress._compat.tf:tensorflow"``), or bare modules to import.

    Example:
        >>> prestart("tfcompress._compat.tf:tensorflow")  # doctest: +SKIP
    """
    global _warm
    environment = dict(os.environ)
    if environment.get(IN_PROCESS, "") == "1":
        return
    from tfcompress._limits import CHILD_MEMORY

    with _lock:
        try:
            memory = CHILD_MEMORY.value()
            if _warm is not None and _warm.usable(environment, memory):
                return
            close_warm_child()
            _warm = _start(environment, memory, warm_up)
        except TFCompressError:  # a bad limit or no process: the call itself will say so
            return


def _crash_message(what: str, number: int, said: bytes, memory: int) -> str:
    last = last_words(said)
    words = f"; its last words: {last}" if last else ""
    if number == signal.SIGKILL:
        cause = "killed (SIGKILL), usually by the out-of-memory killer"
        fix = "free memory, or use a smaller model or batch"
    elif _out_of_memory(said):
        cause = f"ran out of its memory limit of {_gib(memory)} ({signal_name(number)})"
        fix = "set TFCOMPRESS_MEMORY_LIMIT=BYTES to allow more, if the model needs it"
    else:
        cause = f"crashed in native code ({signal_name(number)})"
        fix = (
            "the model or data drove the runtime into a state it cannot handle; check the "
            "weights and data are finite and in a sane range"
        )
    return f"{what} {cause} in its child process{words}; {fix}. Nothing was written."


def _out_of_memory(said: bytes) -> bool:
    text = said.decode("utf-8", errors="replace").lower()
    return any(word in text for word in ("bad_alloc", "out of memory", "cannot allocate"))


def _gib(size: int) -> str:
    return f"{size / 2**30:.3g} GiB"


def _answer(what: str, reply: Path, code: int | None, said: bytes, memory: int) -> Any:
    if not reply.is_file():
        last = last_words(said)
        words = f" (its last words: {last})" if last else ""
        raise RuntimeError(f"the child process {what} exited with status {code} unanswered{words}")
    answer = pickle.loads(reply.read_bytes())  # our own child wrote it, in our own folder
    if "result" in answer:
        return answer["result"]
    if "error" in answer:
        raise answer["error"]
    if "error_text" in answer:  # a typed error that would not pickle: same words, same code
        error = TFCompressError(answer["error_text"])
        error.exit_code = answer["exit_code"]
        raise error
    if "memory" in answer:
        raise ResourceLimitError(
            f"{what} needed more memory than the limit of {_gib(memory)} "
            f"({answer['memory']}); set TFCOMPRESS_MEMORY_LIMIT=BYTES to allow more, if the "
            "model really needs it."
        )
    raise RuntimeError(f"{what} failed in its child process: {answer['bug']}")


# --- the parent's side: one warm child per process -------------------------------------------

_TIMED_OUT = -(10**6)  # no signal has this number


@dataclass
class _Child:
    process: subprocess.Popen[str]
    env: dict[str, str]
    memory: int
    stderr: IO[bytes]
    folder: tempfile.TemporaryDirectory[str]
    owner: int = field(default_factory=os.getpid)
    last_used: float = field(default_factory=time.monotonic)

    def usable(self, env: Mapping[str, str], memory: int) -> bool:
        return (
            self.owner == os.getpid()
            and self.process.poll() is None
            and self.env == settled(env)
            and self.memory == memory
            and time.monotonic() - self.last_used < _REUSE_SECONDS
        )

    def close(self, *, kill: bool = False) -> None:
        with contextlib.suppress(OSError):  # already gone: nothing to close
            if self.process.stdin is not None:
                self.process.stdin.close()
        if kill:
            self.process.kill()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # mid-call or stuck: it holds nothing of ours
            self.process.kill()
            self.process.wait()
        with contextlib.suppress(OSError):
            if self.process.stdout is not None:
                self.process.stdout.close()
        self.stderr.close()
        self.folder.cleanup()


_lock = threading.RLock()
_warm: _Child | None = None


def _run(
    request: Path,
    reply: Path,
    env: dict[str, str],
    timeout: float,
    memory: int,
    warm: bool,
    echo: bool,
) -> tuple[int | None, bytes]:
    """Send one call; (None, stderr) once answered, else (exit status or _TIMED_OUT, stderr)."""
    global _warm
    if not warm:
        child = _start(env, memory)
        try:
            return _send(child, request, reply, timeout, echo)
        finally:
            child.close(kill=True)
    if _warm is not None and _warm.usable(env, memory):
        code, said = _send(_warm, request, reply, timeout, echo)
        idle_death = code is not None and (code >= 0 or code == -signal.SIGKILL)
        if not idle_death or reply.is_file():
            return code, said
        # A reused child that ended unanswered without a crash of its own may have died
        # while idle (killed, or leaving just as the call came): the call gets a fresh child
        # before it counts. A crash (SIGSEGV...) is the call's, and is not run twice.
    close_warm_child()
    _warm = _start(env, memory)
    return _send(_warm, request, reply, timeout, echo)


def _send(
    child: _Child, request: Path, reply: Path, timeout: float, echo: bool
) -> tuple[int | None, bytes]:
    start = child.stderr.seek(0, os.SEEK_END)
    reply.unlink(missing_ok=True)
    try:
        stdin, stdout = cast(IO[str], child.process.stdin), cast(IO[str], child.process.stdout)
        stdin.write(f"{request}\t{reply}\n")
        stdin.flush()
        if not _wait(child, stdout, timeout, start if echo else None):
            _forget(child)
            child.close(kill=True)
            return _TIMED_OUT, b""
        answered = stdout.readline() == "done\n"
    except BrokenPipeError:  # it ended before reading the call
        answered = False
    except BaseException:  # Ctrl-C, SIGTERM while it works: it must not outlive this call
        _forget(child)
        child.close(kill=True)
        raise
    if answered:
        child.last_used = time.monotonic()
        return None, _since(child, start)
    _forget(child)
    code = child.process.wait()
    said = _since(child, start)
    child.close()
    return code, said


def _wait(child: _Child, stdout: IO[str], timeout: float, echo_from: int | None) -> bool:
    """Wait for the child's answer (or its end); False past ``timeout``.

    With ``echo_from``, what the child writes on stderr from there on is copied to ours
    while it works.
    """
    deadline = time.monotonic() + timeout
    shown = echo_from
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        ready, _, _ = select.select([stdout], [], [], left if shown is None else min(left, 0.2))
        if shown is not None:
            shown = _echo(child, shown)
        if ready:
            return True


def _echo(child: _Child, offset: int) -> int:
    child.stderr.flush()
    child.stderr.seek(offset)
    new = child.stderr.read()
    if new:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(new.decode("utf-8", errors="replace"))
            sys.stderr.flush()
    return offset + len(new)


def _forget(child: _Child) -> None:
    global _warm
    if _warm is child:
        _warm = None


def _start(env: Mapping[str, str], memory: int, warm_up: tuple[str, ...] = ()) -> _Child:
    folder = tempfile.TemporaryDirectory(prefix="tfcompress-child-")
    # Appending: the child writes at the end wherever our reads have moved the shared offset.
    stderr = open(Path(folder.name) / "stderr.log", "a+b")  # noqa: SIM115 - lives with the child
    environment = dict(env)
    environment.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # Its temporary files (TensorFlow's autograph modules, exports) go in a folder we remove,
    # even when it is killed and cleans up nothing itself.
    private_tmp = Path(folder.name) / "tmp"
    private_tmp.mkdir()
    environment["TMPDIR"] = str(private_tmp)
    # The kernel's parent-death signal follows the thread that started the child: asked for
    # only from the main thread, which lives as long as the process (elsewhere our clean-up
    # and the closed pipe end it).
    parent = os.getpid() if threading.current_thread() is threading.main_thread() else 0
    try:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tfcompress._child",
                _SERVE,
                str(parent),
                str(memory),
                *warm_up,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=environment,
            text=True,
        )
    except OSError as failure:  # cannot fork or exec: the machine, not the model
        stderr.close()
        folder.cleanup()
        raise ResourceLimitError(
            f"cannot start a child process ({failure.strerror}); free memory or processes."
        ) from failure
    return _Child(process, settled(env), memory, stderr, folder)


def _since(child: _Child, offset: int) -> bytes:
    child.stderr.flush()
    end = child.stderr.seek(0, os.SEEK_END)
    child.stderr.seek(max(offset, end - _STDERR_TAIL))
    return child.stderr.read()


@atexit.register
def close_warm_child() -> None:
    """End this process's warm child, if any (the next call starts a fresh one).

    Example:
        >>> close_warm_child()
    """
    global _warm
    with _lock:
        if _warm is not None and _warm.owner == os.getpid():
            _warm.close()
        _warm = None


# --- the child's side ------------------------------------------------------------------------


def _resolve(target: str) -> Any:
    module, _, name = target.partition(":")
    if not module or not name:  # pragma: no cover - our own callers
        raise ValueError(f"not a module:function name: {target!r}")
    found: Any = importlib.import_module(module)
    for part in name.split("."):
        found = getattr(found, part)
    return found


def _crash_for_tests(target: str) -> None:
    hook = os.environ.get(CRASH_HOOK, "")
    onednn_on = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "") != "0"
    fine_tuning = target.startswith("tfcompress.training.")
    if hook == "any" or (fine_tuning and (hook == "always" or (hook == "onednn" and onednn_on))):
        os.kill(os.getpid(), signal.SIGSEGV)


def _serve(parent: int, memory: int, warm_up: list[str]) -> int:
    from tfcompress._lifetime import die_with_parent, limit_memory, no_core_files

    no_core_files()
    if parent:  # 0: started from a thread that may end before the process does
        die_with_parent(parent)
    limit_memory(memory)
    os.environ[IN_PROCESS] = "1"  # a call this one makes runs here: it is contained already
    for name in warm_up:  # a failure here is the first call's to report
        with contextlib.suppress(Exception):
            found = _resolve(name if ":" in name else f"{name}:__name__")
            if callable(found):
                found()
    # The answers get a private copy of stdout; anything the libraries print goes to stderr,
    # so a progress bar can never be read as an answer.
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], IDLE_SECONDS)
        line = sys.stdin.readline() if ready else ""
        if not line.strip():  # closed, or idle: the parent starts a fresh child when needed
            return 0
        request, reply = line.rstrip("\n").split("\t")
        _answer_one(Path(request), Path(reply))
        answers.write("done\n")
        _forget_models()  # after the answer: the caller goes on meanwhile; the next call waits


def _answer_one(request_path: Path, reply: Path) -> None:
    request = pickle.loads(request_path.read_bytes())  # the parent's own file
    answer: dict[str, Any]
    _crash_for_tests(request["target"])
    try:
        function = _resolve(request["target"])
        answer = {"result": function(*request["args"], **request["kwargs"])}
    except TFCompressError as error:
        answer = {"error": error}
    except MemoryError as error:
        answer = {"memory": f"MemoryError: {error}"[:200]}
    # Anything else is a bug; the parent raises it with this text (its CLI exits 3).
    except Exception as error:
        print("".join(traceback.format_exception(error)), file=sys.stderr)
        answer = {"bug": f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"}
    try:
        data = pickle.dumps(answer)
    except Exception:  # an error or result holding something unpicklable
        error = answer.get("error")
        if error is None:
            raise
        data = pickle.dumps({"error_text": str(error), "exit_code": error.exit_code})
    reply.write_bytes(data)


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


def main(argv: list[str]) -> int:
    """``python -m tfcompress._child --serve PARENT_PID MEMORY_BYTES [WARM_UP...]``.

    PARENT_PID 0: do not ask to die with the parent (it was started from a passing thread).
    """
    if len(argv) < 4 or argv[1] != _SERVE:
        print(
            "usage: python -m tfcompress._child --serve PARENT_PID MEMORY_BYTES [WARM_UP...]",
            file=sys.stderr,
        )
        return 2
    return _serve(int(argv[2]), int(argv[3]), argv[4:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
