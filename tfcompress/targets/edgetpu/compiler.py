"""Run Coral's ``edgetpu_compiler`` on a ``.tflite`` and keep what it made and said.

The compiler runs in a temporary folder under the one time limit and the one memory limit,
in a worker process (:func:`tfcompress._child.program.run_program`) that kills everything
the compiler started before the call returns, daemons included, and reads its log capped.
The compiler is the user's program (``--compiler``): tfcompress does not sandbox it, but it
bounds it. The compiled ``*_edgetpu.tflite`` comes back as bytes next to the parsed log
(:class:`CompilerRun`) only if it is a regular file of that folder that the ``.tflite``
reader validates; nothing is written next to the input. A failure, a refusal or a hang is
one typed error (:class:`EdgeTPUCompilerError`) that quotes the compiler's own line.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfcompress._files import file_kind, write_bytes_atomic
from tfcompress._lifetime import last_words
from tfcompress.errors import (
    BackendUnavailableError,
    ChildTimeoutError,
    ConversionError,
    NativeCrashError,
)
from tfcompress.targets.edgetpu.compiler_log import CompilerLog, parse_compiler_log

logger = logging.getLogger(__name__)
logger.addHandler(logging.NullHandler())

COMPILER_NAME = "edgetpu_compiler"

_MAX_OUTPUT_BYTES = 1 << 30

_INSTALL_HINT = (
    "install it from Coral's apt repository (https://coral.ai/docs/edgetpu/compiler/; x86-64 "
    "Linux only) or pass its path (--compiler PATH)"
)


class EdgeTPUCompilerError(ConversionError):
    """``edgetpu_compiler`` failed, refused the model, or ran past its time limit.

    Attributes:
        log: The parsed log of the run (None when it printed nothing).
        timed_out: True when the run was stopped at its time limit.
    """

    def __init__(self, message: str, *, log: CompilerLog | None = None, timed_out: bool = False):
        super().__init__(message)
        self.log = log
        self.timed_out = timed_out


@dataclass(frozen=True)
class CompilerRun:
    """One successful ``edgetpu_compiler`` run.

    Attributes:
        log: The compiler's summary and operator table, parsed.
    """

    log: CompilerLog
    compiled: bytes = field(repr=False)
    compiler: str
    seconds: float

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Write the compiled model atomically to ``path`` (name it ``*_edgetpu.tflite``).

        Raises:
            OutputExistsError: ``path`` exists and ``overwrite`` is False.
        """
        return write_bytes_atomic(path, self.compiled, overwrite=overwrite)

    def to_dict(self) -> dict[str, Any]:
        """The parsed log plus the compiler path, wall time and compiled size, for JSON."""
        return {
            **self.log.to_dict(),
            "compiler": self.compiler,
            "seconds": round(self.seconds, 3),
            "compiled_bytes": len(self.compiled),
        }

    def __str__(self) -> str:
        return str(self.log)


def find_compiler(compiler: str | os.PathLike[str] | None = None) -> str | None:
    """The path of ``compiler`` (a path or a name on PATH), else of ``edgetpu_compiler`` on PATH.

    None when ``compiler`` is None and PATH has none.

    Raises:
        BackendUnavailableError: ``compiler`` was given but is not an executable file.
    """
    if compiler is None:
        return shutil.which(COMPILER_NAME)
    given = os.fspath(compiler)
    found = shutil.which(given)
    if found is None:
        raise BackendUnavailableError(
            f"{given}: not an executable edgetpu_compiler; pass the path of the compiler "
            f"or {_INSTALL_HINT}."
        )
    return found


