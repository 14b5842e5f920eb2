"""What machine a benchmark ran on: CPU model and SIMD flags, cores, GPU, library versions."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Flags that decide int8 vs float speed. x86: VNNI/AMX add int8 dot products; ARM: the
# dot-product (asimddp) and i8mm extensions do. Without them int8 kernels widen to 16 bit.
_X86_FLAGS = {
    "avx2": "AVX2",
    "fma": "FMA",
    "avx512f": "AVX-512",
    "avx512_vnni": "AVX512-VNNI",
    "avx_vnni": "AVX-VNNI",
    "avx512_bf16": "AVX512-BF16",
    "avx512_fp16": "AVX512-FP16",
    "amx_int8": "AMX-INT8",
    "amx_bf16": "AMX-BF16",
}
_ARM_FLAGS = {
    "asimd": "NEON",
    "asimdhp": "NEON-FP16",
    "asimddp": "DOTPROD",
    "i8mm": "I8MM",
    "sve": "SVE",
    "sve2": "SVE2",
}
INT8_DOT_FLAGS = frozenset({"AVX512-VNNI", "AVX-VNNI", "AMX-INT8", "DOTPROD", "I8MM"})
_PACKAGES = (
    "tfcompress",
    "numpy",
    "tensorflow",
    "tf-keras",
    "keras",
    "ai-edge-litert",
    "tflite-runtime",
    "onnxruntime",
    "onnxruntime-gpu",
    "onnx",
    "tf2onnx",
)


@dataclass(frozen=True)
class Environment:
    """The machine and software a report's numbers come from.

    Example:
        >>> env = capture_environment()
        >>> env.cores >= 1
        True
    """

    cpu: str
    arch: str
    cpu_flags: tuple[str, ...]
    cores: int
    usable_cores: int
    gpu: str | None
    os: str
    python: str
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def int8_dot_product(self) -> tuple[str, ...]:
        """The CPU's int8 dot-product extensions (VNNI, AMX, dotprod, i8mm); empty if none."""
        return tuple(f for f in self.cpu_flags if f in INT8_DOT_FLAGS)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for reports."""
        return {
            "cpu": self.cpu,
            "arch": self.arch,
            "cpu_flags": list(self.cpu_flags),
            "int8_dot_product": list(self.int8_dot_product),
            "cores": self.cores,
            "usable_cores": self.usable_cores,
            "gpu": self.gpu,
            "os": self.os,
            "python": self.python,
            "versions": dict(self.versions),
        }

    def __str__(self) -> str:
        flags = ", ".join(self.cpu_flags) or "none detected"
        versions = ", ".join(f"{k} {v}" for k, v in self.versions.items())
        return "\n".join(
            [
                f"CPU:      {self.cpu} ({self.arch}), {self.usable_cores} usable of "
                f"{self.cores} cores",
                f"Flags:    {flags}",
                f"GPU:      {self.gpu or 'none'}",
                f"System:   {self.os}, Python {self.python}",
                f"Versions: {versions}",
            ]
        )


def capture_environment(*, cpuinfo: str | None = None) -> Environment:
    """Describe this machine without importing TensorFlow or any runtime.

    Args:
        cpuinfo: Text of ``/proc/cpuinfo`` (read from the system when None; tests pass one).

    Returns:
        The environment.

    Example:
        >>> "numpy" in capture_environment().versions
        True
    """
    text = cpuinfo if cpuinfo is not None else _read("/proc/cpuinfo")
    model, flags = parse_cpuinfo(text)
    arch = platform.machine() or "unknown"
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return Environment(
        cpu=model or platform.processor() or arch,
        arch=arch,
        cpu_flags=flags,
        cores=os.cpu_count() or 1,
        usable_cores=usable or 1,
        gpu=detect_gpu(),
        os=platform.platform(terse=True),
        python=platform.python_version(),
        versions=package_versions(),
    )


def parse_cpuinfo(text: str) -> tuple[str, tuple[str, ...]]:
    r"""CPU model name and the performance-relevant flags from ``/proc/cpuinfo`` text.

    Works for x86 (``model name``/``flags``) and ARM (``Hardware``/``CPU part``/``Features``).

    Example:
        >>> parse_cpuinfo("model name : Xeon\\nflags : fpu avx2 avx512_vnni\\n")
        ('Xeon', ('AVX2', 'AVX512-VNNI'))
    """
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    model = fields.get("model name") or fields.get("Model") or fields.get("Hardware") or ""
    if fields.get("Features"):
        words, known = set(fields["Features"].split()), _ARM_FLAGS
    else:
        words, known = set(fields.get("flags", "").split()), _X86_FLAGS
    return model, tuple(label for flag, label in known.items() if flag in words)


def detect_gpu() -> str | None:
    """Name of a GPU this process could use, from the driver's tools; None when none is seen.

    Checks ``nvidia-smi``, then DRM render nodes (``/dev/dri``) and Android/ARM GPU device
    files. TensorFlow is not imported for this.
    """
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            done = subprocess.run(
                [smi, "--query-gpu=name", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            done = None
        if done is not None and done.returncode == 0 and done.stdout.strip():
            return ", ".join(line.strip() for line in done.stdout.splitlines() if line.strip())
    for device, label in (
        ("/dev/kgsl-3d0", "Adreno (kgsl)"),
        ("/dev/mali0", "Mali"),
        ("/dev/dri/renderD128", "DRM render node"),
    ):
        if Path(device).exists():
            return label
    return None


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that shape the numbers (absent ones left out)."""
    versions = {"python": sys.version.split()[0]}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
