"""Fine-tuning in a child process, so a native crash of TensorFlow cannot take the caller down.

TensorFlow 2.21's oneDNN kernels have been seen to segfault inside ``fit`` on some CPUs
(plain tf-keras training too); in-process, that kills ``tfcompress qat`` (exit 139) after
minutes of work, and a ``compress --train`` search with it. With ``isolate=True``,
:func:`tfcompress.qat`, :func:`~tfcompress.prune` and :func:`~tfcompress.cluster` run in a
child Python process, through the one mechanism every native call that model or data drive
uses (:mod:`tfcompress._child`, which runs :func:`run_request`):

* the parent loads and checks the data (so bad data fails at once), saves the model where
  it is not a file already, and hands both to the child in a private temporary folder;
* the child runs the technique and hands back the :class:`TrainingResult` (without
  ``keras_model``: the fine-tuned Keras model stays in the child);
* a child killed by a signal becomes a one-line :class:`~tfcompress.errors.NativeCrashError`
  naming the signal, after one retry with ``TF_ENABLE_ONEDNN_OPTS=0`` (oneDNN off, set
  before TensorFlow is imported) when that was not already set and the signal is one a
  kernel bug raises; a result from the retry says so in its ``warnings``.

The price is the child's start: it imports TensorFlow and tfmot and loads the model again
(measured in docs/benchmarks.md, section ``warm_child``). The child stays warm for the
process's next fine-tune or conversion, so only the first pays the imports. It runs under
the child's time and memory limits (``TFCOMPRESS_TIMEOUT``, ``TFCOMPRESS_MEMORY_LIMIT``).

"""

from __future__ import annotations

import logging
import os
import signal
import tempfile
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from tfcompress._child import call, last_words, signal_name
from tfcompress.errors import NativeCrashError
from tfcompress.training.configs import TrainingConfig

logger = logging.getLogger(__name__)

ONEDNN = "TF_ENABLE_ONEDNN_OPTS"
#: What the child runs (tests point it at a program that really crashes).
CHILD_TARGET = "tfcompress.training.isolation:run_request"
#: Signals a kernel bug raises; SIGKILL (the out-of-memory killer) is not retried.
_KERNEL_SIGNALS = frozenset(
    {signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT}
)


def run_isolated(
    model: Any,
    config: TrainingConfig,
    *,
    safe_mode: bool,
    train_data: Any,
    eval_data: Any = None,
    gate: Any = None,
    gate_settings: Any = None,
) -> Any:
    """Run ``tfcompress.<technique>(model, config=config, ...)`` in a child process.

    The config crosses as its JSON data (``config.to_dict()``), read back in the child with
    :func:`~tfcompress.training.configs.config_from_dict`, so the child runs exactly what a
    compress report would record.

    Raises:
        NativeCrashError: The child died by a signal (after the retry, where one applies).
        TFCompressError: Whatever the technique raised in the child (same type, same message).
        RuntimeError: A bug in the child (its type and message).
    """
    from tfcompress.training.setup import load_keras, read_samples

    technique = config.technique
    with tempfile.TemporaryDirectory(prefix="tfcompress-train-") as folder:
        loaded, signature = load_keras(model, safe_mode)  # refused here as in process
        if isinstance(model, str | os.PathLike):
            path, child_safe_mode = Path(model).resolve(), safe_mode
        else:  # the caller's own model: saved by us, loaded back as it was
            path, child_safe_mode = Path(folder) / "model.keras", False
            loaded.save(path)
        # The data is loaded and checked here, so bad data fails before the child starts.
        options = {
            "train_data": read_samples(train_data, signature, "training data"),
            "eval_data": None
            if eval_data is None
            else read_samples(eval_data, signature, "eval data"),
            "gate": gate,
            "gate_settings": gate_settings,
        }
        request = {
            "technique": technique,
            "config": config.to_dict(),
            "model": str(path),
            "safe_mode": child_safe_mode,
            "options": options,
        }
        started = time.monotonic()
        warnings: tuple[str, ...] = ()
        try:
            result = _run(technique, request, os.environ, warm=True)
        except NativeCrashError as crash:
            if not _retry_helps(crash.signal_number):
                raise NativeCrashError(_crash_message(technique, crash, retried=False)) from None
            name = signal_name(crash.signal_number)
            logger.warning(
                "%s crashed in TensorFlow's native code (%s) in its child process; retrying "
                "once with %s=0 (oneDNN off)",
                technique,
                name,
                ONEDNN,
            )
            try:  # a child of its own: the warm one stays as the caller's environment wants
                result = _run(technique, request, {**os.environ, ONEDNN: "0"}, warm=False)
            except NativeCrashError as again:
                raise NativeCrashError(_crash_message(technique, again, retried=True)) from None
            warnings = (
                f"fine-tuning crashed in TensorFlow's native code ({name}) with oneDNN "
                f"on; this result comes from a retry with {ONEDNN}=0 (set it before "
                "running to skip the crash)",
            )
        logger.info(
            "%s ran in a child process in %.1fs (isolate=True)",
            technique,
            time.monotonic() - started,
        )
    if warnings:
        result = replace(result, warnings=(*warnings, *result.warnings))
    return result