def compile_for_edgetpu(
    model: Any,
    *,
    compiler: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
) -> CompilerRun:
    """Compile a full-int8 ``.tflite`` with ``edgetpu_compiler -s`` and parse its verdict.

    ``model``: a ``.tflite`` path, its bytes, or a :class:`~tfcompress.models.TFLiteModel`;
    ``compiler`` None looks up ``edgetpu_compiler`` on PATH; ``timeout``: seconds before the
    run is stopped with everything it started (default: the one time limit).

    Raises:
        BackendUnavailableError: No compiler on PATH, or ``compiler`` is not executable.
        EdgeTPUCompilerError: The compiler exited with an error, refused the model (its
            line is quoted), wrote no ``*_edgetpu.tflite``, or ran past ``timeout``.
        InvalidInputError: ``timeout`` (or ``TFCOMPRESS_TIMEOUT``) is not a positive number
            of seconds, a week at most.
        ModelLoadError: ``model`` is not a readable ``.tflite``.
    """
    from tfcompress._limits import CHILD_TIMEOUT
    from tfcompress.models.formats import read_tflite_input
    from tfcompress.targets.edgetpu.linter import TFLITE_ONLY

    limit = CHILD_TIMEOUT.given(timeout)
    executable = find_compiler(compiler)
    if executable is None:
        raise BackendUnavailableError(f"edgetpu_compiler not installed: {_INSTALL_HINT}.")
    content, source, _ = read_tflite_input(model, TFLITE_ONLY)
    stem = Path(source).stem if source != "<bytes>" else "model"
    with tempfile.TemporaryDirectory(prefix="tfcompress-edgetpu-") as work:
        folder = Path(work)
        (folder / f"{stem}.tflite").write_bytes(content)
        command = [executable, "-s", "-o", str(folder), f"{stem}.tflite"]
        logger.info("running %s", " ".join(command))
        # Held open across the run: the output is read relative to this very folder, even
        # if the compiler renames or replaces the path.
        folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            started = time.perf_counter()
            text, returncode = run_supervised(command, cwd=folder, timeout=limit, source=source)
            seconds = time.perf_counter() - started
            log = parse_compiler_log(text)
            if returncode != 0 or not log.succeeded:
                # the compiler's own line naming the failure, else the last it printed
                reason = last_words((log.error or text).encode(), 300) or "it printed nothing"
                status = f"exit status {returncode}" if returncode != 0 else "no successful compile"
                raise EdgeTPUCompilerError(
                    f"{source}: edgetpu_compiler failed ({status}): {reason}{_fix(log)}", log=log
                )
            compiled = _read_output(folder_fd, f"{stem}_edgetpu.tflite", source=source, log=log)
        finally:
            os.close(folder_fd)
        return CompilerRun(log, compiled, executable, seconds)


def run_supervised(
    command: list[str], *, cwd: Path, timeout: float, source: str
) -> tuple[str, int]:
    """Run the compiler in its worker; its log (stdout and stderr, 1 MiB at most) and status.

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
        raise EdgeTPUCompilerError(
            f"{source}: edgetpu_compiler's worker ended unexpectedly ({crash}).", log=None
        ) from crash
    text = done["output"].decode("utf-8", errors="replace")
    if done.get("error"):
        raise BackendUnavailableError(
            f"{command[0]}: cannot be started ({done['error']}); {_INSTALL_HINT}."
        )
    if done["timed_out"] or done["returncode"] is None:
        raise EdgeTPUCompilerError(
            f"{source}: edgetpu_compiler did not finish within {timeout:g} s and was "
            "stopped with everything it started; raise the time limit (--timeout or "
            "TFCOMPRESS_TIMEOUT=SECONDS) or compile a smaller model.",
            log=parse_compiler_log(text),
            timed_out=True,
        )
    if done.get("stray"):
        logger.info("stopped %s process(es) the compiler left running", done["stray"])
    return text, int(done["returncode"])


def _read_output(folder_fd: int, name: str, *, source: str, log: CompilerLog) -> bytes:
    """The compiled model, read only if the compiler left it as a file of its own.

    Accepted: a regular file of the work folder (opened relative to it, never through a
    link), not a hard link to a file elsewhere, that the ``.tflite`` reader validates.
    """
    from tfcompress.errors import ModelLoadError
    from tfcompress.models.tflite_file import read_tflite

    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder_fd)
    except FileNotFoundError:
        raise EdgeTPUCompilerError(
            f"{source}: edgetpu_compiler reported success but wrote no {name}; run it by "
            "hand to see why.",
            log=log,
        ) from None
    except OSError as failure:  # ELOOP: a symbolic link
        raise EdgeTPUCompilerError(
            f"{source}: edgetpu_compiler left {name} as something tfcompress does not read "
            f"({failure.strerror}): only a regular file it wrote in its work folder is "
            "accepted; check the compiler.",
            log=log,
        ) from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            kind = "a hard link" if stat.S_ISREG(info.st_mode) else file_kind(info.st_mode)
            raise EdgeTPUCompilerError(
                f"{source}: edgetpu_compiler left {name} as {kind}, not a file of its own "
                "in its work folder; tfcompress accepts only that; check the compiler.",
                log=log,
            )
        compiled = handle.read(_MAX_OUTPUT_BYTES + 1)
    if len(compiled) > _MAX_OUTPUT_BYTES:
        raise EdgeTPUCompilerError(
            f"{source}: edgetpu_compiler wrote a {name} over {_MAX_OUTPUT_BYTES} bytes, more "
            "than any Edge TPU model; check the compiler.",
            log=log,
        )
    try:
        read_tflite(compiled, source=name).validate(source=name)
    except ModelLoadError as error:
        raise EdgeTPUCompilerError(
            f"{source}: edgetpu_compiler wrote a {name} that is not a valid .tflite ({error}); "
            "check the compiler.",
            log=log,
        ) from error
    return compiled


def _fix(log: CompilerLog) -> str:
    if log.unsupported_op_version is not None:
        op, version = log.unsupported_op_version
        return (
            f"; compiler {log.compiler_version or '16'} predates {op} version {version}: "
            "convert with an older TensorFlow (see docs/edgetpu.md, 'Op versions')"
        )
    return ""
