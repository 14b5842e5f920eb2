"""The parent's side of one child: how it starts, how a call is sent, how it ends.

Every child of tfcompress is a :class:`Child`: a process (a fresh interpreter, or a worker
forked by the :mod:`zygote <tfcompress._child.zygote>`), the parent's ends of its two pipes
(:mod:`.wire`), and the file its stderr goes to (read back for its last words). Its
:meth:`~Child.exchange` sends one request and returns a :class:`Reply`: the answer, the
child's death (a signal or an exit status), or the time limit passing (the child is then
killed). What a reply means to the caller is :mod:`.answers`' job.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from tfcompress._child import wire
from tfcompress._child.serve import BOOTSTRAP
from tfcompress.errors import ResourceLimitError

__all__ = ["Child", "Reply", "command_resident", "death_wish", "start_fresh"]

#: How much of a child's stderr a reply carries (its last words come from the end).
STDERR_TAIL = 64 * 1024
#: The size asked for each pipe (Linux lets any process ask up to 1 MiB).
PIPE_BYTES = 1 << 20
#: Variables that describe the caller's current step, not a setting any library reads.
VOLATILE = frozenset({"PYTEST_CURRENT_TEST"})


class Process(Protocol):
    """What a child process offers: :class:`subprocess.Popen`, or a zygote's forked worker."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int | None: ...
    def kill(self) -> None: ...


@dataclass(frozen=True)
class Reply:
    """What became of one request.

    Attributes:
        answer: The child's answer tuple (see :mod:`.wire`), or None when it gave none.
        code: Without an answer: the exit status, a signal as ``-N`` (None: unknown).
        timed_out: It ran past its time limit and was killed.
        said: What the child wrote on stderr during the request (the tail).
    """

    answer: tuple[Any, ...] | None = None
    code: int | None = None
    timed_out: bool = False
    said: bytes = b""


