"""What a Dask worker runs for ``benchmark --on``: it is the device, and it measures there.

:mod:`tfcompress.bench.devices` sends these functions to each worker (a Raspberry Pi, a
Coral host) with the artifacts and data, which travel once per device. Each (artifact,
backend) is measured as on the workstation (:func:`tfcompress.bench.rows.backend_rows`):
every runner in a measurement worker forked on the device (:mod:`tfcompress._child`), under
the run's time limit, so a native crash or a hang there is an error row and the device
goes on. One measurement at a time per machine (:func:`machine_lock`), whatever the
worker's thread count and however many workers or clients share the machine: two timings
at once would corrupt each other.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfcompress.bench.config import BenchmarkConfig
from tfcompress.bench.rows import Artifact

#: The file every measurement on this machine locks (``flock``), in the system's temp folder.
LOCK_FILE = "tfcompress-measure.lock"
# Where flock is missing (Windows): one measurement at a time per process.
_PROCESS_LOCK = threading.Lock()


@dataclass(frozen=True)
class Payload:
    """What travels to a device once: the artifacts (bytes, data, scoring) and the plan."""

    artifacts: dict[str, Artifact]
    plan: BenchmarkConfig


def describe() -> dict[str, Any]:
    """This worker as a device: its name and address, the machine and the interpreter.

    Returns:
        ``name``, ``address``, ``hostname``, ``executable`` and ``environment`` (an
        :class:`~tfcompress.bench.environment.Environment` read here).
    """
    from distributed import get_worker

    from tfcompress.bench.environment import capture_environment

    worker = get_worker()
    return {
        "name": str(worker.name),
        "address": str(worker.address),
        "hostname": platform.node(),
        "executable": sys.executable,
        "environment": capture_environment(),
    }


def measure(payload: Payload, artifact: str, backend: str) -> tuple[list[Any], int]:
    """The rows of one artifact on one backend, measured here, one measurement at a time.

    Returns:
        What :func:`~tfcompress.bench.rows.backend_rows` returns: the rows and the labelled
        samples the accuracy column counted.
    """
    from tfcompress.bench.rows import backend_rows

    with machine_lock():
        return backend_rows(artifact, payload.artifacts[artifact], backend, payload.plan)


@contextlib.contextmanager
def machine_lock() -> Iterator[None]:
    """Hold this machine's measurement lock: an exclusive ``flock`` on :data:`LOCK_FILE`.

    A lock on a file covers every thread and process on the machine (each open of the file
    is its own lock holder), and the kernel releases it when its holder dies, so a worker
    killed mid-measurement never leaves the device locked. The file is opened
    non-inheritable: the measurement children do not hold it.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        with _PROCESS_LOCK:
            yield
        return
    path = Path(tempfile.gettempdir()) / LOCK_FILE
    # Read-only: flock needs no write access, so every user of the machine can take the
    # lock of a file another user created, and a planted symlink makes nothing writable.
    descriptor = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def run_model(model: Any, dataset: Any, reference: Any, **options: Any) -> Any:
    """A gate's candidate run here (:func:`tfcompress.bench.paired.run_model`), alone."""
    from tfcompress.bench.paired import run_model as run_here

    with machine_lock():
        return run_here(model, dataset, reference, **options)
