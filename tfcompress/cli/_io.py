"""Keep stdout clean for machine-readable output, and errors to one line on stderr."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
from collections.abc import Iterable, Iterator
from typing import IO, NoReturn


class OneLineArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line (plus the exit code 2)."""

    def error(self, message: str) -> NoReturn:
        """Print ``prog: error: message (see --help)`` and exit 2; quoted values cut."""
        from tfcompress.errors import bounded

        self.exit(2, f"{self.prog}: error: {bounded(message)} (see {self.prog} --help)\n")


@contextlib.contextmanager
def protected_stdio(*, quiet_native: bool) -> Iterator[IO[str]]:
    """Give the command the real stdout and keep every other byte off it.

    TensorFlow, Keras and the converter print to stdout and stderr from Python and C++.
    Inside the block Python's ``sys.stdout`` and ``sys.stderr`` both write to the real
    stderr (logs, progress bars, tracebacks), native writes to file descriptors 1 and 2 go
    to /dev/null when ``quiet_native`` (else to stderr), and only what the command writes
    to the yielded stream reaches stdout.

    When stdout is not a real file descriptor (pytest's capsys, a notebook) nothing is
    redirected and the current ``sys.stdout`` is yielded.
    """
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        fds = sys.stdout.fileno(), sys.stderr.fileno()
    except (AttributeError, io.UnsupportedOperation, ValueError):
        yield sys.stdout
        return
    saved_out, saved_err = os.dup(fds[0]), os.dup(fds[1])
    real_out = os.fdopen(os.dup(saved_out), "w", encoding="utf-8")
    real_err = os.fdopen(os.dup(saved_err), "w", encoding="utf-8", buffering=1)
    python_streams = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = real_err
    with open(os.devnull, "w") as devnull:
        sink = devnull.fileno() if quiet_native else saved_err
        os.dup2(sink, fds[0])
        os.dup2(sink, fds[1])
        try:
            yield real_out
        finally:
            real_out.flush()
            real_err.flush()
            sys.stdout, sys.stderr = python_streams
            os.dup2(saved_out, fds[0])
            os.dup2(saved_err, fds[1])
            for fd in (saved_out, saved_err):
                os.close(fd)
            real_out.close()
            real_err.close()


# Flags renamed before the first release (docs/cli.md#renamed-before-the-first-release), by
# command: the old name is refused, and the refusal names the new one.
_TRAINING_RENAMES = {
    "--data": "--train",
    "--val": "--eval",
    "--lr": "--learning-rate",
    "--train-batchnorm": "--no-freeze-batchnorm",
    "--in-process": "--no-isolate",
}
RENAMED_FLAGS: dict[str, dict[str, str]] = {
    "qat": _TRAINING_RENAMES,
    "prune": {
        **_TRAINING_RENAMES,
        "--skip-layer": "--skip-layers",
        "--sparsity": "--target-sparsity",
    },
    "cluster": {**_TRAINING_RENAMES, "--skip-layer": "--skip-layers"},
    "select": {
        "--val": "--eval",
        "--backend": "--target",
        "--max-arena-kib": "--max-arena SIZE (64KB, as mcu --max-arena takes it)",
        "--max-flash-kib": "--max-flash SIZE (256KB, as mcu --max-flash takes it)",
        "--widths": "--width-multipliers",
        "--runs": "--latency-runs",
        "--min-seconds": "--latency-seconds",
    },
    "gate": {"--data": "--eval"},
    "benchmark": {"--batch": "--batch-sizes", "--backend": "--backends"},
    "mcu": {"--timeout": "--time-budget"},
    "quantize": {
        "--batch-size": "--static-batch",
        "--samples": "--calibration-samples",
        "--per-tensor": "--no-per-channel",
        "--float-node": "--float-nodes NODE,NODE",
        "--calibration": "--calibration-method",
        "--method": "--methods",
        "--rule": "--rules",
    },
    "compress": {
        "--latency": "--measure-latency",
        "--no-latency": "--no-measure-latency",
        "--train-batchnorm": "--no-freeze-batchnorm",
    },
}


def renamed_flag_error(argv: list[str]) -> str | None:
    """The one-line error for an old flag name in ``argv``, naming its new name; else None.

    Example:
        >>> renamed_flag_error(["qat", "m.keras", "--val", "v.npz"])[:49]
        'tfcompress qat: error: --val was renamed --eval; '
    """
    verb = next((arg for arg in argv if not arg.startswith("-")), None)
    renames = RENAMED_FLAGS.get(verb or "", {})
    for arg in argv[argv.index(verb) + 1 :] if verb else []:
        old = arg.partition("=")[0]
        if old in renames:
            return (
                f"tfcompress {verb}: error: {old} was renamed {renames[old]}; use "
                f"{renames[old]} (docs/cli.md, 'Renamed before the first release')"
            )
    return None


_KEYWORD = re.compile(
    r"(?<![\w./-])([a-z][a-z0-9_]*)=('[^']*'|\"[^\"]*\"|True|False|-?\d[\w.]*)"
    r"(?: \((--[^)]*)\))?"
)
_NAMED = re.compile(r"(?<![\w./-])([a-z][a-z0-9_]*) \((--[a-z0-9-]+)\)")


def in_flags(message: str, flags: Iterable[str]) -> str:
    """A library message in a command line's words: ``backend='cpu'`` as ``--backend cpu``.

    Only a keyword that is a flag of the verb (``flags``) is rewritten; a keyword with its
    flag beside it (``engine='x' (--engine x)``, ``float_nodes (--float-nodes)``) becomes
    that flag. Everything else is left as the library wrote it.

    Example:
        >>> in_flags("use backend='cpu' for .tflite files", {"--backend"})
        'use --backend cpu for .tflite files'
        >>> in_flags("pass engine='x' (--engine x).", {"--engine"})
        'pass --engine x.'
    """
    known = set(flags)

    def keyword(match: re.Match[str]) -> str:
        name, value, beside = match.groups()
        flag = "--" + name.replace("_", "-")
        if beside is not None and beside.split()[0] in known:
            return beside
        if value in ("True", "False"):
            flag = flag if value == "True" else "--no-" + flag[2:]
            return flag if flag in known else match.group(0)
        return f"{flag} {value.strip(chr(39) + chr(34))}" if flag in known else match.group(0)

    message = _KEYWORD.sub(keyword, message)
    return _NAMED.sub(lambda m: m.group(2) if m.group(2) in known else m.group(0), message)