@dataclass(eq=False)  # one process each: compared, and hashed, by identity
class Child:
    """One child process and the parent's ends of its pipes."""

    process: Process
    requests: int  # the parent's write end (non-blocking)
    answers: int  # the parent's read end (non-blocking)
    stderr: IO[bytes]
    folder: tempfile.TemporaryDirectory[str] | None = None  # its private TMPDIR, if any
    env: dict[str, str] = field(default_factory=dict)
    memory: int = 0
    owner: int = field(default_factory=os.getpid)
    last_used: float = field(default_factory=time.monotonic)
    closed: bool = False

    def __post_init__(self) -> None:
        # Plain references, no callback: nothing of ours runs while the collector frees one.
        _LIVE[:] = [ref for ref in _LIVE if ref() is not None] + [weakref.ref(self)]

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self.process.pid

    def limit_call(self, request: bytes, *, scaled: bool) -> int:
        """Set the memory limit of the next call (see ``call_memory``); the limit set.

        ``scaled`` False (a limit the user or the caller named, fine-tuning): the ceiling.
        The ceiling is what the command has left (:func:`command_resident`): the caller and
        all its children share the one memory limit.
        """
        from tfcompress._lifetime import held_bytes, limit_child_memory
        from tfcompress._limits import call_memory, command_ceiling, job_bytes

        held = held_bytes(self.pid)
        ceiling = command_ceiling(self.memory, held, command_resident())
        limit = call_memory(ceiling, held if scaled else None, job_bytes(len(request)))
        return limit if limit_child_memory(self.pid, limit, self.memory) else self.memory

    def exchange(self, request: bytes, timeout: float, *, echo: bool = False) -> Reply:
        """Send one request and wait for its answer, the child's end, or ``timeout``.

        After a death or a time-out the child is closed (killed if needed); after an
        answer it is ready for the next request.

        Args:
            request: The request's bytes (:func:`.wire.encode_request`).
            timeout: Seconds for the whole exchange, sending included.
            echo: Copy what the child writes on stderr to ours while it works.
        """
        start = self.stderr.seek(0, os.SEEK_END)
        deadline = time.monotonic() + timeout
        shown = [start]
        waiting = (lambda: shown.__setitem__(0, self._echo(shown[0]))) if echo else None
        try:
            message = None
            if wire.write_message(self.requests, request, deadline):
                message = wire.read_message(self.answers, deadline, waiting=waiting)
            if message is None:
                said = self.since(start)
                self.close(kill=True)
                return Reply(timed_out=True, said=said)
        except (EOFError, OSError):  # it died: its end of a pipe closed
            message = None
        except BaseException:  # Ctrl-C, SIGTERM while it works: it must not outlive the call
            self.close(kill=True)
            raise
        if waiting is not None:
            waiting()
        if message is not None:
            self.last_used = time.monotonic()
            import pickle

            return Reply(answer=pickle.loads(message), said=self.since(start))
        code = self._ended(5)  # its pipe closed: it is exiting
        said = self.since(start)
        self.close()
        return Reply(code=code, said=said)

    def since(self, offset: int) -> bytes:
        """What the child wrote on stderr from ``offset`` on (at most :data:`STDERR_TAIL`)."""
        with contextlib.suppress(OSError, ValueError):  # closed meanwhile: nothing more
            self.stderr.flush()
            end = self.stderr.seek(0, os.SEEK_END)
            self.stderr.seek(max(offset, end - STDERR_TAIL))
            return self.stderr.read()
        return b""

    def close(self, *, kill: bool = False) -> None:
        """End the child: closing its requests pipe ends it; a stuck one is killed."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(OSError):
            os.close(self.requests)
        if kill:
            self.process.kill()
        self._ended(10)  # mid-call or stuck past it: killed, it holds nothing of ours
        with contextlib.suppress(OSError):
            os.close(self.answers)
        self.stderr.close()
        if self.folder is not None:
            self.folder.cleanup()

    def _ended(self, seconds: float) -> int | None:
        """Its exit status once it ends; killed if it lives on past ``seconds`` (None: unknown)."""
        try:
            return self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                return self.process.wait(timeout=10)
            return None

    def _echo(self, offset: int) -> int:
        new = self.since(offset)
        if new:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(new.decode("utf-8", errors="replace"))
                sys.stderr.flush()
        return offset + len(new)

    def __del__(self) -> None:
        if not getattr(self, "closed", True) and getattr(self, "owner", 0) == os.getpid():
            with contextlib.suppress(Exception):
                self.close(kill=True)


_LIVE: list[weakref.ref[Child]] = []


#: The caller's resident bytes when its command began (:func:`command_memory`, which the
#: CLI's ``main`` enters); None outside a command: a library caller's memory (a notebook, a
#: test run holding its models) is the user's program, not the command's, and counting it
#: would leave a child nothing under a limit the user set for tfcompress's work.
_command_base: int | None = None


@contextlib.contextmanager
def command_memory() -> Iterator[None]:
    """Count what this process grows by from now in the command's one memory budget."""
    global _command_base
    from tfcompress._lifetime import held_bytes

    before, _command_base = _command_base, held_bytes(os.getpid(), "VmRSS")
    try:
        yield
    finally:
        _command_base = before


def command_resident() -> int | None:
    """Resident bytes of the command: its children now, and what the caller grew by in it."""
    from tfcompress._lifetime import held_bytes

    own = held_bytes(os.getpid(), "VmRSS")
    if own is None:
        return None
    grown = 0 if _command_base is None else max(0, own - _command_base)
    me = os.getpid()
    live = [c for c in (ref() for ref in list(_LIVE)) if c and not c.closed and c.owner == me]
    return grown + sum(held_bytes(c.pid, "VmRSS") or 0 for c in live)


def death_wish() -> int:
    """The pid a child started now should die with (:mod:`tfcompress._lifetime`), or 0.

    The kernel signals a child when the *thread* that started it ends, not the process: a
    child started from another thread than the main one (a caller's thread pool) would die
    with that thread while others still use it. Such a child dies with its parent all the
    same: it watches its requests pipe, which the kernel closes when the parent dies
    (:func:`.serve.watch_parent`).
    """
    return os.getpid() if threading.current_thread() is threading.main_thread() else 0


