"""What machine a benchmark ran on: CPU model and SIMD flags, cores, GPU, library versions.

CPU flags come from the Linux kernel's ``/proc/cpuinfo`` where it exists (it lists every
extension the OS has enabled, AVX-VNNI and AMX included, and costs no child process), else
from py-cpuinfo (macOS, Windows, BSD). When neither answers, the flags are *unknown*
(``None``), never "none": a report must not claim a CPU lacks an instruction nobody looked for.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

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
# py-cpuinfo spells flags by source: "avx512_vnni" (Linux), "avx512vnni" (its own CPUID probe,
# macOS sysctl). Matching on names without "_" and "." accepts every spelling.
_ANY_FLAGS = {flag.replace("_", ""): label for flag, label in {**_X86_FLAGS, **_ARM_FLAGS}.items()}
PROC_CPUINFO = "/proc/cpuinfo"
PY_CPUINFO = "py-cpuinfo"
# Sources that list every int8 dot-product extension of the CPU, so that finding none of them
# means the CPU has none. py-cpuinfo's own CPUID probe reads AVX512-VNNI but neither AVX-VNNI
# nor AMX, and reports nothing on Apple Silicon: there, finding none means "unknown".
_COMPLETE_SOURCES = frozenset({PROC_CPUINFO})
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
class CpuFeatures:
    """The CPU's model name and performance-relevant flags, and where they were read.

    Attributes:
        model: Model name (``""`` when no source gave one).
        flags: Labels of the tracked flags found (``AVX2``, ``AVX512-VNNI``, ``NEON``,
            ``DOTPROD``...), ``()`` when a source listed the CPU's flags and none of the
            tracked ones was among them, or None when no source could list the flags at all.
        source: ``"/proc/cpuinfo"``, ``"py-cpuinfo"`` or None (flags unknown).
    """

    model: str
    flags: tuple[str, ...] | None
    source: str | None


@dataclass(frozen=True)
class Environment:
    """The machine and software a report's numbers come from.

    ``cpu_flags`` is None when no source could read the CPU's flags (say so; do not read it
    as "no flags"), and ``cpu_flags_source`` names where they came from.

    Example:
        >>> env = capture_environment()
        >>> env.cores >= 1
        True
    """

    cpu: str
    arch: str
    cpu_flags: tuple[str, ...] | None
    cores: int
    usable_cores: int
    gpu: str | None
    os: str
    python: str
    versions: dict[str, str] = field(default_factory=dict)
    cpu_flags_source: str | None = None

    @property
    def int8_dot_product(self) -> tuple[str, ...] | None:
        """The CPU's int8 dot-product extensions (VNNI, AMX, dotprod, i8mm), if known.

        ``()`` when a source that lists all of them found none; None when that is unknown
        (no flags, or a source blind to some of them).

        Example:
            >>> _env = Environment("c", "x86_64", ("AVX2",), 1, 1, None, "linux", "3.11")
            >>> _env.int8_dot_product is None  # no source named: absence proves nothing
            True
        """
        if self.cpu_flags is None:
            return None
        found = tuple(f for f in self.cpu_flags if f in INT8_DOT_FLAGS)
        return found if found or self.cpu_flags_source in _COMPLETE_SOURCES else None

    @property
    def int8_dot_product_unknown_because(self) -> str | None:
        """Why :attr:`int8_dot_product` is None, in words; None when it is known.

        Example:
            >>> _env = Environment("c", "arm64", None, 1, 1, None, "macOS", "3.11")
            >>> _env.int8_dot_product_unknown_because
            "no source could read this CPU's flags"
        """
        if self.int8_dot_product is not None:
            return None
        if self.cpu_flags is None:
            return "no source could read this CPU's flags"
        source = self.cpu_flags_source or "an unnamed source"
        return f"the flags come from {source}, which does not list every int8 extension"

    def to_dict(self) -> dict[str, Any]:
        """Plain data for reports (``cpu_flags``/``int8_dot_product`` null when unknown)."""
        dots = self.int8_dot_product
        return {
            "cpu": self.cpu,
            "arch": self.arch,
            "cpu_flags": None if self.cpu_flags is None else list(self.cpu_flags),
            "cpu_flags_source": self.cpu_flags_source,
            "int8_dot_product": None if dots is None else list(dots),
            "cores": self.cores,
            "usable_cores": self.usable_cores,
            "gpu": self.gpu,
            "os": self.os,
            "python": self.python,
            "versions": dict(self.versions),
        }

    def __str__(self) -> str:
        if self.cpu_flags is None:
            flags = "unknown (no source could read them)"
        else:
            listed = ", ".join(self.cpu_flags) or "none of the tracked ones"
            flags = f"{listed} (from {self.cpu_flags_source or 'an unnamed source'})"
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

    ``cpuinfo`` replaces the system's ``/proc/cpuinfo`` text (tests pass one); when it lists
    no flags, py-cpuinfo is asked. The CPU flags are None when no source could read them.

    Example:
        >>> "numpy" in capture_environment().versions
        True
    """
    cpu = detect_cpu() if cpuinfo is None else _detect_cpu(cpuinfo)
    arch = platform.machine() or "unknown"
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return Environment(
        cpu=cpu.model or platform.processor() or arch,
        arch=arch,
        cpu_flags=cpu.flags,
        cores=os.cpu_count() or 1,
        usable_cores=usable or 1,
        gpu=detect_gpu(),
        os=platform.platform(terse=True),
        python=platform.python_version(),
        versions=package_versions(),
        cpu_flags_source=cpu.source,
    )


