"""Phase 1, no training: a candidate's parameters, MACs, int8 size and measured latency."""

from __future__ import annotations

import time
from typing import Any

from tfcompress.selection.worker import (
    build_model,
    deployed_int8,
    failure,
    resize_images,
    worker_identity,
)
from tfcompress.targets.base import get_target


def measure_candidate(task: dict[str, Any]) -> dict[str, Any]:
    """Build the untrained model, quantize it to int8 and measure it on this worker.

    Latency does not depend on the weights' values, so the untrained int8 model has the
    latency of the trained one. The calibration samples only set the int8 ranges. The
    weights are first nudged by tiny random amounts: an untrained model's identical
    constants (zero biases, unit batch-norm scales) would otherwise be stored once by the
    converter, and the size would under-state the trained artifact's.

    Args:
        task: Plain data: ``candidate`` (family, width, resolution), ``channels``,
            ``num_classes``, ``seed``, ``calibration`` (a few training images, any size),
            ``backend`` (the target's name), ``threads``, ``runs``, ``min_seconds``;
            ``latency_optional`` (no latency budget) lets a target with a fallback (the
            GPU) go on where its latency backend cannot run: ``latency_ms`` None, and
            ``latency_unmeasured`` says why; ``latency_on`` (``select --on``): the latency
            is measured on a device by the caller, so the int8 bytes come back as ``int8``
            instead (:func:`time_on_device` adds the latency there).

    Returns:
        ``ok``, ``params``, ``macs`` (the harness's counter on the ``.tflite``),
        ``size_bytes`` (int8 ``.tflite``), ``latency_ms`` (p50 per sample, at batch 1),
        ``latency_backend``, ``threads``, ``target_measures`` (each budget field of the
        target, e.g. the Edge TPU segments the linter predicts), ``worker``, ``host``, ``seconds``,
        ``finished_at``; or ``ok: False`` with a one-line ``reason`` when the model could
        not be built, converted or run (never raises for a candidate's own failure).

    Example:
        >>> measure_candidate(task)["latency_ms"]  # doctest: +SKIP
        1.27
    """
    from tfcompress.bench.harness import benchmark

    started = time.perf_counter()
    stage = "build"
    try:
        model = build_model(task)
        params = int(model.count_params())
        _perturb(model, int(task["seed"]))
        stage = "int8 conversion"
        calibration = resize_images(task["calibration"], int(task["candidate"]["resolution"]))
        target, int8 = deployed_int8(task, model, calibration)
        stage = "target budgets"
        sizes = {
            "params": params,
            "size_bytes": len(int8),
            "latency_backend": task["backend"],
            "threads": int(task["threads"]),
            "target_measures": {b.name: b.measure(int8) for b in target.budget_fields},
        }
        if task.get("latency_on"):  # timed on the device by the caller: the bytes go back
            # macs: None, the device's benchmark row counts them
            return {"ok": True, **sizes, "macs": None, "int8": int8}
        stage = "latency measurement"
        name = f"{task['candidate']['family']}_int8"
        result = benchmark(
            {name: int8},
            backends=[target.latency_backend],
            threads=[int(task["threads"])],
            batch_sizes=[1],
            runs=int(task["runs"]),
            min_seconds=float(task["min_seconds"]),
        )
    except Exception as error:  # the candidate fails with its reason; the search goes on
        return failure(error, stage, started)
    row = result.rows[0]
    measured: dict[str, Any] = {
        **sizes,
        "macs": row.size.macs if row.size else None,
        "seconds": round(time.perf_counter() - started, 3),
        "finished_at": time.time(),
        **worker_identity(),
    }
    per_sample = row.latency_per_sample_ms if row.ok else None
    if per_sample is None and _may_skip_latency(task, target, row.status):
        # No GPU on this worker and no latency budget: the candidate goes on unmeasured, and
        # the search ranks without latency (accuracy, then size), saying so.
        return {**measured, "ok": True, "latency_ms": None, "latency_unmeasured": row.status}
    if per_sample is None:
        return {**measured, "ok": False, "reason": f"latency measurement: {row.status}"}
    return {**measured, "ok": True, "latency_ms": round(float(per_sample), 4)}


def time_on_device(
    outcome: dict[str, Any], task: dict[str, Any], started: float, where: Any
) -> dict[str, Any]:
    """Phase 1's outcome of ``select --on``: its int8 file timed on the device ``where``.

    Args:
        outcome: What :func:`measure_candidate` returned with ``latency_on`` (``int8``
            holds the file; it is dropped here).
        task: The task it ran (backend, threads, runs, min_seconds, candidate).
        where: The :class:`~tfcompress.bench.device_latency.LatencyDevice`.
        started: ``time.perf_counter()`` when the candidate was submitted.

    Returns:
        The outcome as :func:`measure_candidate` returns it, ``latency_ms`` measured on the
        device; ``worker`` and ``host`` are the device's, and ``device`` its name.
    """
    from tfcompress.bench.device_latency import time_tflite

    outcome = dict(outcome)
    content = outcome.pop("int8", None)
    if not outcome.get("ok") or content is None:
        return outcome
    target = get_target(task["backend"])
    try:
        timed = time_tflite(
            content,
            backend=target.latency_backend,
            threads=int(task["threads"]),
            name=f"{task['candidate']['family']}_int8",
            runs=int(task["runs"]),
            min_seconds=float(task["min_seconds"]),
            where=where,
        )
    except Exception as error:  # the device could not take the task: this candidate fails
        return failure(error, f"latency measurement on device {where.name}", started)
    measured = {
        **outcome,
        "worker": where.address,
        "host": timed.hostname or where.name,
        "device": where.name,
        "macs": timed.macs,
        "seconds": round(time.perf_counter() - started, 3),
        "finished_at": time.time(),
    }
    if timed.latency_ms is None and _may_skip_latency(task, target, timed.status):
        return {**measured, "latency_ms": None, "latency_unmeasured": timed.status}
    if timed.latency_ms is None:
        return {
            **measured,
            "ok": False,
            "reason": f"latency measurement on device {where.name}: {timed.status}",
        }
    return {**measured, "latency_ms": round(timed.latency_ms, 4)}


def _may_skip_latency(task: dict[str, Any], target: Any, status: str) -> bool:
    """The target runs without its latency backend (the GPU's), and nothing needs latency."""
    unavailable = status.startswith("unavailable")
    return bool(task.get("latency_optional")) and unavailable and bool(target.fallback_backend)


def _perturb(model: Any, seed: int) -> None:
    """Add tiny positive noise to every weight, so no two constant tensors are identical.

    Positive, so batch-norm variances stay valid; 1e-3 is far below what changes latency.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    model.set_weights(
        [w + rng.uniform(0.0, 1e-3, np.shape(w)).astype(w.dtype) for w in model.get_weights()]
    )
