"""Why LiteRT could not put a model on the GPU: no GPU here, or a model the GPU refuses.

LiteRT 2.3's ``CompiledModel`` raises the same bare ``RuntimeError`` whether the machine has
no GPU or the GPU delegate refused the model; the cause is only in what its native code
writes on the C standard error. :func:`native_log` captures that text for the length of a
compilation, and :func:`diagnose` picks the error from it: ``BackendUnavailableError`` "no
GPU" with what to install (no adapter, no Vulkan loader or ICD); ``UnsupportedModelError``
with the causes, the dynamic inputs and the fix from the static check
(:mod:`tfcompress.runtime.gpu_support`) when a GPU refused the model; otherwise
``BackendUnavailableError`` with LiteRT's own words, never "no GPU". The marker strings are
LiteRT's own (ai-edge-litert 2.3.0's libraries; ``model_builder.cc`` and
``tflite/core/subgraph.cc`` in google-ai-edge/LiteRT).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tfcompress.errors import BackendUnavailableError, TFCompressError, UnsupportedModelError

if TYPE_CHECKING:
    from tfcompress.runtime.gpu_support import GpuSupport


logger = logging.getLogger(__name__)

#: What LiteRT writes when it finds no GPU device (first match wins over DELEGATE_FAILED).
NO_DEVICE = (
    "No adapters found",
    "Failed to initialize WebGPU environment",
    "Failed to get or create delegate WebGPU environment",
    "Failed to create VkInstance",
    "GPU accelerator could not be loaded",
    "libvulkan.so",
)
#: What LiteRT writes when a GPU answered and its delegate refused (part of) the model.
DELEGATE_FAILED = (
    "Failed to modify graph with delegate",
    "Following operations are not supported by GPU delegate",
    "the graph is not fully delegated",
    "Restored original execution plan after delegate application failure",
    "Failed to apply delegates",
    "only supports static-sized tensors",
)
#: What a machine with a GPU but no Vulkan loader needs (docs/benchmarking.md, GPU section).
VULKAN_HINT = (
    "LiteRT's GPU accelerator runs WebGPU over Vulkan: on Linux install the Vulkan loader "
    "(apt-get install libvulkan1) and, in a container, point VK_DRIVER_FILES at the driver's "
    "ICD file (docs/benchmarking.md, GPU)"
)
_HEADER = "Following operations are not supported by GPU delegate:"
_FOOTER = re.compile(r"operations will run on the (GPU|CPU)")
_PREFIX = re.compile(r"^\s*(?:[EWIF]\d{4} [^\]]*\]\s*|(?:ERROR|WARNING|INFO): (?:\[[^\]]*\]\s*)?)")


@dataclass
class NativeLog:
    """What native code wrote on file descriptor 2 while :func:`native_log` held it."""

    text: str = ""


@contextlib.contextmanager
def native_log() -> Iterator[NativeLog]:
    """Capture file descriptor 2 (LiteRT's C++ logging) for the duration, then log it at debug.

    The captured text is also kept in the yielded :class:`NativeLog` for :func:`diagnose`.
    Python's own ``sys.stderr`` is flushed first, so nothing of ours is mixed in.
    """
    captured = NativeLog()
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured.text = sink.read(1 << 20).decode("utf-8", "replace")
    if captured.text.strip():
        logger.debug("LiteRT's native log:\n%s", captured.text.rstrip())


def failure_kind(text: str) -> str:
    """``"no_device"``, ``"delegate_failed"`` or ``"unknown"``: which failure ``text`` reports."""
    if any(marker in text for marker in NO_DEVICE):
        return "no_device"
    return "delegate_failed" if any(marker in text for marker in DELEGATE_FAILED) else "unknown"


def delegate_cpu_ops(text: str) -> list[str]:
    r"""Ops the GPU delegate listed as unsupported (``"SHAPE: Operation is not supported."``)."""
    found: list[str] = []
    reading = False
    for raw in text.splitlines():
        line = _PREFIX.sub("", raw).strip()
        if _HEADER in line:
            reading = True
            rest = line.split(_HEADER, 1)[1].strip()
            if rest:
                found.append(rest)
            continue
        if reading:
            if not line or _FOOTER.search(line):
                reading = False
                continue
            found.append(line)
    return list(dict.fromkeys(found))


def diagnose(
    name: str, content: bytes, error: BaseException, log: NativeLog, wanted: str
) -> TFCompressError:
    """The error to raise when LiteRT could not compile ``content`` for ``wanted`` with a GPU."""
    said = " ".join(str(error).split())[:200]
    both = f"{log.text}\n{error}"
    kind = failure_kind(both)
    if kind == "no_device":
        marker = next(m for m in NO_DEVICE if m in both)
        return BackendUnavailableError(
            f"no GPU: LiteRT found no GPU device for {name} ({marker}); without a GPU use "
            f"backend 'cpu'; `tfcompress gpu {_file(name)}` says offline whether a GPU would "
            f"run it whole (if this machine has one: {VULKAN_HINT})."
        )
    if kind == "delegate_failed":
        return UnsupportedModelError(_refusal(name, content, both))
    last = next((line.strip() for line in reversed(log.text.splitlines()) if "ERROR" in line), "")
    detail = "; ".join(part for part in (said, last[:200]) if part)
    return BackendUnavailableError(
        f"LiteRT could not compile {name} for {wanted} ({detail}); it did not say whether a "
        f"GPU is missing or the model is refused{_static_hint(content)}. Rerun with --debug "
        "for LiteRT's log."
    )


def _file(name: str) -> str:
    """``name`` where it names a file, else a placeholder for one."""
    return name if name.endswith(".tflite") and " " not in name else "MODEL.tflite"


def _refusal(name: str, content: bytes, text: str) -> str:
    """A GPU answered and refused the model: the ops at fault, and the fix."""
    support = _support(content)
    listed = delegate_cpu_ops(text)
    if support is not None and not support.compatible:
        return (
            f"{name}: a GPU is here, but LiteRT's GPU delegate cannot take the model whole: "
            f"{support.cause()}; {support.fix()}."
        )
    said = f" ({'; '.join(listed[:4])})" if listed else ""
    return (
        f"{name}: a GPU is here, but LiteRT's GPU delegate refused the model{said}; the static "
        "check finds no op at fault, so rerun with --debug for LiteRT's log (a static batch, "
        "--target gpu --static-batch 1, is the usual fix)."
    )


def _static_hint(content: bytes) -> str:
    support = _support(content)
    if support is None or support.compatible:
        return ""
    return f"; the static check finds ops a GPU would refuse ({support.cause(2)}): {support.fix()}"


def _support(content: bytes) -> GpuSupport | None:
    from tfcompress.runtime.gpu_support import gpu_support

    try:
        return gpu_support(content)
    except TFCompressError:  # not a file the reader takes: say nothing more than LiteRT did
        return None
