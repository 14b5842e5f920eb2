"""Start measurement workers by forking a process that has imported them already.

Each :class:`~tfcompress.bench.isolation.IsolatedRunner` holds one model in a worker process
of its own, so a crash or a hang of the native runtime costs only that worker. Starting one
with a fresh interpreter costs about half a second (Python, NumPy, tfcompress's runtime
modules, LiteRT; 494 ms against 47 ms forked, benchmarks/isolation_cost.py) before it loads
its model; a benchmark of 20 artifacts on two backends starts 40. So on Linux, each process
that measures keeps a *zygote*: a child that imported all of that once and forks one worker
per runner on request, as Android starts its apps and ``multiprocessing``'s forkserver its
processes. Every worker is still a process of its own, holding one model; only its start is
cheaper.

The zygote is private to tfcompress (``multiprocessing``'s forkserver is one per program
and would run the caller's ``__main__`` again). It starts with the caller's environment,
import path, and a caller that changed either (or forked) gets a fresh zygote, so a worker
always starts from what a fresh interpreter would have seen (pytest's
``PYTEST_CURRENT_TEST`` aside, :mod:`tfcompress._environ`); each worker starts in the
caller's working folder of the moment (sent as an open folder, so any path works).
The zygote reaps its workers and reports each exit status (a signal is ``-N``, as
:class:`subprocess.Popen` reports it), which the caller reads from a pipe of its own.
On Linux the zygote dies with the caller and each worker with the zygote
(:mod:`tfcompress._lifetime`): nothing keeps measuring after the caller is gone.
Where there is no zygote (not Linux, ``TFCOMPRESS_NO_ZYGOTE=1``, or it could not start),
workers start as fresh interpreters, as before.

Example:
    >>> worker = start_worker([sys.executable, "-P", "-c", BOOTSTRAP, PATHS, "5", "6"],
    ...                       fds=(5, 6), stderr=log)  # doctest: +SKIP
    >>> worker.wait(timeout=10)  # doctest: +SKIP
    0
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from tfcompress._environ import settled

logger = logging.getLogger(__name__)

#: What the zygote imports before its first fork: what every LiteRT worker needs.
PRELOAD = (
    "numpy",
    "tfcompress.bench._worker",
    "tfcompress.bench.memory",
    "tfcompress.bench.stats",
    "tfcompress.runtime.litert",
    "ai_edge_litert.interpreter",
)
#: Set to 1 to start every worker as a fresh interpreter (a backend that cannot be forked).
NO_ZYGOTE = "TFCOMPRESS_NO_ZYGOTE"
_BOOTSTRAP = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from tfcompress.bench.zygote import serve; "
    "sys.exit(serve(int(sys.argv[2]), int(sys.argv[3])))"
)
_READY_SECONDS = 60.0  # the zygote's imports (or one fork), on a busy machine
_MESSAGE = 64


class Worker:
    """A worker forked by the zygote: what :class:`subprocess.Popen` offers, for a grandchild.

    Its exit status comes from the zygote, through ``status``, once the zygote reaped it.
    """

    def __init__(self, pid: int, status: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._status = status  # read end; the zygote writes "CODE\n" and closes it

    def poll(self) -> int | None:
        """The exit status, or None while the worker runs."""
        if self.returncode is None and self._status >= 0:
            ready, _, _ = select.select([self._status], [], [], 0)
            if ready:
                self._read()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for the exit status; None when the zygote died before reporting it.

        Raises:
            subprocess.TimeoutExpired: It still runs after ``timeout`` seconds.
        """
        if self.returncode is None and self._status >= 0:
            ready, _, _ = select.select([self._status], [], [], timeout)
            if not ready:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
            self._read()
        return self.returncode

    def kill(self) -> None:
        """Send SIGKILL, unless its exit is known already (its pid may be another's now)."""
        if self.poll() is None and self._status >= 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def _read(self) -> None:
        text = os.read(self._status, _MESSAGE).decode("ascii", errors="replace").strip()
        os.close(self._status)
        self._status = -1
        self.returncode = int(text) if text.lstrip("-").isdigit() else None

    def __del__(self) -> None:
        if getattr(self, "_status", -1) >= 0:
            os.close(self._status)


