"""Latency of a candidate on the target backend, measured by the benchmark harness."""

from __future__ import annotations

from typing import Any

from tfcompress.errors import BackendUnavailableError

#: Timing effort per candidate: enough runs for a stable median of a small model, short
#: enough that a search of ten candidates stays within seconds.
RUNS = 30
MIN_SECONDS = 0.3


def measure_latency(
    content: bytes, *, backend: str, threads: int, name: str, where: Any = None
) -> float:
    """Median latency per sample (ms) of a ``.tflite`` on ``backend`` at ``threads`` threads.

    Timed at batch 1, which a file with a static batch runs as one call of its batch: the
    median of that call divided by its samples, so candidates made at different static
    batches (and the float32 reference) are compared per sample. Inputs are the harness's
    seeded random inputs: latency does not depend on the values.

    Args:
        content: The ``.tflite`` bytes.
        backend: Runtime backend (``cpu``, ``gpu``, ``edgetpu``).
        threads: CPU threads.
        name: Display name of the artifact.
        where: A :class:`~tfcompress.bench.device_latency.LatencyDevice`: time it on that
            Dask worker (``compress --on``); None: here.

    Returns:
        The median (p50) latency per sample in milliseconds (per call at batch 1).

    Raises:
        BackendUnavailableError: The harness could not time the artifact (its row's status
            says why).

    Example:
        >>> measure_latency(data, backend="cpu", threads=1, name="int8")  # doctest: +SKIP
        0.412
    """
    from tfcompress.bench.device_latency import time_tflite

    timed = time_tflite(
        content,
        backend=backend,
        threads=threads,
        name=name,
        runs=RUNS,
        min_seconds=MIN_SECONDS,
        warmup_runs=2,
        warmup_seconds=0.05,
        where=where,
    )
    if timed.latency_ms is None:
        place = "this machine" if where is None else f"device {where.name}"
        raise BackendUnavailableError(
            f"cannot time {name} on backend {backend!r} on {place} ({timed.status}); choose a "
            "target it can run, or objective='size'."
        )
    return timed.latency_ms


def int8_finding(
    attempts: Any,
    *,
    backend: str,
    threads: int,
    device: str | None = None,
    environment: Any = None,
) -> str | None:
    """What the measurements say about int8 against float here, in one sentence.

    Args:
        attempts: The attempts of a search (those named ``int8``/``float32``/``float16``
            with a latency are compared).
        backend: The backend they were measured on.
        threads: The thread count.
        device: The Dask worker they were measured on (``compress --on``); None: here.
        environment: That device's environment, read there (None: this machine's).

    Returns:
        The sentence, or None when int8 and a float artifact were not both timed.
    """
    from tfcompress.bench.environment import capture_environment

    timed = {a.name: a.latency_ms for a in attempts if a.latency_ms is not None}
    floats = [n for n in ("float32", "float16") if n in timed]
    if "int8" not in timed or not floats:
        return None
    fastest = min(floats, key=lambda n: timed[n])
    ratio = timed[fastest] / timed["int8"]  # > 1: int8 faster
    word = "faster" if ratio >= 1.05 else ("slower" if ratio <= 1 / 1.05 else "no faster")
    env = capture_environment() if environment is None else environment
    dots = env.int8_dot_product
    which = "this CPU" if device is None else f"{device}'s CPU"
    if dots is None:
        because = env.int8_dot_product_unknown_because
        cpu = f"whether {which} has int8 dot-product instructions is unknown ({because})"
    elif dots:
        cpu = f"{which} has int8 dot-product instructions ({', '.join(dots)})"
    else:
        cpu = f"{which} lists no int8 dot-product instructions (no VNNI/AMX/DOTPROD)"
    place = "here" if device is None else f"on device {device}"
    return (
        f"int8 is {word} than {fastest} on {backend} with {threads} thread(s) {place}: "
        f"int8 {timed['int8']:.3f} ms vs {fastest} {timed[fastest]:.3f} ms (median per "
        "sample); "
        f"{cpu}."
    )
