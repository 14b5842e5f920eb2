"""Workers forked from a process that has imported what they need already.

A :class:`~tfcompress._child.Worker` (a measurement runner holding one model, a load
probe) is a process of its own, so a crash or a hang of the native runtime costs only that
worker. Starting one as a fresh interpreter costs a third of a second (Python, NumPy,
tfcompress's runtime modules, LiteRT; 357 ms against 52 ms forked per runner,
benchmarks/isolation_cost.py) before it loads its model; a benchmark of 20 artifacts on two
backends starts 40. So on Linux, each process that starts workers keeps a *zygote*: a child
that imported all of that once (:data:`PRELOAD`, and what the callers add with
:func:`preload`) and forks one worker per request, as Android starts its apps and
``multiprocessing``'s forkserver its processes. Every worker is still a process of its
own; only its start is cheaper.

The zygote is private to tfcompress (``multiprocessing``'s forkserver is one per program
and would run the caller's ``__main__`` again). It starts with the caller's environment,
import path and memory limit, and a caller that changed either (or forked) gets a fresh
zygote, so a worker always starts from what a fresh interpreter would have seen (pytest's
``PYTEST_CURRENT_TEST`` aside: :func:`~tfcompress._child.process.settled`); each worker
starts in the caller's working folder of the moment (sent as an open folder, so any path
works).
The zygote reaps its workers and reports each exit status (a signal is ``-N``, as
:class:`subprocess.Popen` reports it), which the caller reads from a pipe of its own.
On Linux the zygote dies with the caller and each worker with the zygote
(:mod:`tfcompress._lifetime`): nothing keeps working after the caller is gone.
Where there is no zygote (not Linux, ``TFCOMPRESS_NO_ZYGOTE=1``, or it could not start),
:func:`fork_child` returns None and the caller starts a fresh interpreter.
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
from typing import Any

from tfcompress._child.process import Child, death_wish, pipes, settled, stderr_file
from tfcompress.errors import TFCompressError

__all__ = ["NO_ZYGOTE", "PRELOAD", "Forked", "fork_child", "preload", "serve"]

logger = logging.getLogger(__name__)

#: What every zygote imports before its first fork; :func:`preload` adds to it.
PRELOAD = ["numpy", "tfcompress._child.serve"]
#: Set to 1 to start every worker as a fresh interpreter (a backend that cannot be forked).
NO_ZYGOTE = "TFCOMPRESS_NO_ZYGOTE"
_BOOTSTRAP = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from tfcompress._child.zygote import serve; "
    "sys.exit(serve(*map(int, sys.argv[2:5]), json.loads(sys.argv[5])))"
)
_READY_SECONDS = 60.0  # the zygote's imports (or one fork), on a busy machine
_MESSAGE = 64


def preload(*modules: str) -> None:
    """Have zygotes started from now on import ``modules`` before their first fork.

    What a kind of worker needs (the measurement runner's modules, LiteRT) is named by the
    package that starts it, when it is imported; a module a zygote lacks is imported by the
    worker itself.

    Example:
        >>> preload("numpy")
    """
    for module in modules:
        if module not in PRELOAD:
            PRELOAD.append(module)


class Forked:
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

    def fork(self, fds: Sequence[int], stderr: int) -> Forked:
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
        return Forked(int(answer), status_read)

    def close(self) -> None:
        # The zygote reads the end of its socket, waits for its workers still running
        # (reporting their exits), then exits; subprocess reaps it later, unwaited for.
        self.control.close()


_lock = threading.Lock()
_zygote: _Zygote | None = None
_failed: set[tuple[Any, ...]] = set()  # settings under which a zygote could not start


def fork_child(*, memory: int, start: bool = True) -> Child | None:
    """A worker forked from this process's zygote, or None where there is none.

    Args:
        memory: The memory limit the caller checked (the zygote read the same environment,
            so the two agree); kept for messages.
        start: Start the zygote if none runs (False: fork only from one that runs, for a
            single short job that a zygote's start would slow down).

    Returns:
        The worker, ready for requests; None: not Linux, ``TFCOMPRESS_NO_ZYGOTE=1``, or no
        zygote (it could not start, or ``start`` is False): the caller starts a fresh
        interpreter instead.
    """
    if sys.platform != "linux" or os.environ.get(NO_ZYGOTE, "") not in {"", "0"}:
        return None
    with _lock:
        zygote = _current(start=start)
        if zygote is None:
            return None
        (parent_out, child_in), (child_out, parent_in) = pipes()
        stderr = stderr_file()
        try:
            process = zygote.fork((child_in, child_out), stderr.fileno())
        except OSError as error:  # it died: fresh interpreters from now on
            logger.debug("the zygote failed to fork (%s): fresh interpreters", error)
            _failed.add(zygote.key)
            close_zygote()
            for fd in (parent_out, parent_in):
                os.close(fd)
            stderr.close()
            return None
        finally:
            os.close(child_in)
            os.close(child_out)
    return Child(process, parent_out, parent_in, stderr, memory=memory)


def _key() -> tuple[Any, ...]:
    return (os.getpid(), tuple(sys.path), tuple(sorted(settled(os.environ).items())))


def _current(*, start: bool = True) -> _Zygote | None:
    """The zygote for this process's settings, started when needed; None if it cannot start."""
    global _zygote
    key = _key()
    if _zygote is not None and (_zygote.key != key or _zygote.process.poll() is not None):
        close_zygote()
    if _zygote is None and start and key not in _failed:
        _zygote = _start(key)
        if _zygote is None:
            _failed.add(key)
    return _zygote


def _start(key: tuple[Any, ...]) -> _Zygote | None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    from tfcompress._limits import CHILD_MEMORY

    command = [sys.executable, "-P", "-c", _BOOTSTRAP, json.dumps([p for p in sys.path if p])]
    try:
        memory = CHILD_MEMORY.value()  # checked by the caller, in the same environment
        process = subprocess.Popen(
            [*command, str(theirs.fileno()), str(death_wish()), str(memory), json.dumps(PRELOAD)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(theirs.fileno(),),
        )
    except (OSError, TFCompressError) as error:
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


def running() -> subprocess.Popen[bytes] | None:
    """This process's zygote, None while none runs (for diagnostics: its pid, whether alive).

    Workers forked from it have it as their parent process; a change of settings (the
    environment, ``sys.path``) retires it and the next worker starts a new one.
    """
    with _lock:
        return None if _zygote is None else _zygote.process


@atexit.register
def close_zygote() -> None:
    """Retire this process's zygote: it exits once its running workers have (at exit too)."""
    global _zygote
    if _zygote is not None and _zygote.owner == os.getpid():
        _zygote.close()
    _zygote = None


# -- the zygote process ---------------------------------------------------------------------


def serve(control_fd: int, parent: int, memory: int, modules: Sequence[str]) -> int:
    """The zygote's loop: fork a worker per request until the parent closes the socket.

    Args:
        control_fd: The socket the parent sends its requests on.
        parent: The pid to die with (0: none, see :func:`~.process.death_wish`); each
            worker dies with the zygote in turn, so no worker outlives the caller.
        memory: Bytes each worker may allocate (inherited: an allocation the data sizes
            ends at the limit).
        modules: What to import before the first fork.
    """
    import importlib

    from tfcompress._child.serve import prepare

    prepare(parent, memory)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent to handle
    control = socket.socket(fileno=control_fd)
    for module in modules:
        with contextlib.suppress(ImportError):  # absent: the worker resolves its runtime
            importlib.import_module(module)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda number, frame: None)  # wakes the select below
    statuses: dict[int, int] = {}  # worker pid -> the write end of its status pipe
    control.sendall(b"ready")
    devnull = os.open(os.devnull, os.O_WRONLY)  # the parent stops reading our stderr; each
    os.dup2(devnull, 2)  # worker gets a stderr of its own
    os.close(devnull)
    listening = True
    zygote = os.getpid()
    while listening or statuses:
        readable, _, _ = select.select([control, wake_read] if listening else [wake_read], [], [])
        if wake_read in readable:
            os.read(wake_read, 4096)
            reap(statuses)
        if listening and control in readable:
            message, fds, _, _ = socket.recv_fds(control, _MESSAGE, 9)
            if not message:  # the parent closed its end: report the last exits, then leave
                listening = False
                continue
            *ends, stderr, folder, status = fds
            try:
                pid = os.fork()
            except OSError as error:  # out of processes or memory: the parent is told
                for fd in fds:
                    os.close(fd)
                control.sendall(f"fork failed: {error.strerror}".encode()[:_MESSAGE])
                continue
            if pid == 0:
                zygotes = [control.fileno(), wake_read, wake_write, status, *statuses.values()]
                _become_worker(ends, stderr, folder, zygotes, zygote)
            for fd in (*ends, stderr, folder):
                os.close(fd)
            statuses[pid] = status
            control.sendall(str(pid).encode())
    return 0


def reap(statuses: dict[int, int]) -> None:
    """Collect every child that has exited; write each one's status to its pipe in ``statuses``."""
    while True:
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


def _become_worker(
    ends: list[int], stderr: int, folder: int, zygotes: list[int], zygote: int
) -> None:
    """In the forked child: drop the zygote's state, answer requests, never return.

    The worker dies with the zygote (``zygote``, its pid), which dies with the caller: a
    fork does not inherit the parent-death signal, so it is asked for again. The memory
    limit and the core-file limit are inherited.
    """
    code = 1
    try:
        from tfcompress._lifetime import die_with_parent

        die_with_parent(zygote)
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
        from tfcompress._child.serve import serve as answer_requests

        code = answer_requests(*ends, role="worker")
    except BaseException:  # a worker's own failure: its last words, then its exit status
        traceback.print_exc()
        sys.stderr.flush()
    finally:
        os._exit(code)
