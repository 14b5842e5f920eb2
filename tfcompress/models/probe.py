"""Crash containment: a native runtime first touches an untrusted model in a child process.

LiteRT and ONNX Runtime are C++ and trust much of what a model file says; a crafted file can
crash them (TFLite's CVE list is long) or hang them. So the first time a runtime loads an
artifact in this process, :func:`probe_model` has it load the model, allocate its tensors
and run once on zeros in a short-lived child (``_probe_child.py``, which imports only numpy
and the runtime, never TensorFlow). A crash there becomes a
:class:`~tfcompress.errors.ModelLoadError` naming the signal, a hang one saying it was
stopped, and the runtime's own refusal one with its reason; the child's stderr is captured,
never shown. The verdict is cached by the bytes' SHA-256, so each artifact is probed once
per process.

Environment:
    ``TFCOMPRESS_NO_PROBE=1`` skips the probe, for trusted files loaded many times by
    short-lived processes (the structural validator of ``.tflite`` files still runs).
    ``TFCOMPRESS_PROBE_TIMEOUT=SECONDS`` changes the default limit (60 s) for very large
    models.

Example:
    >>> content = Path("model.tflite").read_bytes()
    >>> probe_model(content, "tflite", source="model.tflite")  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tfcompress.errors import InvalidInputError, ModelLoadError, TFCompressError

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 60.0
_CHILD = Path(__file__).with_name("_probe_child.py")
_RUNTIMES = {"tflite": "the LiteRT interpreter", "onnx": "ONNX Runtime"}
_REEXPORT = "the file is corrupt or crafted; re-export it from the source model"


@dataclass(frozen=True)
class _Verdict:
    """What the child reported: ``reason`` is None when the model loaded and ran."""

    reason: str | None
    stage: str = ""
    cacheable: bool = True


_verdicts: dict[tuple[str, str], _Verdict] = {}


def child_command(kind: str) -> list[str]:
    """The command that runs the probe child; tests replace it to fake a crash or a hang.

    ``-P`` keeps the script's folder (``tfcompress/models``, which holds an ``inspect.py``)
    off ``sys.path``, where it would shadow the standard library.
    """
    return [sys.executable, "-P", str(_CHILD), kind]


def clear_cache() -> None:
    """Forget every verdict, so the next load of each artifact is probed again."""
    _verdicts.clear()


def probe_model(
    content: bytes,
    kind: str,
    *,
    source: object = "<bytes>",
    timeout: float | None = None,
    must_run: bool = True,
) -> None:
    """Load and run ``content`` once with its native runtime, in a child process.

    Args:
        content: The model's bytes.
        kind: ``"tflite"`` (LiteRT interpreter, XNNPACK on) or ``"onnx"`` (ONNX Runtime
            CPU; skipped when onnxruntime is not installed).
        source: How error messages name the file.
        timeout: Seconds before the child is stopped (default ``TFCOMPRESS_PROBE_TIMEOUT``
            or 60).
        must_run: False when the runtime may legitimately refuse to *run* the model here
            (custom ops such as the Edge TPU's): it is still loaded and run in the child,
            so a crash is caught, but a clean refusal is not an error.

    Raises:
        ModelLoadError: The runtime crashed, hung or refused the model.
        InvalidInputError: An unknown ``kind`` or a timeout that is not positive.

    Example:
        >>> probe_model(b"TFL3...", "tflite")  # doctest: +SKIP
    """
    if kind not in _RUNTIMES:
        raise InvalidInputError(f"cannot probe {kind!r} models; use one of {sorted(_RUNTIMES)}.")
    if os.environ.get("TFCOMPRESS_NO_PROBE", "") not in {"", "0"}:
        return
    if kind == "onnx" and importlib.util.find_spec("onnxruntime") is None:
        return  # nothing here will run the model natively, so nothing to contain
    limit = _timeout(timeout)
    key = (kind, hashlib.sha256(content).hexdigest())
    verdict = _verdicts.get(key)
    if verdict is None:
        verdict = _run_child(content, kind, limit)
        if verdict.cacheable:
            _verdicts[key] = verdict
    if verdict.reason is not None and (must_run or verdict.stage != "run"):
        raise ModelLoadError(f"{source}: {verdict.reason}")
    if verdict.reason is not None:
        logger.debug("%s: %s (accepted: the model has ops this runtime lacks)", source, verdict)


def _timeout(timeout: float | None) -> float:
    text = os.environ.get("TFCOMPRESS_PROBE_TIMEOUT", "")
    try:
        value = timeout if timeout is not None else float(text or DEFAULT_TIMEOUT_S)
    except ValueError as error:
        raise InvalidInputError(
            f"TFCOMPRESS_PROBE_TIMEOUT must be a number of seconds, got {text!r}."
        ) from error
    if not value > 0:
        raise InvalidInputError(f"the probe timeout must be positive seconds, got {value}.")
    return value


def _run_child(content: bytes, kind: str, timeout: float) -> _Verdict:
    runtime = _RUNTIMES[kind]
    try:
        done = subprocess.run(
            child_command(kind), input=content, capture_output=True, timeout=timeout, check=False
        )
    except OSError as failure:  # cannot fork or exec: the machine, not the file
        raise TFCompressError(
            f"cannot start the child process that checks models safely ({failure.strerror}); "
            "free memory or processes, or set TFCOMPRESS_NO_PROBE=1 for files you trust."
        ) from failure
    except subprocess.TimeoutExpired as expired:
        _log_stderr(expired.stderr)
        # Not cached: a machine busy enough to slow a big model down is not the file's fault.
        return _Verdict(
            f"{runtime} did not finish loading and running this file within {timeout:g} s and "
            f"was stopped (it hung); {_REEXPORT}, or raise TFCOMPRESS_PROBE_TIMEOUT for a very "
            "large model.",
            "hang",
            cacheable=False,
        )
    _log_stderr(done.stderr)
    if done.returncode < 0:
        name = _signal_name(-done.returncode)
        return _Verdict(f"{runtime} crashed on this file ({name}); {_REEXPORT}.", "crash")
    line = done.stdout.decode("utf-8", errors="replace").strip().splitlines()[-1:]
    try:
        reply = json.loads(line[0]) if line else None
    except json.JSONDecodeError:
        reply = None
    if done.returncode != 0 or not isinstance(reply, dict):
        last = done.stderr.decode("utf-8", errors="replace").strip().splitlines()[-1:]
        said = f" (its last words: {' '.join(last[0].split())[:200]})" if last else ""
        return _Verdict(
            f"{runtime} exited with status {done.returncode} on this file without a "
            f"verdict{said}; {_REEXPORT}.",
            "crash",
        )
    if reply.get("ok") is True:
        return _Verdict(None)
    stage = str(reply.get("stage", "load"))
    action = "load" if stage == "load" else "run"
    reason = " ".join(str(reply.get("reason", "no reason given")).split())[:300]
    if kind == "tflite":  # the words load_model has always used for a broken .tflite
        return _Verdict(
            f"the .tflite file is truncated or corrupt (or crafted): {runtime} cannot {action} "
            f"it ({reason}); re-export it from the source model.",
            stage,
        )
    return _Verdict(f"{runtime} cannot {action} this model ({reason}); {_REEXPORT}.", stage)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _log_stderr(stderr: bytes | None) -> None:
    if stderr:
        tail = stderr.decode("utf-8", errors="replace").strip().splitlines()[-5:]
        logger.debug("probe child stderr (last lines): %s", " | ".join(tail))