@dataclass
class _Zygote:
    process: subprocess.Popen[bytes]
    control: socket.socket
    key: tuple[Any, ...]
    owner: int = field(default_factory=os.getpid)

    def fork(self, fds: Sequence[int], stderr: int) -> Worker:
        status_read, status_write = os.pipe()
        folder = -1
        try:
            # ".", not getcwd(): a folder removed since it was entered still opens, as a fresh
            # interpreter would still start in it.
            folder = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
            socket.send_fds(self.control, [b"fork"], [*fds, stderr, folder, status_write])
            answer = self.control.recv(_MESSAGE)
            if not answer.isdigit():  # b"": it died; else the words of its failed fork
                raise OSError(f"the zygote did not fork ({answer[:60]!r})")
        except OSError:
            os.close(status_read)
            raise
        finally:
            os.close(status_write)
            if folder >= 0:
                os.close(folder)
        return Worker(int(answer), status_read)

    def close(self) -> None:
        # The zygote reads the end of its socket, waits for its workers still running
        # (reporting their exits), then exits; subprocess reaps it later, unwaited for.
        self.control.close()


_lock = threading.Lock()
_zygote: _Zygote | None = None
_failed: set[tuple[Any, ...]] = set()  # settings under which a zygote could not start


def start_worker(
    command: Sequence[str], *, fds: Sequence[int], stderr: IO[bytes]
) -> Worker | subprocess.Popen[bytes]:
    """Start the worker ``command`` would start, forked from the zygote where there is one.

    Args:
        command: The worker as a fresh interpreter runs it, where there is no zygote.
        fds: The worker's ends of its pipes (the caller closes its copies afterwards).
        stderr: Where the worker writes its last words.

    Returns:
        A :class:`Worker`, or the :class:`subprocess.Popen` of a fresh interpreter.

    Raises:
        OSError: No process could be started.
    """
    if sys.platform == "linux" and os.environ.get(NO_ZYGOTE, "") in {"", "0"}:
        with _lock:
            zygote = _current()
            if zygote is not None:
                try:
                    return zygote.fork(fds, stderr.fileno())
                except OSError as error:  # it died: fresh interpreters from now on
                    logger.debug("the zygote failed to fork (%s): fresh interpreters", error)
                    _failed.add(zygote.key)
                    _close_zygote()
    return subprocess.Popen(
        list(command),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        pass_fds=tuple(fds),
    )


def death_wish() -> int:
    """The pid a child started now should die with (``_lifetime``), or 0: none.

    The kernel signals a child when the *thread* that started it ends, not the process: a
    child started from another thread than the main one (a caller's thread pool) would die
    with that thread while others still use it, so such a child relies on its caller's
    clean-up alone.
    """
    return os.getpid() if threading.current_thread() is threading.main_thread() else 0


def _key() -> tuple[Any, ...]:
    return (os.getpid(), tuple(sys.path), tuple(sorted(settled(os.environ).items())))


def _current() -> _Zygote | None:
    """The zygote for this process's settings, started when needed; None if it cannot start."""
    global _zygote
    key = _key()
    if _zygote is not None and (_zygote.key != key or _zygote.process.poll() is not None):
        _close_zygote()
    if _zygote is None and key not in _failed:
        _zygote = _start(key)
        if _zygote is None:
            _failed.add(key)
    return _zygote


