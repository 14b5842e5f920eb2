"""The TensorFlow-free device install (``make device-install``: ``.venv-device``) for tests.

Tests marked ``device`` run commands with that install's Python; the ``.tflite`` files they
need are built here, in the main venv (which has TensorFlow), before.
"""

from __future__ import annotations

import os
import subprocess
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
