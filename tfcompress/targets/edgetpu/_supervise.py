"""Supervisor: run a compiler so that nothing it starts outlives it.

Run by :mod:`tfcompress.targets.edgetpu.compiler` as
``python -P _supervise.py TIMEOUT_S -- COMMAND...``. The command's stdout and stderr go to
this process's stdout; one JSON verdict line goes to this process's stderr at the end::

    {"returncode": 0, "timed_out": false, "stray": 0}

On Linux the supervisor makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``):
whatever the command forks, even a daemon that double-forks into its own session, is
re-parented to the supervisor instead of to init when its parent exits. When the command
exits (or runs past the time limit and is killed), the supervisor kills its process group
and then every process re-parented to it, until none is left, and only then exits: the
pipes those processes held close, and nothing started by the compiler keeps running.
Elsewhere only the command's process group is killed.

The file is a bare script (no tfcompress import) so that it starts in tens of milliseconds.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time

_PR_SET_CHILD_SUBREAPER = 36
_ROUNDS = 200  # kill-and-reap rounds: each kills every child left, orphans arrive next round


def _become_subreaper() -> bool:
    if not sys.platform.startswith("linux"):
        return False
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
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue  # it exited meanwhile
        # Field 4 (ppid) follows the command name, which may hold spaces: split after ')'.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            found.append(int(entry))
    return found


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _kill_everything(group: int) -> int:
    """Kill the command's group, then every process left under this one; count them."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)
    me, stray = os.getpid(), 0
    for _ in range(_ROUNDS):
        _reap()
        left = _children(me)
        if not left:
            return stray
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            stray += 1
        time.sleep(0.01)
    return stray


def main(argv: list[str]) -> int:
    """Run the command after ``--`` with the time limit in ``argv[1]``; print the verdict."""
    if len(argv) < 4 or argv[2] != "--":
        print("usage: _supervise.py TIMEOUT_S -- COMMAND...", file=sys.stderr)
        return 2
    timeout = float(argv[1])
    _become_subreaper()
    verdict: dict[str, object] = {"returncode": None, "timed_out": False, "stray": 0}
    try:
        proc = subprocess.Popen(
            argv[3:],
            stdin=subprocess.DEVNULL,
            stdout=sys.stdout.fileno(),
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: killed whole
        )
    except OSError as error:
        verdict["error"] = f"{error.strerror or error}"
        print(json.dumps(verdict), file=sys.stderr, flush=True)
        return 0
    try:
        verdict["returncode"] = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        verdict["timed_out"] = True
    finally:
        verdict["stray"] = _kill_everything(proc.pid)
        with contextlib.suppress(ChildProcessError):
            proc.wait()
    print(json.dumps(verdict), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