def _start(key: tuple[Any, ...]) -> _Zygote | None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    command = [sys.executable, "-P", "-c", _BOOTSTRAP, json.dumps([p for p in sys.path if p])]
    try:
        process = subprocess.Popen(
            [*command, str(theirs.fileno()), str(death_wish())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(theirs.fileno(),),
        )
    except OSError as error:
        logger.debug("no zygote (%s): workers start as fresh interpreters", error)
        ours.close()
        return None
    finally:
        theirs.close()
    ours.settimeout(_READY_SECONDS)
    try:
        ready = ours.recv(_MESSAGE) == b"ready"
    except OSError:  # a timeout included
        ready = False
    if not ready:
        process.kill()
        said = process.communicate()[1].decode("utf-8", errors="replace").strip()
        logger.debug("the zygote did not start (%s): fresh interpreters", said[-300:])
        ours.close()
        return None
    if process.stderr is not None:  # PIPE above: read only if it failed to start
        process.stderr.close()
    return _Zygote(process, ours, key)


@atexit.register
def _close_zygote() -> None:
    global _zygote
    if _zygote is not None and _zygote.owner == os.getpid():
        _zygote.close()
    _zygote = None


# -- the zygote process ---------------------------------------------------------------------


def serve(control_fd: int, parent: int = 0) -> int:
    """The zygote's loop: fork a worker per request until the parent closes the socket.

    Args:
        control_fd: The socket the parent sends its requests on.
        parent: The pid to die with (0: none, see :func:`death_wish`); each worker dies
            with the zygote in turn, so no worker outlives the caller.
    """
    import importlib

    from tfcompress._lifetime import die_with_parent, limit_memory, no_core_files
    from tfcompress._limits import CHILD_MEMORY

    no_core_files()
    # Inherited by every worker it forks: an allocation the data sizes ends at the limit.
    limit_memory(CHILD_MEMORY.value())  # checked by the parent before it started us
    if parent:
        die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent to handle
    control = socket.socket(fileno=control_fd)
    for module in PRELOAD:
        with contextlib.suppress(ImportError):  # absent: the worker resolves its runtime
            importlib.import_module(module)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda number, frame: None)  # wakes the select below
    statuses: dict[int, int] = {}  # worker pid -> the write end of its status pipe
    control.sendall(b"ready")
    _silence_stderr()  # the parent stops reading it; each worker gets a stderr of its own
    listening = True
    zygote = os.getpid()
    while listening or statuses:
        readable, _, _ = select.select([control, wake_read] if listening else [wake_read], [], [])
        if wake_read in readable:
            os.read(wake_read, 4096)
            _reap(statuses)
        if listening and control in readable:
            message, fds, _, _ = socket.recv_fds(control, _MESSAGE, 9)
            if not message:  # the parent closed its end: report the last exits, then leave
                listening = False
                continue
            *pipes, stderr, folder, status = fds
            try:
                pid = os.fork()
            except OSError as error:  # out of processes or memory: the parent is told
                for fd in fds:
                    os.close(fd)
                control.sendall(f"fork failed: {error.strerror}".encode()[:_MESSAGE])
                continue
            if pid == 0:
                zygotes = [control.fileno(), wake_read, wake_write, status, *statuses.values()]
                _become_worker(pipes, stderr, folder, zygotes, zygote)
            for fd in (*pipes, stderr, folder):
                os.close(fd)
            statuses[pid] = status
            control.sendall(str(pid).encode())
    return 0


def _reap(statuses: dict[int, int]) -> None:
    while statuses:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = statuses.pop(pid, -1)
        if fd >= 0:
            with contextlib.suppress(OSError):  # the parent stopped listening
                os.write(fd, f"{os.waitstatus_to_exitcode(status)}\n".encode())
            os.close(fd)


def _silence_stderr() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)


def _become_worker(
    pipes: list[int], stderr: int, folder: int, zygotes: list[int], zygote: int
) -> None:
    """In the forked child: drop the zygote's state, run the worker's loop, never return.

    The worker dies with the zygote (``zygote``, its pid), which dies with the caller.
    """
    code = 1
    try:
        os.fchdir(folder)  # the caller's working folder when it asked
        os.close(folder)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as a fresh interpreter
        for fd in zygotes:  # the zygote's socket and the other workers' status pipes
            os.close(fd)
        os.dup2(stderr, 2)
        os.close(stderr)
        if "numpy.random" in sys.modules:  # preloaded: seed it anew, as a fresh interpreter
            sys.modules["numpy.random"].seed()
        from tfcompress.bench._worker import main

        code = main(["worker", str(zygote), *(str(fd) for fd in pipes)])
    except BaseException:  # a worker's own failure: its last words, then its exit status
        traceback.print_exc()
        sys.stderr.flush()
    finally:
        os._exit(code)
