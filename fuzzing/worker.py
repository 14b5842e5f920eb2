"""The process that runs fuzz cases through the real CLI, many per process.

Started by :mod:`fuzzing.campaign` as ``python -m
fuzzing.worker RESULT_FD``. It reads one JSON case per line on stdin, runs
``tfcompress.cli.main(argv)`` in-process with file descriptors 1 and 2 sent to files (so
native output is caught too), and writes one JSON line per case to ``RESULT_FD``. A crash or
hang of this process is what the campaign is looking for: the parent notices, records it
against the case, and starts a new worker for the next one.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path


def run_case(argv: list[str], scratch: Path) -> dict[str, object]:
    """Run one CLI invocation with stdout/stderr (Python and native) captured to files."""
    from tfcompress.cli import main

    out_path, err_path = scratch / "stdout", scratch / "stderr"
    saved = os.dup(1), os.dup(2)
    python_streams = sys.stdout, sys.stderr
    with out_path.open("w") as out, err_path.open("w") as err:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        # Streams on fds 1 and 2 themselves, as in a real process: the CLI silences native
        # output by redirecting exactly those descriptors.
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        start = time.perf_counter()
        try:
            code = main(argv)
        finally:
            seconds = time.perf_counter() - start
            sys.stdout.close()
            sys.stderr.close()
            sys.stdout, sys.stderr = python_streams
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
    return {
        "exit_code": code,
        "stdout": out_path.read_text(errors="replace"),
        "stderr": err_path.read_text(errors="replace"),
        "seconds": seconds,
    }


def serve(result_fd: int) -> None:
    """Answer cases from stdin until it closes."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tfcompress.cli  # noqa: F401 - paid once, before the first case is timed
    from tfcompress._compat.tf import tensorflow

    tensorflow()
    with os.fdopen(result_fd, "w", buffering=1) as results, tempfile.TemporaryDirectory() as tmp:
        results.write(json.dumps({"ready": True}) + "\n")
        for line in sys.stdin:
            case = json.loads(line)
            verdict = run_case(case["argv"], Path(tmp))
            results.write(json.dumps({"index": case["index"], **verdict}) + "\n")


if __name__ == "__main__":
    serve(int(sys.argv[1]))