@functools.cache
def detect_cpu() -> CpuFeatures:
    """This machine's CPU model and flags: ``/proc/cpuinfo``, else py-cpuinfo, else unknown.

    Cached: the CPU does not change while the process runs, and py-cpuinfo starts a child
    Python process (about a second) to read it.
    """
    return _detect_cpu(_read(PROC_CPUINFO))


def _detect_cpu(proc_text: str) -> CpuFeatures:
    model, flags = parse_cpuinfo(proc_text)
    if flags is not None:
        return CpuFeatures(model, flags, PROC_CPUINFO)
    info = _py_cpuinfo()
    model = model or str(info.get("brand_raw") or "")
    raw = info.get("flags")
    if raw:  # an empty list means py-cpuinfo found no source either, not a flagless CPU
        words = {str(f).lower().replace("_", "").replace(".", "") for f in raw}
        labels = dict.fromkeys(label for key, label in _ANY_FLAGS.items() if key in words)
        return CpuFeatures(model, tuple(labels), PY_CPUINFO)
    logger.info("CPU flags unknown: no /proc/cpuinfo flags and py-cpuinfo listed none")
    return CpuFeatures(model, None, None)


def _py_cpuinfo() -> dict[str, Any]:
    """py-cpuinfo's answer, or ``{}`` (logged) when it is missing or fails."""
    try:
        import cpuinfo
    except ImportError as error:
        logger.info("py-cpuinfo is not installed (%s): pip install 'py-cpuinfo>=9,<10'", error)
        return {}
    try:
        info = cpuinfo.get_cpu_info()
    except (OSError, ValueError) as error:  # its child process could not start / bad JSON
        logger.info("py-cpuinfo failed to read the CPU: %s", error)
        return {}
    return info if isinstance(info, dict) else {}


def parse_cpuinfo(text: str) -> tuple[str, tuple[str, ...] | None]:
    """CPU model name and the performance-relevant flags from ``/proc/cpuinfo`` text.

    Works for x86 (``model name``/``flags``) and ARM (``Hardware``/``CPU part``/``Features``).
    The flags are None when the text has no flags line at all (unknown), ``()`` when it
    lists none of the tracked ones.
    """
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    model = fields.get("model name") or fields.get("Model") or fields.get("Hardware") or ""
    if fields.get("Features"):
        words, known = set(fields["Features"].split()), _ARM_FLAGS
    elif fields.get("flags"):
        words, known = set(fields["flags"].split()), _X86_FLAGS
    else:
        return model, None
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
