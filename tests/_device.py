"""The TensorFlow-free device install (``make device-install``: ``.venv-device``) for tests.

Tests marked ``device`` run commands with that install's Python; the ``.tflite`` files they
need are built here, in the main venv (which has TensorFlow), before.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from _shared import build_once

ROOT = Path(__file__).resolve().parent.parent
#: ``TFCOMPRESS_DEVICE_PYTHON`` names another device install's interpreter.
DEVICE_PYTHON = Path(os.environ.get("TFCOMPRESS_DEVICE_PYTHON", ROOT / ".venv-device/bin/python"))


def device_python() -> Path:
    """The device install's interpreter; the test is skipped (with the command) without it."""
    if not DEVICE_PYTHON.exists():
        pytest.skip(f"no device install at {DEVICE_PYTHON}: run `make device-install` first")
    return DEVICE_PYTHON


def device_env() -> dict[str, str]:
    """The environment of a process of the device install (nothing of this venv leaks in)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{DEVICE_PYTHON.parent}{os.pathsep}{env.get('PATH', '')}"
    env["TFCOMPRESS_DEBUG"] = "0"
    return env


def run_device(
    *argv: str, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """``python -m tfcompress ARGV`` in the device install."""
    return subprocess.run(
        [str(device_python()), "-m", "tfcompress", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=device_env(),
        check=False,
    )


def device_files(factory: pytest.TempPathFactory, gate_files: dict[str, Path]) -> dict[str, Path]:
    """``float32.tflite`` (the gate models' reference converted) beside their int8 files."""

    def build(folder: Path) -> dict[str, Path]:
        import tfcompress
        from tfcompress.models import load_model

        path = folder / "float32.tflite"
        reference = load_model(gate_files["reference"])
        tfcompress.quantize(reference, recipe="float32").save(path)
        return {"float32": path}

    return {**gate_files, **build_once(factory, "device_float32", build)}


def conv_files(factory: pytest.TempPathFactory) -> dict[str, Path]:
    """An untrained MNIST-sized CNN as float32 ``.tflite``: a model of a few hundred us."""

    def build(folder: Path) -> dict[str, Path]:
        import tfcompress
        from tfcompress.samples.cnn import small_cnn

        path = folder / "cnn_float32.tflite"
        tfcompress.quantize(small_cnn(), recipe="float32").save(path)
        return {"cnn": path}

    return build_once(factory, "device_cnn", build)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Cluster:
    """A Dask scheduler on 127.0.0.1 and workers started from the device install.

    Each process is its own session (``start_new_session``): :meth:`kill` ends a worker
    and its nanny at once, as a device that loses power.
    """

    def __init__(self, logs: Path, *, tls: list[str] | None = None) -> None:
        self.logs = logs
        self.tls = list(tls or [])
        self.port = free_port()
        scheme = "tls" if tls else "tcp"
        self.address = f"{scheme}://127.0.0.1:{self.port}"
        self.processes: dict[str, subprocess.Popen] = {}

    def _start(self, name: str, argv: list[str]) -> None:
        bin_dir = device_python().parent
        with open(self.logs / f"{name}.log", "wb") as log:
            self.processes[name] = subprocess.Popen(
                [str(bin_dir / "dask"), *argv],
                stdout=log,
                stderr=log,
                env=device_env(),
                start_new_session=True,
            )

    def start(self, *workers: str) -> Cluster:
        scheduler = ["scheduler", "--host", "127.0.0.1", "--port", str(self.port)]
        protocol = ["--protocol", "tls"] if self.tls else []
        self._start("scheduler", [*scheduler, *protocol, "--no-dashboard", *self.tls])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    break
            time.sleep(0.2)
        self.add(*workers)
        return self

    def add(self, *workers: str, extra: tuple[str, ...] = ()) -> None:
        """Start workers (one thread each, ``extra`` flags); wait until the scheduler has them."""
        for name in workers:
            argv = ["worker", self.address, "--name", name, "--nthreads", "1", "--no-dashboard"]
            self._start(name, [*argv, *extra, *self.tls])
        self.wait_for(len([n for n in self.processes if n != "scheduler"]))

    def client(self):
        from distributed import Client
        from distributed.security import Security

        security = None
        if self.tls:
            files = dict(zip(self.tls[::2], self.tls[1::2], strict=True))
            security = Security(
                tls_ca_file=files["--tls-ca-file"],
                tls_client_cert=files["--tls-cert"],
                tls_client_key=files["--tls-key"],
                require_encryption=True,
            )
        return Client(self.address, timeout="60s", set_as_default=False, security=security)

    def wait_for(self, count: int) -> None:
        with self.client() as client:
            client.wait_for_workers(count, timeout=120)

    def kill(self, name: str) -> None:
        process = self.processes.pop(name)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def stop(self) -> None:
        for name in reversed(list(self.processes)):
            process = self.processes.pop(name)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