def pipes() -> tuple[tuple[int, int], tuple[int, int]]:
    """``((parent_requests, child_requests), (child_answers, parent_answers))``.

    The parent's ends are non-blocking and not inherited; the child's are blocking.
    """
    child_in, parent_out = os.pipe()
    parent_in, child_out = os.pipe()
    for fd in (parent_out, parent_in):
        os.set_blocking(fd, False)
        _widen(fd)
    return (parent_out, child_in), (child_out, parent_in)


def _widen(fd: int) -> None:
    """A pipe of 1 MiB where the OS allows (Linux): a model crosses in a few writes, not 16."""
    with contextlib.suppress(ImportError, AttributeError, OSError):  # elsewhere: as it is
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)


def stderr_file() -> IO[bytes]:
    """A private, unlinked file for a child's stderr, appended to wherever we read."""
    stream = tempfile.TemporaryFile()  # noqa: SIM115 - lives with the child
    with contextlib.suppress(ImportError, OSError):  # not POSIX: we read only after it ends
        import fcntl

        flags = fcntl.fcntl(stream.fileno(), fcntl.F_GETFL)
        fcntl.fcntl(stream.fileno(), fcntl.F_SETFL, flags | os.O_APPEND)
    return stream


def start_fresh(
    *,
    role: str,
    memory: int,
    env: Mapping[str, str] | None = None,
    warm_up: Sequence[str] = (),
    private_tmp: bool = False,
) -> Child:
    """Start a child as a fresh interpreter with this process's import path.

    Args:
        role: ``call`` or ``worker`` (see :mod:`.serve`).
        memory: Bytes it may allocate.
        env: Its environment (default: ours).
        warm_up: What it imports or calls before its first request.
        private_tmp: Give it a TMPDIR of its own, removed with it even when it is killed
            (TensorFlow's autograph writes modules there, exports too).

    Raises:
        ResourceLimitError: No process could be started.
    """
    given = dict(os.environ if env is None else env)
    environment = dict(given)
    if role == "call":  # TensorFlow's C++ notices are no call's last words
        environment.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    folder = None
    if private_tmp:
        folder = tempfile.TemporaryDirectory(prefix="tfcompress-child-")
        (Path(folder.name) / "tmp").mkdir()
        environment["TMPDIR"] = str(Path(folder.name) / "tmp")
    (parent_out, child_in), (child_out, parent_in) = pipes()
    stderr = stderr_file()
    command = [
        sys.executable,
        "-P",
        "-c",
        BOOTSTRAP,
        json.dumps([p for p in sys.path if p]),
        str(death_wish()),
        str(memory),
        str(child_in),
        str(child_out),
        role,
        *warm_up,
    ]
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=stderr,
            stderr=stderr,
            env=environment,
            pass_fds=(child_in, child_out),
        )
    except OSError as failure:  # cannot fork or exec: the machine, not the model
        for fd in (parent_out, parent_in):
            os.close(fd)
        stderr.close()
        if folder is not None:
            folder.cleanup()
        raise ResourceLimitError(
            f"cannot start a child process ({failure.strerror}); free memory or processes."
        ) from failure
    finally:
        os.close(child_in)
        os.close(child_out)
    return Child(process, parent_out, parent_in, stderr, folder, settled(given), memory)


def settled(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without :data:`VOLATILE` variables: what reuse of a child compares.

    tfcompress keeps children warm across requests (a fine-tuning child, the measurement
    zygote) but starts a fresh one when the environment changed, because TensorFlow, oneDNN,
    OpenMP and LiteRT read their settings once, at import. A variable that only names what
    the caller is doing right now is not such a setting: pytest rewrites
    ``PYTEST_CURRENT_TEST`` before every test phase, so comparing it would start a fresh
    child for every test of a suite of accuracy gates.

    Example:
        >>> settled({"TF_ENABLE_ONEDNN_OPTS": "0", "PYTEST_CURRENT_TEST": "t.py::x (call)"})
        {'TF_ENABLE_ONEDNN_OPTS': '0'}
    """
    return {name: value for name, value in environ.items() if name not in VOLATILE}
