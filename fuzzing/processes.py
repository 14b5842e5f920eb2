"""Run one fuzz case as a process of its own: environment variables, signals, pytest.

The fuzz worker runs most cases in-process (fast). A case that sets environment variables,
is interrupted by a signal or runs ``python -m pytest`` gets a fresh process instead, as a
user's shell would start it: in a session of its own (every process it starts can be
found, and killed, afterwards), in the case folder, with a ``TMPDIR`` of its own that the
run must leave empty.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fuzzing.cases import Case

EXIT_GRACE_S = 3.0  # children a run ended may take this long to go (PR_SET_PDEATHSIG)


def run_process(case: Case, timeout: float) -> dict[str, Any]:
    """Run ``case`` in a fresh process and say how it ended, and what it left behind.

    Returns:
        The worker's reply keys (``exit_code``, ``stderr``, ``seconds``, ``signal`` or
        ``hung``), plus ``left_processes`` (pids still alive in its session, now killed)
        and ``left_temp`` (names left in its TMPDIR).
    """
    folder = Path(case.folder)
    tmp = folder / "tmpdir"
    tmp.mkdir(exist_ok=True)
    root = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    env = {
        **os.environ,
        "PYTHONPATH": path,
        "TMPDIR": str(tmp),
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONDONTWRITEBYTECODE": "1",
        **dict(case.env or ()),
    }
    module = "pytest" if case.runner == "pytest" else "tfcompress"
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", module, *case.argv],
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
            preexec_fn=None if case.memory_cap is None else _cap_memory(case.memory_cap),
        )
        sent = _interrupt(process, case, start, timeout) if case.interrupt else None
        try:
            code = process.wait(max(1.0, timeout - (time.perf_counter() - start)))
            hung = False
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            code = process.wait()
            hung = True
        seconds = time.perf_counter() - start
        left = _left_in_session(process.pid)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    reply: dict[str, Any] = {
        "seconds": seconds,
        "stdout": stdout,
        # pytest reports on stdout: its whole output is what a user reads
        "stderr": stdout + stderr if case.runner == "pytest" else stderr,
        "left_processes": left,
        "left_temp": sorted(p.name for p in tmp.iterdir()),
        "signal_sent_at": sent,
    }
    if hung:
        reply["hung"] = True
    elif code < 0:
        reply["signal"] = signal.Signals(-code).name
    else:
        reply["exit_code"] = code
    return reply


def _cap_memory(limit: int) -> Any:
    def cap() -> None:  # in the CLI's process, before it runs Python
        import resource

        # The soft limit only: the CLI's own children set theirs (TFCOMPRESS_MEMORY_LIMIT).
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))

    return cap


def _interrupt(
    process: subprocess.Popen[bytes], case: Case, start: float, timeout: float
) -> float | None:
    """Send the case's signal after its delay, once the CLI catches it; None if it ended."""
    assert case.interrupt is not None
    name, delay = case.interrupt
    number = signal.Signals[name]
    while process.poll() is None and time.perf_counter() - start < timeout:
        # The interpreter's own start-up (before tfcompress installs its handlers, a few
        # tens of milliseconds) is no one's to clean up: wait for the handler to be there.
        if time.perf_counter() - start >= delay and _catches(process.pid, number):
            with contextlib.suppress(ProcessLookupError):
                if name == "SIGINT":  # Ctrl-C: the terminal signals the whole process group
                    os.killpg(process.pid, number)
                else:  # kill PID, a service manager's stop
                    os.kill(process.pid, number)
            return time.perf_counter() - start
        time.sleep(0.01)
    return None


def _catches(pid: int, number: int) -> bool:
    """Whether process ``pid`` has a handler installed for signal ``number`` (Linux)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) & (1 << (number - 1)))
    except (OSError, ValueError):
        return False
    return True  # no such line: not Linux's /proc; send it at the delay


def _session_members(session: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        # state, ppid, pgrp, session: a zombie is dead already
        if fields[0] != "Z" and int(fields[3]) == session:
            members.append(int(entry.name))
    return members


def _left_in_session(session: int) -> list[int]:
    """Processes of the run's session still alive after a grace period; killed."""
    deadline = time.perf_counter() + EXIT_GRACE_S
    members = _session_members(session)
    while members and time.perf_counter() < deadline:
        time.sleep(0.1)
        members = _session_members(session)
    for pid in members:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return members
