"""Crash containment: a native runtime first touches an untrusted model in a child process.

LiteRT and ONNX Runtime are C++ and trust much of what a model file says; a crafted file can
crash them (TFLite's CVE list is long) or hang them. So the first time a runtime loads an
artifact in this process, :func:`probe_model` has it load the model, prepare it (allocate
its tensors) and run once on zeros in a short-lived :class:`tfcompress._child.Worker`
(:mod:`tfcompress._child.probe` runs there; the worker imports only numpy and the runtime,
never TensorFlow, and is forked from the measurement zygote when one runs, else a fresh
interpreter). The child's stderr is captured, never shown. The verdict is cached by the
bytes' SHA-256, so each artifact is probed once per process.

What the probe calls damage, and what it does not:

* a crash (a signal, an abort), a hang, a runtime that cannot load the file, or one that
  cannot prepare it (unless custom ops or unknown dimensions excuse that) is a
  :class:`~tfcompress.errors.ModelLoadError`, worded for what happened. A ``.tflite`` is
  probed only after the structural checks (:mod:`tfcompress.models.tflite_checks`) passed,
  so its words are not "corrupt or crafted" (those belong to a failed structural check):
  LiteRT *cannot run* the file, with the op its error names (:func:`failing_op`) and, for
  an int8 file, the way out that works (keep that op float when quantizing);
* an op that returns an error when *run* on zeros is not damage: an int8 audio front end
  that divides by the frame's peak fails on silence and runs fine on sound. The model
  loads; :func:`zeros_refused` remembers why, and before a runner first runs it in this
  process, :func:`probe_inputs` runs it in a child again on the real inputs: a crash there
  is damage, an error there is the runtime refusing those values (an
  :class:`~tfcompress.errors.InvalidDataError` naming the op), success lets it run here.

The probe runs under the one time and memory limits of every child
(``TFCOMPRESS_TIMEOUT``, ``--timeout``; ``TFCOMPRESS_MEMORY_LIMIT``).

Environment:
    ``TFCOMPRESS_NO_PROBE=1`` skips the probe, for trusted files loaded many times by
    short-lived processes (the structural validator of ``.tflite`` files still runs).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import importlib.util
import logging
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from tfcompress import _child
from tfcompress._limits import CHILD_TIMEOUT
from tfcompress.errors import (
    ChildTimeoutError,
    InvalidDataError,
    InvalidInputError,
    ModelLoadError,
    NativeCrashError,
    RuntimeRefusedError,
)

logger = logging.getLogger(__name__)

#: What the probe's worker runs; tests point it at a stand-in to fake a crash or a hang.
CHILD_TARGET = "tfcompress._child.probe:probe"
_RUNTIMES = {"tflite": "the LiteRT interpreter", "onnx": "ONNX Runtime"}
_REEXPORT = "the file is corrupt or crafted; re-export it from the source model"
# LiteRT's words for a kernel that refused: "Node number 1 (CONV_2D) failed to prepare."
_NODE = re.compile(r"Node number (\d+) \(([A-Za-z0-9_]+)\) failed to (prepare|invoke)")
# A zygote that forks probes has the probe and LiteRT imported already.
_child.preload("tfcompress._child.probe", "ai_edge_litert.interpreter")


@dataclass(frozen=True)
class _Verdict:
    """What the child reported: ``reason`` is None when the model loaded and ran.

    ``stage`` is ``load``, ``prepare`` or ``run`` (the runtime's own refusal), ``crash``
    or ``hang``; ``said`` is the runtime's own words for a refusal.
    """

    reason: str | None
    stage: str = ""
    cacheable: bool = True
    said: str = ""


_verdicts: dict[tuple[str, str], _Verdict] = {}


def clear_cache() -> None:
    """Forget every verdict, so the next load of each artifact is probed again."""
    _verdicts.clear()


def probe_model(
    content: bytes,
    kind: str,
    *,
    source: object = "<bytes>",
    timeout: float | None = None,
    must_prepare: bool = True,
    in_warm_child: bool = False,
) -> None:
    """Load, prepare and run ``content`` once on zeros with its native runtime, in a child.

    Args:
        content: The model's bytes.
        kind: ``"tflite"`` (LiteRT interpreter, XNNPACK on) or ``"onnx"`` (ONNX Runtime
            CPU; skipped when onnxruntime is not installed).
        source: How error messages name the file.
        timeout: Seconds before the child is stopped (default: the one time limit,
            ``TFCOMPRESS_TIMEOUT``).
        must_prepare: False when the runtime may legitimately refuse to *prepare* the model
            here (custom ops such as the Edge TPU's, an unknown length stored as 1): it is
            still loaded in the child, so a crash is caught, but a clean refusal to prepare
            is not an error.
        in_warm_child: Probe in this process's warm child (:func:`tfcompress._child.call`)
            instead of a worker of its own: for a caller whose next native work runs there
            anyway (LiteRT Quantizer's calibration), so no process is started for the probe.
            The verdict and its words are the same.

    Raises:
        ModelLoadError: The runtime crashed, hung, or refused to load (or prepare) the model.
        InvalidInputError: An unknown ``kind`` or a timeout that is not positive.
    """
    if kind not in _RUNTIMES:
        raise InvalidInputError(f"cannot probe {kind!r} models; use one of {sorted(_RUNTIMES)}.")
    if _disabled() or (kind == "onnx" and importlib.util.find_spec("onnxruntime") is None):
        return  # nothing here will run the model natively, so nothing to contain
    limit = CHILD_TIMEOUT.given(timeout, name="the probe timeout")  # finite, a week at most
    key = (kind, hashlib.sha256(content).hexdigest())
    verdict = _verdicts.get(key)
    if verdict is None:
        verdict = _run_child(content, kind, limit, None, warm=in_warm_child)
        if verdict.cacheable:
            _verdicts[key] = verdict
    if verdict.reason is None:
        return
    if verdict.stage == "run":
        # Not damage: an op refused all-zero inputs. A runner in this process probes again
        # on the real inputs before it runs them here.
        logger.info("%s: %s", source, verdict.reason)
        return
    if verdict.stage == "prepare" and not must_prepare:
        # Custom ops this runtime lacks (the Edge TPU's), or a length stored as 1 that is too
        # short: the backend that runs the model says so when it is asked to.
        logger.debug("%s: %s (accepted)", source, verdict.reason)
        return
    raise RuntimeRefusedError(f"{source}: {_already_quantized(content, kind)}{verdict.reason}")


def _already_quantized(content: bytes, kind: str) -> str:
    """``"it is already quantized (int8 tensors with scales): "`` for such a ``.tflite``.

    Said first: a quantized file that LiteRT cannot run is usually a quantizer's output
    (LiteRT Quantizer writes some), and the way out starts from the float model.
    """
    from tfcompress.models.quantized import tflite_precision

    precision = tflite_precision(content) if kind == "tflite" else None
    return "" if precision is None else f"it is already quantized ({precision}): "


def zeros_refused(content: bytes, kind: str) -> str | None:
    """Why the runtime could not *run* ``content`` on zeros in its probe, or None.

    None also when the probe has not run in this process (a worker process, or
    ``TFCOMPRESS_NO_PROBE``), or when the model has since run on real inputs.
    """
    verdict = _verdicts.get((kind, hashlib.sha256(content).hexdigest()))
    if verdict is None or verdict.reason is None or verdict.stage != "run":
        return None
    return verdict.said or verdict.reason


def runtime_said(content: bytes, kind: str) -> str | None:
    """The runtime's own words when its probe of ``content`` in this process failed, or None."""
    verdict = _verdicts.get((kind, hashlib.sha256(content).hexdigest()))
    return None if verdict is None or verdict.reason is None else verdict.said or None


def probe_inputs(
    content: bytes,
    kind: str,
    inputs: Mapping[str, np.ndarray],
    *,
    source: object = "<bytes>",
    timeout: float | None = None,
) -> None:
    """Run ``content`` once on ``inputs`` in a child, before it runs on them in this process.

    For a model whose run on zeros failed (:func:`zeros_refused`): on success the model is
    remembered as running, and later runners need no probe.

    Args:
        content: The model's bytes.
        kind: ``"tflite"`` or ``"onnx"``.
        inputs: The arrays exactly as the runner will set them: keyed ``t<index>`` (tensor
            index) for a ``.tflite``, by input name for an ``.onnx``.
        source: How error messages name the file.
        timeout: Seconds before the child is stopped.

    Raises:
        ModelLoadError: The runtime crashed or hung on these inputs (damage, or a runtime
            bug this process must not meet).
        InvalidDataError: An op refused these inputs too: the runtime's words, naming it.
    """
    if _disabled():
        return
    key = (kind, hashlib.sha256(content).hexdigest())
    arrays = {name: np.asarray(array) for name, array in inputs.items()}
    verdict = _run_child(
        content, kind, CHILD_TIMEOUT.given(timeout, name="the probe timeout"), arrays
    )
    if verdict.reason is None:
        _verdicts[key] = verdict  # it ran: no need to ask again in this process
        return
    if verdict.stage == "run":
        raise InvalidDataError(
            f"{source}: {_RUNTIMES[kind]} ran the model but an op refused the inputs it was "
            f"given ({verdict.said}); the file is fine: check that the data holds values this "
            "model accepts."
        )
    raise ModelLoadError(f"{source}: {verdict.reason}")


def _disabled() -> bool:
    return os.environ.get("TFCOMPRESS_NO_PROBE", "") not in {"", "0"}


@contextlib.contextmanager
def sharing_zygote() -> Iterator[None]:
    """Probes made inside fork from this process's zygote, starting it if none runs.

    For a caller that starts measurement workers next (``benchmark``, the gates): the
    zygote it starts for them anyway serves the probes too, each a fork (tens of ms)
    instead of a fresh interpreter. Elsewhere a probe forks only from a zygote that runs
    already: one started for a single probe would cost more than it saves.
    """
    token = _FORK.set("start")
    try:
        yield
    finally:
        _FORK.reset(token)


_FORK: contextvars.ContextVar[str] = contextvars.ContextVar("probe_fork", default="running")


def _run_child(
    content: bytes,
    kind: str,
    timeout: float,
    inputs: dict[str, np.ndarray] | None,
    *,
    warm: bool = False,
) -> _Verdict:
    on = "on zeros" if inputs is None else "on the real inputs"
    try:
        if warm:
            reply = _child.call(
                CHILD_TARGET, kind, content, inputs, what="probing the model", timeout=timeout
            )
        else:  # forked from a zygote that runs (or, sharing_zygote, is started), else fresh
            with _child.Worker(fork=_FORK.get()) as worker:
                reply = worker.call(
                    CHILD_TARGET, kind, content, inputs, what="probing the model", timeout=timeout
                )
    except ChildTimeoutError as hung:
        _log_stderr(hung.said)
        # Not cached: a machine busy enough to slow a big model down is not the file's fault.
        return _Verdict(
            f"{_RUNTIMES[kind]} did not finish loading and running this file {on} within "
            f"{timeout:g} s and was stopped (it hung); {_REEXPORT}, or raise the time limit "
            "(--timeout or TFCOMPRESS_TIMEOUT=SECONDS) for a very large model.",
            "hang",
            cacheable=False,
        )
    except NativeCrashError as crash:
        _log_stderr(crash.said)
        return crashed(kind, crash, on)
    return verdict(kind, reply, on)


def failing_op(reason: str) -> tuple[int, str] | None:
    """The node index and op type that LiteRT's error text names, or None."""
    found = _NODE.search(reason or "")
    return None if found is None else (int(found.group(1)), found.group(2))


def _tflite_cannot_run(runtime: str, action: str, reason: str) -> str:
    """Words for a structurally valid ``.tflite`` that LiteRT cannot load or prepare."""
    op = failing_op(reason)
    where = f"; the op it names is {op[1]} (node {op[0]})" if op else ""
    quantized = re.search(r"zero_point|quantiz|scale", reason, re.IGNORECASE) is not None
    fix = (
        "if a quantizer made it, quantize the float model again keeping "
        f"{op[1] if op else 'that op'} float (a float rule for it)"
        if quantized
        else "run it with a LiteRT that has what it needs (the runtime it was made for), or "
        "export the model without that op"
    )
    return (
        f"{runtime} cannot {action} it ({reason}){where}; the file passed the structural "
        f"checks, so it is not damaged: {fix}."
    )


def crashed(kind: str, crash: NativeCrashError, on: str = "on zeros") -> _Verdict:
    """The verdict on a child that died while it ran the model.

    For a ``.tflite`` (probed after its structural checks passed) a crash is LiteRT failing
    on a valid file, with the op its last words name if any; for ONNX, damage.

    Args:
        kind: ``"tflite"`` or ``"onnx"``.
        crash: How the child ended (its signal, or its exit status, and its last words).
        on: What the model ran on (``"on zeros"``, ``"on the real inputs"``).
    """
    runtime = _RUNTIMES[kind]
    if kind == "tflite":
        how = (
            f"crashed ({_child.signal_name(crash.signal_number)})"
            if crash.signal_number
            else f"exited with status {crash.exit_status}"
        )
        last = _child.last_words(crash.said)
        op = failing_op(last or "")
        said = f" (its last words: {last})" if last else ""
        return _Verdict(
            f"{runtime} {how} when it ran this file once {on}, in a child process that "
            f"contained it{said}: LiteRT cannot run it (crashed in "
            f"{op[1] if op else 'an op it did not name'}); the file passed the structural "
            f"checks, so this is a bug of {runtime} with this model (an int8 LSTM is a known "
            "case), not damage: keep the failing layers float when quantizing, or run it on "
            "another backend.",
            "crash",
        )
    if crash.signal_number:
        name = _child.signal_name(crash.signal_number)
        return _Verdict(
            f"{runtime} crashed ({name}) when it ran this file once {on}, in a child process "
            f"that tfcompress uses to contain such crashes; a valid model never crashes it: "
            f"the file is corrupt or crafted, or it meets a bug of {runtime}; re-export it "
            "from the source model.",
            "crash",
        )
    last = _child.last_words(crash.said)
    said = f" (its last words: {last})" if last else ""
    return _Verdict(
        f"{runtime} exited with status {crash.exit_status} on this file without a "
        f"verdict{said}; {_REEXPORT}.",
        "crash",
    )


def verdict(kind: str, reply: object, on: str = "on zeros") -> _Verdict:
    """The verdict on what the probe's child answered (see :mod:`tfcompress._child.probe`)."""
    runtime = _RUNTIMES[kind]
    if not isinstance(reply, dict):
        return _Verdict(f"{runtime} gave no verdict on this file; {_REEXPORT}.", "crash")
    if reply.get("ok") is True:
        return _Verdict(None)
    stage = str(reply.get("stage", "load"))
    reason = " ".join(str(reply.get("reason", "no reason given")).split())[:300]
    if stage == "run":
        return _Verdict(
            f"{runtime} loaded and prepared the model, but an op refused to run {on} "
            f"({reason}); a refusal of those values is not damage, so the model loads and "
            "is run on the real inputs",
            stage,
            said=reason,
        )
    action = "load" if stage == "load" else "prepare"
    if kind == "tflite":  # structurally valid (checked before the probe): not damage
        return _Verdict(_tflite_cannot_run(runtime, action, reason), stage, said=reason)
    return _Verdict(
        f"{runtime} cannot {action} this model ({reason}); {_REEXPORT}.", stage, said=reason
    )


def _log_stderr(stderr: bytes | None) -> None:
    if stderr:
        tail = stderr.decode("utf-8", errors="replace").strip().splitlines()[-5:]
        logger.debug("probe child stderr (last lines): %s", " | ".join(tail))
