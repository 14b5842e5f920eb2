"""Run the Edge TPU compiler under its supervisor, reading its log without ever blocking.

The supervisor (``_supervise.py``, a bare script) runs the compiler with the time limit and
kills everything it started before exiting; this side reads the compiler's log (capped) and
the supervisor's one-line verdict, and stops the supervisor itself should it outlive the
limit by :data:`_GRACE_S` seconds.

Example:
    >>> text, status = run_supervised(["edgetpu_compiler", "-s", "m.tflite"], cwd=Path("."),
    ...     timeout_s=180, source="m.tflite")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tfcompress.errors import BackendUnavailableError
from tfcompress.targets.edgetpu.compiler_log import parse_compiler_log

__all__ = ["run_supervised"]

logger = logging.getLogger(__name__)

_SUPERVISOR = Path(__file__).with_name("_supervise.py")
_GRACE_S = 30.0  # the supervisor's own cleanup; it is stopped if it takes longer
_MAX_LOG_BYTES = 1 << 20  # a real log is kilobytes; a flood is read and dropped
_INSTALL_HINT = (
    "install it from Coral's apt repository (https://coral.ai/docs/edgetpu/compiler/; x86-64 "
    "Linux only) or pass its path (--compiler PATH)"
)


def run_supervised(
    command: list[str], *, cwd: Path, timeout_s: float, source: str
) -> tuple[str, int]:
    """Run the compiler under ``_supervise.py``; return its log and exit status.

    The supervisor enforces ``timeout_s`` and kills everything the compiler started before
    it exits; this process reads the log (keeping the first :data:`_MAX_LOG_BYTES`) until
    the supervisor is gone, and stops it too should it outlive the limit by
    :data:`_GRACE_S` seconds.

    Args:
        command: The compiler and its arguments.
        cwd: The work folder it runs in.
        timeout_s: Its time limit.
        source: The model, for messages.

    Returns:
        The log (stdout and stderr, at most 1 MiB) and the compiler's exit status.

    Raises:
        BackendUnavailableError: The compiler cannot be started.
        EdgeTPUCompilerError: It ran past ``timeout_s`` (``timed_out``).
    """
    supervised = [sys.executable, "-P", str(_SUPERVISOR), repr(float(timeout_s)), "--", *command]
    try:
        proc = subprocess.Popen(
            supervised,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        raise BackendUnavailableError(
            f"{command[0]}: cannot be started ({exc.strerror or exc}); {_INSTALL_HINT}."
        ) from exc
    log, verdict_text, finished = _drain(proc, deadline=time.monotonic() + timeout_s + _GRACE_S)
    if not finished:
        _stop(proc)
    proc.wait()
    text = log.decode("utf-8", errors="replace")
    verdict = _verdict(verdict_text)
    if verdict.get("error"):
        raise BackendUnavailableError(
            f"{command[0]}: cannot be started ({verdict['error']}); {_INSTALL_HINT}."
        )
    if not finished or verdict.get("timed_out") or verdict.get("returncode") is None:
        raise _compiler_error(
            f"{source}: edgetpu_compiler did not finish within {timeout_s:g} s and was "
            "stopped with everything it started; raise the time limit or compile a smaller "
            "model.",
            log=parse_compiler_log(text),
            timed_out=True,
        )
    if verdict.get("stray"):
        logger.info("stopped %s process(es) the compiler left running", verdict["stray"])
    return text, int(verdict["returncode"])


def _drain(proc: subprocess.Popen[bytes], *, deadline: float) -> tuple[bytes, bytes, bool]:
    """Read stdout (the log, capped) and stderr (the verdict) until both close or time ends."""
    import selectors

    streams = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    with selectors.DefaultSelector() as selector:
        for stream in streams:
            selector.register(stream, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(streams[proc.stdout]), bytes(streams[proc.stderr]), False
            for key, _ in selector.select(timeout=left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                kept = streams[key.fileobj]
                room = _MAX_LOG_BYTES - len(kept)
                if room > 0:  # a flood is read and dropped, so the writer never blocks
                    kept += chunk[:room]
    return bytes(streams[proc.stdout]), bytes(streams[proc.stderr]), True


def _verdict(text: bytes) -> dict[str, Any]:
    lines = text.decode("utf-8", errors="replace").strip().splitlines()
    try:
        verdict = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        verdict = {}
    return verdict if isinstance(verdict, dict) else {}


def _stop(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        proc.kill()


def _compiler_error(message: str, **details: Any) -> Exception:
    from tfcompress.targets.edgetpu.compiler import EdgeTPUCompilerError

    return EdgeTPUCompilerError(message, **details)
