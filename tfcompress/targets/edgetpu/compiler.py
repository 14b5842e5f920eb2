"""Run Coral's ``edgetpu_compiler`` on a ``.tflite`` and keep what it made and said.

The compiler runs in a temporary folder with a time limit; the compiled
``*_edgetpu.tflite`` comes back as bytes next to the parsed log (:class:`CompilerRun`), and
nothing is written next to the input. A failure, a refusal or a hang is one typed error
(:class:`EdgeTPUCompilerError`) that quotes the compiler's own line.

Example:
    >>> from tfcompress.targets.edgetpu import compile_for_edgetpu
    >>> run = compile_for_edgetpu("model_int8.tflite")  # doctest: +SKIP
    >>> run.log.ops_mapped, run.log.ops_total  # doctest: +SKIP
    (12, 12)
    >>> run.save("model_int8_edgetpu.tflite")  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfcompress.errors import BackendUnavailableError, ConversionError, InvalidInputError
from tfcompress.targets.edgetpu.compiler_log import CompilerLog, parse_compiler_log

__all__ = [
    "COMPILER_NAME",
    "DEFAULT_TIMEOUT_S",
    "CompilerRun",
    "EdgeTPUCompilerError",
    "compile_for_edgetpu",
    "find_compiler",
]

logger = logging.getLogger(__name__)
logger.addHandler(logging.NullHandler())

COMPILER_NAME = "edgetpu_compiler"
DEFAULT_TIMEOUT_S = 180.0
"""The compiler's own compile timer is 180 s ("Started a compilation timeout timer of 180
seconds"); a run that outlives it is stopped."""

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
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> CompilerRun:
    """Compile a full-int8 ``.tflite`` with ``edgetpu_compiler -s`` and parse its verdict.

    Args:
        model: A ``.tflite`` path, its bytes, or a :class:`~tfcompress.models.TFLiteModel`.
        compiler: The compiler to run; None looks up ``edgetpu_compiler`` on PATH.
        timeout_s: Seconds before the run is stopped.

    Returns:
        The parsed log and the compiled model's bytes.

    Raises:
        BackendUnavailableError: No compiler on PATH, or ``compiler`` is not executable.
        EdgeTPUCompilerError: The compiler exited with an error, refused the model (its
            line is quoted), wrote no ``*_edgetpu.tflite``, or ran past ``timeout_s``.
        InvalidInputError: ``timeout_s`` is not positive.
        ModelLoadError: ``model`` is not a readable ``.tflite``.

    Example:
        >>> run = compile_for_edgetpu("model_int8.tflite", timeout_s=60)  # doctest: +SKIP
        >>> print(run.log)  # doctest: +SKIP
    """
    from tfcompress.targets.edgetpu.linter import read_model

    if not timeout_s > 0:
        raise InvalidInputError(f"timeout_s must be positive, got {timeout_s!r}.")
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
        started = time.perf_counter()
        text, returncode = _run(command, cwd=folder, timeout_s=timeout_s, source=source)
        seconds = time.perf_counter() - started
        log = parse_compiler_log(text)
        if returncode != 0 or not log.succeeded:
            reason = log.error or _last_line(text) or "it printed nothing"
            status = f"exit status {returncode}" if returncode != 0 else "no successful compile"
            raise EdgeTPUCompilerError(
                f"{source}: edgetpu_compiler failed ({status}): {reason}{_fix(log)}", log=log
            )
        compiled = folder / f"{stem}_edgetpu.tflite"
        if not compiled.is_file():
            raise EdgeTPUCompilerError(
                f"{source}: edgetpu_compiler reported success but wrote no {compiled.name}; "
                "run it by hand to see why.",
                log=log,
            )
        return CompilerRun(log, compiled.read_bytes(), executable, seconds)


def _run(command: list[str], *, cwd: Path, timeout_s: float, source: str) -> tuple[str, int]:
    """Run the compiler in its own process group; stop the whole group at the time limit."""
    try:
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        raise BackendUnavailableError(
            f"{command[0]}: cannot be started ({exc.strerror or exc}); {_INSTALL_HINT}."
        ) from exc
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop(proc)
        out, _ = proc.communicate()
        text = out.decode("utf-8", errors="replace")
        raise EdgeTPUCompilerError(
            f"{source}: edgetpu_compiler did not finish within {timeout_s:g} s and was "
            "stopped; raise the time limit or compile a smaller model.",
            log=parse_compiler_log(text),
            timed_out=True,
        ) from None
    return out.decode("utf-8", errors="replace"), proc.returncode


def _stop(proc: subprocess.Popen[bytes]) -> None:
    killpg = getattr(os, "killpg", None)
    if killpg is not None:
        try:
            killpg(proc.pid, signal.SIGKILL)
            return
        except ProcessLookupError:
            return
    proc.kill()


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
