"""One warm fine-tuning child per process, reused while it lives and the environment is the same.

Starting the child of :mod:`tfcompress.training.isolation` costs an import of TensorFlow and
tfmot and the first trace of a training step: about 7 s of an 11 s fine-tune of a small model
on two cores. A process that fine-tunes more than once (``compress --train`` tries QAT,
pruning and clustering; a notebook or a test session calls :func:`tfcompress.qat` again and
again) hands each later request to the same child (``_child.py --serve``), which resets Keras'
global state between requests. The child exits when its parent closes its standard input
(at exit), or after :data:`~tfcompress.training._child.IDLE_SECONDS` without a request.

What isolation promises is unchanged: a crash kills only the child (the caller sees its
signal, and the next request starts a fresh one); a changed environment (``TF_ENABLE_ONEDNN_OPTS``
and the rest are read when TensorFlow is imported) or a forked caller gets a fresh child.
Only pytest's ``PYTEST_CURRENT_TEST``, which names the running test, is not compared
(:mod:`tfcompress._environ`): a suite of gates that fine-tune shares one child.

Example:
    >>> done = run_warm(request_path, reply_path, os.environ)  # doctest: +SKIP
    >>> done.returncode  # doctest: +SKIP
    0
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, cast

from tfcompress._environ import settled
from tfcompress.training._child import IDLE_SECONDS, SERVE

#: Reuse a child only well inside its idle limit, so it never exits under a request.
_REUSE_SECONDS = IDLE_SECONDS - 30.0
_STDERR_TAIL = 64 * 1024


@dataclass
class _Child:
    process: subprocess.Popen[str]
    env: dict[str, str]
    stderr: IO[bytes]
    folder: tempfile.TemporaryDirectory[str]
    owner: int = field(default_factory=os.getpid)
    last_used: float = field(default_factory=time.monotonic)

    def usable(self, env: Mapping[str, str]) -> bool:
        return (
            self.owner == os.getpid()
            and self.process.poll() is None
            and self.env == settled(env)
            and time.monotonic() - self.last_used < _REUSE_SECONDS
        )

    def close(self) -> None:
        with contextlib.suppress(OSError):  # already gone: nothing to close
            if self.process.stdin is not None:
                self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # mid-request or stuck: it holds nothing of ours
            self.process.kill()
            self.process.wait()
        self.stderr.close()
        self.folder.cleanup()


_lock = threading.Lock()
_warm: _Child | None = None


def run_warm(
    request: Path, reply: Path, env: Mapping[str, str]
) -> subprocess.CompletedProcess[bytes]:
    """Run one request in the warm child (started when there is none fit to reuse).

    Returns:
        ``returncode`` 0 once the child answered, else the child's exit status (negative: the
        signal that killed it); ``stderr`` is what the child wrote during this request.

    Raises:
        OSError: The child could not be started.
    """
    with _lock:
        reused = _reusable(env)
        if reused is not None:
            answered, done = _request(reused, request, reply)
            if answered:
                return done
            # A reused child that ended unanswered may have died while idle (killed, or
            # leaving just as the request came): the request gets a fresh child before it counts.
        return _request(_replace(env), request, reply)[1]


def _reusable(env: Mapping[str, str]) -> _Child | None:
    return _warm if _warm is not None and _warm.usable(env) else None


def _replace(env: Mapping[str, str]) -> _Child:
    """Close this process's child, if any, and start one with ``env``."""
    global _warm
    close_warm_child()
    _warm = _start(env)
    return _warm


def _request(
    child: _Child, request: Path, reply: Path
) -> tuple[bool, subprocess.CompletedProcess[bytes]]:
    """Send one request; whether ``child`` answered, and its exit as a finished process."""
    global _warm
    start = child.stderr.seek(0, os.SEEK_END)
    try:
        stdin, stdout = cast(IO[str], child.process.stdin), cast(IO[str], child.process.stdout)
        stdin.write(f"{request}\t{reply}\n")
        stdin.flush()
        answered = stdout.readline() == "done\n"
    except BrokenPipeError:  # it ended before reading the request
        answered = False
    except BaseException:  # Ctrl-C while it trains: it must not outlive this request
        _warm = None
        child.process.kill()
        child.close()
        raise
    if answered:
        child.last_used = time.monotonic()
        return True, subprocess.CompletedProcess(child.process.args, 0, b"", _since(child, start))
    _warm = None
    code = child.process.wait()
    said = _since(child, start)
    child.close()
    return False, subprocess.CompletedProcess(child.process.args, code, b"", said)


def _start(env: Mapping[str, str]) -> _Child:
    folder = tempfile.TemporaryDirectory(prefix="tfcompress-warm-child-")
    stderr = open(Path(folder.name) / "stderr.log", "w+b")  # noqa: SIM115 - lives with the child
    # The child's temporary files (autograph's sources, its private model copies) go in our
    # folder: a child killed mid-request (Ctrl-C, SIGTERM) cleans up nothing itself.
    scratch = Path(folder.name) / "tmp"
    scratch.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "tfcompress.training._child", SERVE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env={**env, "TMPDIR": str(scratch)},
        text=True,
    )
    return _Child(process, settled(env), stderr, folder)


def _since(child: _Child, offset: int) -> bytes:
    child.stderr.flush()
    end = child.stderr.seek(0, os.SEEK_END)
    child.stderr.seek(max(offset, end - _STDERR_TAIL))
    return child.stderr.read()


@atexit.register
def close_warm_child() -> None:
    """End this process's warm child, if any (at exit; the next fine-tune starts a fresh one).

    Example:
        >>> close_warm_child()
    """
    global _warm
    if _warm is not None and _warm.owner == os.getpid():
        _warm.close()
    _warm = None