def run_request(request: dict[str, Any]) -> Any:
    """In the child: read the config, load the model, run the technique, return its result.

    The request is what :func:`run_isolated` sends: the technique, its config as JSON data
    (read back with :func:`~tfcompress.training.configs.config_from_dict`), the model as a
    file, the data (already loaded and checked in the caller) and the gate. The result goes
    back without ``keras_model``: the fine-tuned Keras model stays in the child.
    """
    from tfcompress.models import load_model
    from tfcompress.training.cluster import cluster
    from tfcompress.training.configs import config_from_dict
    from tfcompress.training.prune import prune
    from tfcompress.training.qat import qat

    verbs = {"qat": qat, "prune": prune, "cluster": cluster}
    technique = request["technique"]
    config = config_from_dict(technique, request["config"])
    model = load_model(request["model"], safe_mode=request["safe_mode"])
    result = verbs[technique](model, config=config, isolate=False, **request["options"])
    return replace(result, keras_model=None)


def _run(technique: str, request: dict[str, Any], env: Mapping[str, str], *, warm: bool) -> Any:
    """The request in the process's warm child, or in a child of its own (``warm=False``).

    Fine-tuning's memory grows with the batch and the model, not with what it is handed: it
    gets the whole limit (``TFCOMPRESS_MEMORY_LIMIT`` or half the machine), never a share
    scaled to the request (:func:`tfcompress._limits.call_memory`).
    """
    from tfcompress._limits import CHILD_MEMORY

    return call(
        CHILD_TARGET,
        request,
        what=technique,
        env=env,
        warm=warm,
        memory=CHILD_MEMORY.value(),
    )


def _retry_helps(number: int) -> bool:
    return number in _KERNEL_SIGNALS and os.environ.get(ONEDNN, "") != "0"


def _crash_message(technique: str, crash: NativeCrashError, *, retried: bool) -> str:
    name = signal_name(crash.signal_number)
    last = last_words(crash.said)
    if last:
        logger.debug("child stderr (last lines): %s", crash.said[-2000:])
    said = f"; its last words: {last}" if last else ""
    if crash.signal_number == signal.SIGKILL:
        return (
            f"{technique} was killed ({name}) in its child process, usually by the "
            f"out-of-memory killer{said}; lower the batch size or free memory. Nothing was "
            "written."
        )
    if retried:
        return (
            f"{technique} crashed in TensorFlow's native code ({name}) in its child process, "
            f"and again with {ONEDNN}=0 (oneDNN off, the known workaround){said}; try another "
            "batch size or TensorFlow version. Nothing was written."
        )
    if os.environ.get(ONEDNN, "") == "0":
        return (
            f"{technique} crashed in TensorFlow's native code ({name}) in its child process "
            f"with {ONEDNN}=0 already set{said}; try another batch size or TensorFlow "
            "version. Nothing was written."
        )
    return (
        f"{technique} crashed in native code ({name}) in its child process{said}; when "
        f"TensorFlow's oneDNN kernels are the cause, {ONEDNN}=0 set before running avoids "
        "it. Nothing was written."
    )
