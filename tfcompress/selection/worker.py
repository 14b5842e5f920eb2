"""What the candidate functions share on the worker: identity, input resizing, model building.

Everything here runs where the candidate runs (a pool process, a Dask worker or the
caller's process) and takes plain data, so the tasks pickle and travel.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import sys
import time
from typing import Any

import numpy as np


def worker_identity() -> dict[str, str]:
    """Where this code runs: ``worker`` and ``host``.

    ``worker`` is the Dask worker's address inside a Dask worker, ``local:<pid>`` in a
    local child or pool process, and ``local`` in the caller's own process.

    Example:
        >>> worker_identity()["worker"]  # doctest: +SKIP
        'local'
    """
    host = socket.gethostname()
    if "distributed" in sys.modules:  # only a Dask worker (or client) has imported it
        from distributed import get_worker

        try:
            return {"worker": str(get_worker().address), "host": host}
        except ValueError:  # "No worker found": a client process, not a worker
            pass
    serving = sys.modules.get("tfcompress._child.serve")  # a child of tfcompress's own
    if multiprocessing.parent_process() is not None or getattr(serving, "SERVING", False):
        return {"worker": f"local:{os.getpid()}", "host": host}
    return {"worker": "local", "host": host}


def resize_images(x: np.ndarray, resolution: int) -> np.ndarray:
    """Square images resized to ``resolution`` (bilinear), channels kept, as float32.

    Example:
        >>> resize_images(np.zeros((2, 28, 28, 1), np.float32), 32).shape  # doctest: +SKIP
        (2, 32, 32, 1)
    """
    if x.shape[1:3] == (resolution, resolution):
        return np.asarray(x, np.float32)
    from tfcompress._compat.tf import tensorflow

    tf = tensorflow()
    resized = tf.image.resize(np.asarray(x, np.float32), (resolution, resolution), "bilinear")
    return np.asarray(resized.numpy(), np.float32)


def build_model(task: dict[str, Any]) -> Any:
    """The untrained zoo model of a task (seeded, so every worker builds the same one)."""
    from tfcompress._compat.keras import KerasFlavour, keras_module
    from tfcompress.zoo import create_model

    keras = keras_module(KerasFlavour.KERAS3)
    keras.utils.set_random_seed(int(task["seed"]))
    candidate = task["candidate"]
    resolution = int(candidate["resolution"])
    return create_model(
        candidate["family"],
        input_shape=(resolution, resolution, int(task["channels"])),
        num_classes=int(task["num_classes"]),
        width_multiplier=float(candidate["width"]),
    )


def deployed_int8(
    task: dict[str, Any], model: Any, data: Any, calibration_samples: int | None = None
) -> tuple[Any, bytes]:
    """The task's target and the int8 ``.tflite`` a candidate is deployed with there.

    Only the int8 file is measured and scored: no float32 reference is converted. A target
    whose files need a static batch by default (the GPU: its delegate refuses the shape ops
    a dynamic batch leaves) gets int8 at that batch; the others plain ``"int8"``.
    """
    from tfcompress.quantization.converter_ptq import quantized_content
    from tfcompress.quantization.recipes import Recipe
    from tfcompress.targets.base import get_target

    target = get_target(task["backend"])
    rules = target.rules
    static = rules.batch_is_default and rules.static_batch is not None
    recipe = Recipe("int8", static_batch=rules.static_batch) if static else "int8"
    int8 = quantized_content(
        model,
        recipe=recipe,
        representative_data=data,
        calibration_samples=calibration_samples,
        seed=int(task["seed"]),
    )
    return target, int8.content


def scoring_backend(target: Any, content: bytes) -> str:
    """Where a candidate's accuracy is measured: the target's latency backend where it runs.

    A target with a ``fallback_backend`` (the GPU) is scored there on a machine where its
    own backend cannot run; the others are not (their failure is the candidate's).
    """
    if target.fallback_backend is None:
        return str(target.latency_backend)
    from tfcompress.errors import BackendUnavailableError
    from tfcompress.models import TFLiteModel
    from tfcompress.runtime import create_runner

    try:
        create_runner(
            TFLiteModel(content, label="int8", verified=True), backend=target.latency_backend
        ).close()
    except BackendUnavailableError:
        return str(target.fallback_backend)
    return str(target.latency_backend)


def failure(error: BaseException, stage: str, started: float) -> dict[str, Any]:
    """The record of a candidate that failed: one line naming the stage and the error."""
    message = " ".join(str(error).split())[:300] or "no message"
    return {
        "ok": False,
        "reason": f"{stage} failed: {type(error).__name__}: {message}",
        "seconds": round(time.perf_counter() - started, 3),
        "finished_at": time.time(),
        **worker_identity(),
    }
