"""Run Coral's ``edgetpu_compiler`` on a ``.tflite`` and keep what it made and said.

The compiler runs in a temporary folder under the one time limit, in a worker process
(:mod:`tfcompress._child.program`) that kills everything the compiler started before the
call returns, daemons included. The compiled ``*_edgetpu.tflite`` comes back as bytes next
to the parsed log (:class:`CompilerRun`) only if it is a regular file of that folder that
the ``.tflite`` reader validates, and nothing is written next to the input. A failure, a
refusal or a hang is one typed error (:class:`EdgeTPUCompilerError`) that quotes the
compiler's own line.
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

from tfcompress._files import file_kind
from tfcompress.errors import BackendUnavailableError, ConversionError
from tfcompress.targets.edgetpu.compiler_log import CompilerLog, parse_compiler_log
from tfcompress.targets.edgetpu.compiler_process import run_supervised

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
        compiled: The bytes of the compiled ``*_edgetpu.tflite``.
        compiler: The executable that ran.
        seconds: Wall time of the run.
    """

    log: CompilerLog
    compiled: bytes = field(repr=False)
    compiler: str
    seconds: float

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Write the compiled model.

        Args:
            path: Where to write it (name it ``*_edgetpu.tflite``).
            overwrite: Replace an existing file.

        Returns:
            The path written.

        Raises:
            OutputExistsError: ``path`` exists and ``overwrite`` is False.

        Example:
            >>> run.save("model_int8_edgetpu.tflite")  # doctest: +SKIP
        """
        from tfcompress.errors import OutputExistsError

        out = Path(path)
        if out.exists() and not overwrite:
            raise OutputExistsError(f"{out}: exists; pass overwrite=True to replace it.")
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_bytes(self.compiled)
        tmp.replace(out)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The parsed log plus the compiler path, wall time and compiled size.

        Returns:
            A JSON-ready dict.
        """
        return {
            **self.log.to_dict(),
            "compiler": self.compiler,
            "seconds": round(self.seconds, 3),
            "compiled_bytes": len(self.compiled),
        }

    def __str__(self) -> str:
        return str(self.log)


def find_compiler(compiler: str | os.PathLike[str] | None = None) -> str | None:
    """Locate ``edgetpu_compiler``.

    Args:
        compiler: A path (or a name to look up on PATH) given by the user; None looks up
            ``edgetpu_compiler`` on PATH.

    Returns:
        The executable's path, or None when ``compiler`` is None and PATH has none.

    Raises:
        BackendUnavailableError: ``compiler`` was given but is not an executable file.

    Example:
        >>> find_compiler() is None  # on a machine without Coral's compiler  # doctest: +SKIP
        True
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

    Args:
        model: A ``.tflite`` path, its bytes, or a :class:`~tfcompress.models.TFLiteModel`.
        compiler: The compiler to run; None looks up ``edgetpu_compiler`` on PATH.
        timeout: Seconds before the run is stopped with everything it started (default:
            the one time limit, ``--timeout`` or ``TFCOMPRESS_TIMEOUT``).

    Returns:
        The parsed log and the compiled model's bytes.

    Raises:
        BackendUnavailableError: No compiler on PATH, or ``compiler`` is not executable.
        EdgeTPUCompilerError: The compiler exited with an error, refused the model (its
            line is quoted), wrote no ``*_edgetpu.tflite``, or ran past ``timeout``.
        InvalidInputError: ``timeout`` (or ``TFCOMPRESS_TIMEOUT``) is not a positive number
            of seconds, a week at most.
        ModelLoadError: ``model`` is not a readable ``.tflite``.

    Example:
        >>> run = compile_for_edgetpu("model_int8.tflite", timeout=60)  # doctest: +SKIP
        >>> print(run.log)  # doctest: +SKIP
    """
    from tfcompress._limits import CHILD_TIMEOUT
    from tfcompress.targets.edgetpu.linter import read_model

    limit = CHILD_TIMEOUT.given(timeout)
    executable = find_compiler(compiler)
    if executable is None:
        raise BackendUnavailableError(f"edgetpu_compiler not installed: {_INSTALL_HINT}.")
    content, source = read_model(model)
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
                reason = _short(log.error or _last_line(text) or "it printed nothing")
                status = f"exit status {returncode}" if returncode != 0 else "no successful compile"
                raise EdgeTPUCompilerError(
                    f"{source}: edgetpu_compiler failed ({status}): {reason}{_fix(log)}", log=log
                )
            compiled = _read_output(folder_fd, f"{stem}_edgetpu.tflite", source=source, log=log)
        finally:
            os.close(folder_fd)
        return CompilerRun(log, compiled, executable, seconds)


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


def _short(text: str) -> str:
    return text if len(text) <= 300 else text[:297] + "..."


def _last_line(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else None


def _fix(log: CompilerLog) -> str:
    if log.unsupported_op_version is not None:
        op, version = log.unsupported_op_version
        return (
            f"; compiler {log.compiler_version or '16'} predates {op} version {version}: "
            "convert with an older TensorFlow (see docs/edgetpu.md, 'Op versions')"
        )
    return ""
