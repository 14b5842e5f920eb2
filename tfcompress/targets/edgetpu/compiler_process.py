"""Run the Edge TPU compiler in a worker, where nothing it starts outlives the call.

The compiler is the user's program (``--compiler``): tfcompress does not sandbox it, but it
bounds it. It runs through :func:`tfcompress._child.program.run_program`, in a child of
its own under the one time limit and the one memory limit, which kills everything the
compiler started before it answers and reads its log capped. This side turns that answer
into the compiler's log and exit status, or one error.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from tfcompress.errors import BackendUnavailableError, ChildTimeoutError, NativeCrashError
from tfcompress.targets.edgetpu.compiler_log import parse_compiler_log

logger = logging.getLogger(__name__)

_INSTALL_HINT = (
    "install it from Coral's apt repository (https://coral.ai/docs/edgetpu/compiler/; x86-64 "
    "Linux only) or pass its path (--compiler PATH)"
)


def run_supervised(
    command: list[str], *, cwd: Path, timeout: float, source: str
) -> tuple[str, int]:
    """Run the compiler in its worker; return its log and exit status.

    Args:
        command: The compiler and its arguments.
        cwd: The work folder it runs in.
        timeout: Its time limit in seconds.
        source: The model, for messages.

    Returns:
        The log (stdout and stderr, at most 1 MiB) and the compiler's exit status.

    Raises:
        BackendUnavailableError: The compiler cannot be started.
        EdgeTPUCompilerError: It ran past ``timeout`` (``timed_out``), or its worker died.
    """
    from tfcompress._child.program import run_program

    try:
        done = run_program(command, cwd=cwd, timeout=timeout)
    except ChildTimeoutError:  # the worker outlived the limit by its grace: killed
        done = {"output": b"", "returncode": None, "timed_out": True}
    except NativeCrashError as crash:
        raise _compiler_error(
            f"{source}: edgetpu_compiler's worker ended unexpectedly ({crash}).", log=None
        ) from crash
    text = done["output"].decode("utf-8", errors="replace")
    if done.get("error"):
        raise BackendUnavailableError(
            f"{command[0]}: cannot be started ({done['error']}); {_INSTALL_HINT}."
        )
    if done["timed_out"] or done["returncode"] is None:
        raise _compiler_error(
            f"{source}: edgetpu_compiler did not finish within {timeout:g} s and was "
            "stopped with everything it started; raise the time limit (--timeout or "
            "TFCOMPRESS_TIMEOUT=SECONDS) or compile a smaller model.",
            log=parse_compiler_log(text),
            timed_out=True,
        )
    if done.get("stray"):
        logger.info("stopped %s process(es) the compiler left running", done["stray"])
    return text, int(done["returncode"])


def _compiler_error(message: str, **details: Any) -> Exception:
    from tfcompress.targets.edgetpu.compiler import EdgeTPUCompilerError

    return EdgeTPUCompilerError(message, **details)
