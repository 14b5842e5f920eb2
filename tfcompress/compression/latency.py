"""Latency of a candidate on the target backend, measured by the benchmark harness."""

from __future__ import annotations

from typing import Any

from tfcompress.errors import BackendUnavailableError

#: Timing effort per candidate: enough runs for a stable median of a small model, short
#: enough that a search of ten candidates stays within seconds.
RUNS = 30
MIN_SECONDS = 0.3


def measure_latency(content: bytes, *, backend: str, threads: int, name: str) -> float:
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

    Returns:
        The median (p50) latency per sample in milliseconds (per call at batch 1).

    Raises:
        BackendUnavailableError: The harness could not time the artifact (its row's status
            says why).

    Example:
        >>> measure_latency(data, backend="cpu", threads=1, name="int8")  # doctest: +SKIP
        0.412
    """
    from tfcompress.bench.harness import benchmark
    from tfcompress.models import TFLiteModel

    result = benchmark(
        {name: TFLiteModel(content, label=name, verified=True)},
        backends=(backend,),
        threads=(threads,),
        batch_sizes=(1,),
        runs=RUNS,
        min_seconds=MIN_SECONDS,
        warmup_runs=2,
        warmup_seconds=0.05,
    )
    rows = [row for row in result.rows if row.latency_per_sample_ms is not None]
    if not rows:
        status = "; ".join(row.status for row in result.rows) or "no row"
        raise BackendUnavailableError(
            f"cannot time {name} on backend {backend!r} ({status}); choose a target this "
            "machine can run, or objective='size'."
        )
    return float(rows[0].latency_per_sample_ms or 0.0)


def int8_finding(attempts: Any, *, backend: str, threads: int) -> str | None:
    """What the measurements say about int8 against float here, in one sentence.

    Args:
        attempts: The attempts of a search (those named ``int8``/``float32``/``float16``
            with a latency are compared).
        backend: The backend they were measured on.
        threads: The thread count.

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
    env = capture_environment()
    dots = env.int8_dot_product
    if dots is None:
        because = env.int8_dot_product_unknown_because
        cpu = f"whether this CPU has int8 dot-product instructions is unknown ({because})"
    elif dots:
        cpu = f"this CPU has int8 dot-product instructions ({', '.join(dots)})"
    else:
        cpu = "this CPU lists no int8 dot-product instructions (no VNNI/AMX/DOTPROD)"
    return (
        f"int8 is {word} than {fastest} on {backend} with {threads} thread(s) here: "
        f"int8 {timed['int8']:.3f} ms vs {fastest} {timed[fastest]:.3f} ms (median per "
        "sample); "
        f"{cpu}."
    )
