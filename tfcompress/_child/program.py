"""Someone else's program (the Edge TPU compiler) in a worker, so nothing it starts outlives it.

:func:`run_program` runs a command in a one-shot :class:`~tfcompress._child.Worker`, under
the one time limit and the one memory limit (the program inherits the worker's
``RLIMIT_DATA``; the worker dies with its caller). There :func:`supervise` makes the
worker the *child subreaper* of everything the program starts (Linux:
``prctl(PR_SET_CHILD_SUBREAPER)``): whatever it forks, even a daemon that double-forks into
its own session, is re-parented to the worker instead of to init when its parent exits.
When the program exits, or runs past the time limit and is killed, the worker kills the
program's process group and then every process re-parented to it, until none is left, and
only then answers. The program's output (stdout and stderr together) is read as it comes,
keeping the first :data:`MAX_OUTPUT_BYTES` (a flood is read and dropped, so the program
never blocks on a full pipe). Elsewhere than Linux only the program's process group is
killed.

Example:
    >>> done = run_program(["edgetpu_compiler", "-s", "m.tflite"], cwd=Path("."),
    ...                    timeout=180)  # doctest: +SKIP
    >>> done["returncode"], done["timed_out"]  # doctest: +SKIP
    (0, False)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["MAX_OUTPUT_BYTES", "run_program", "supervise"]

MAX_OUTPUT_BYTES = 1 << 20  # a compiler's log is kilobytes; a flood is read and dropped
GRACE_S = 30.0  # the worker's own clean-up after the limit; past it the worker is killed
_PR_SET_CHILD_SUBREAPER = 36
_ROUNDS = 200  # kill-and-reap rounds: each kills every child left, orphans arrive next round


def run_program(
    command: Sequence[str], *, cwd: Path, timeout: float | None = None
) -> dict[str, Any]:
    """Run ``command`` in ``cwd`` in a worker, under the time and memory limits.

    Args:
        command: The program and its arguments.
        cwd: The folder it runs in.
        timeout: Its time limit in seconds; None: ``TFCOMPRESS_TIMEOUT`` or its default.

    Returns:
        ``{"output": bytes, "returncode": int | None, "timed_out": bool, "stray": int}``:
        its output (at most :data:`MAX_OUTPUT_BYTES`), its exit status (None when it was
        stopped), whether it ran past the limit, and how many processes it left that were
        killed; ``"error"`` (the OS's words) instead when it could not be started.

    Raises:
        ChildTimeoutError: The worker itself outlived the limit by :data:`GRACE_S`.
        NativeCrashError: The worker died.
    """
    from tfcompress._child.worker import Worker
    from tfcompress._limits import CHILD_TIMEOUT

    limit = CHILD_TIMEOUT.given(timeout)
    with Worker(fork="running") as worker:
        return worker.call(
            "tfcompress._child.program:supervise",
            list(command),
            str(cwd),
            limit,
            what=f"running {Path(command[0]).name}",
            timeout=limit + GRACE_S,
        )


def supervise(command: list[str], cwd: str, timeout: float) -> dict[str, Any]:
    """In the worker: run ``command``, read its output, then kill all it left; the verdict."""
    _become_subreaper()
    verdict: dict[str, Any] = {"output": b"", "returncode": None, "timed_out": False}
    verdict["stray"] = 0
    try:
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: killed whole
        )
    except OSError as error:
        return {**verdict, "error": f"{error.strerror or error}"}
    output = bytearray()
    reader = threading.Thread(target=_drain, args=(proc.stdout, output), daemon=True)
    reader.start()
    try:
        verdict["returncode"] = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        verdict["timed_out"] = True
    finally:
        verdict["stray"] = _kill_everything(proc.pid)
        with contextlib.suppress(ChildProcessError):
            proc.wait()
    reader.join(timeout=5)  # every writer is dead: the pipe is at its end
    verdict["output"] = bytes(output)
    return verdict


def _drain(stream: Any, kept: bytearray) -> None:
    while chunk := stream.read1(1 << 16):
        room = MAX_OUTPUT_BYTES - len(kept)
        if room > 0:  # a flood is read and dropped, so the writer never blocks
            kept += chunk[:room]


def _become_subreaper() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc; empty where there is no /proc)."""
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue  # it exited meanwhile
        # Field 4 (ppid) follows the command name, which may hold spaces: split after ')'.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            found.append(int(entry))
    return found


def _kill_everything(group: int) -> int:
    """Kill the program's group, then every process left under this one; count them."""
    from tfcompress._child.zygote import reap

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)
    me, stray = os.getpid(), 0
    for _ in range(_ROUNDS):
        reap({})
        left = _children(me)
        if not left:
            return stray
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            stray += 1
        time.sleep(0.01)
    return stray
