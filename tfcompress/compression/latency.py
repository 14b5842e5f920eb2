"""Latency of a candidate on the target backend, measured by the benchmark harness.

And the slowdown rule of :func:`tfcompress.compress`: an attempt that passes the gate but
runs slower than ``max_slowdown`` times the float32 baseline (timed in the same run, on the
same backend) is not returned. Timing noise is handled three ways: the baseline is timed
twice and its lower median kept; an attempt that looks too slow is timed again back to back
with the baseline and judged on that pair (``SearchState.timed``); and it counts as too slow
only when its excess over the limit is beyond the two timings' own intervals
(:class:`Latency`: how far each median lies above its fastest run) and beyond
:data:`FLOOR_MS`. A time whose spread is unknown falls back to :data:`NOISE_TOLERANCE`.
"""

from __future__ import annotations

import math
from typing import Any

from tfcompress.errors import BackendUnavailableError
from tfcompress.targets.base import get_target

#: Timing effort per candidate: enough runs for a stable median of a small model, short
#: enough that a search of ten candidates stays within seconds.
RUNS = 30
MIN_SECONDS = 0.3
#: How far over ``max_slowdown`` x the baseline a median may be before it counts as slower:
#: the medians of 30 runs of one file moved by up to ~10% between runs on the project's
#: shared 2-core machines (and by more on models that run in microseconds).
NOISE_TOLERANCE = 0.10
#: The least excess (ms per sample) that counts as slower, whatever the spreads say: one call
#: of LiteRT's Python ``invoke`` with no op to run costs about 2-4 microseconds on the
#: project's machines (``call_ms`` of ``benchmark --profile-ops``), and that cost moves by as
#: much between two processes: a difference under it is the call, not the file.
FLOOR_MS = 0.004

#: How the findings say what "slower" means.
NOISE_WORDS = (
    f"beyond both timings' spread and {FLOOR_MS * 1000:g} us; +{NOISE_TOLERANCE:.0%} where a "
    "spread is unknown"
)


class Latency(float):
    """A median latency per sample (ms) that knows its interval: p50 - min of its runs.

    Timing noise only adds time: the file's own cost lies between its fastest run and the
    median, and a busy machine widens that gap. (p90 - p50 or a standard deviation are
    dominated by the odd run a loaded machine stretches tenfold: on the project's shared
    2-core machine a 0.38 ms model had p90 4.3 ms.) Behaves as the float it is elsewhere.

    Example:
        >>> Latency(0.5, 0.02), Latency(0.5, 0.02).spread_ms
        (0.5, 0.02)
    """

    spread_ms: float | None

    def __new__(cls, value: float, spread_ms: float | None = None) -> Latency:
        """``value`` ms, with its interval ``spread_ms`` (None: unknown)."""
        made = super().__new__(cls, value)
        made.spread_ms = spread_ms
        return made


def slowdown(latency_ms: float, baseline_ms: float) -> float:
    """How many times the baseline's latency ``latency_ms`` is (inf for a zero baseline).

    Example:
        >>> slowdown(8.8, 0.55)
        16.0
    """
    return latency_ms / baseline_ms if baseline_ms > 0 else math.inf


def too_slow(latency_ms: float, baseline_ms: float, limit: float) -> bool:
    """Whether ``latency_ms`` is over ``limit`` x ``baseline_ms`` beyond the timings' noise.

    Two :class:`Latency` values with spreads: slower when the excess is beyond both their
    combined spread (root of the sum of squares, the baseline's scaled by ``limit``) and
    :data:`FLOOR_MS`. Plain numbers (a spread unknown): beyond :data:`NOISE_TOLERANCE`.

    Example:
        >>> too_slow(1.05, 1.0, 1.0), too_slow(1.2, 1.0, 1.0), too_slow(8.8, 0.55, 16)
        (False, True, False)
        >>> too_slow(Latency(1.2, 0.3), Latency(1.0, 0.1), 1.0)  # within the spread
        False
        >>> too_slow(Latency(0.0125, 0.0), Latency(0.010, 0.0), 1.0)  # 2.5 us: under the floor
        False
        >>> too_slow(Latency(1.06, 0.01), Latency(1.0, 0.01), 1.0)  # beyond both
        True
    """
    excess = latency_ms - limit * baseline_ms
    spreads = (getattr(latency_ms, "spread_ms", None), getattr(baseline_ms, "spread_ms", None))
    if spreads[0] is None or spreads[1] is None:
        return latency_ms > limit * baseline_ms * (1 + NOISE_TOLERANCE)
    return excess > max(math.hypot(spreads[0], limit * spreads[1]), FLOOR_MS)


def allowing(ratio: float) -> str:
    """The ``max_slowdown`` that lets a ``ratio`` through: rounded up to a tenth, as typed.

    Example:
        >>> allowing(16.0), allowing(16.01), allowing(1.234)
        ('16', '16.1', '1.3')
    """
    if not math.isfinite(ratio):
        return "inf"
    return f"{math.ceil(round(ratio * 10, 6)) / 10:g}"


def ms(value: float) -> str:
    """A latency in ms with three significant digits, never in exponent notation.

    Example:
        >>> ms(8.8), ms(0.55), ms(0.0015), ms(376.2)
        ('8.80', '0.550', '0.00150', '376')
    """
    if value <= 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, 2 - math.floor(math.log10(value)))
    return f"{value:.{decimals}f}"


def slowdown_reason(
    name: str, latency_ms: float, baseline: str, baseline_ms: float, backend: str
) -> str:
    """Why a passing attempt is too slow to return, with both latencies and the flag.

    Example:
        >>> for part in slowdown_reason("int16x8", 8.8, "float32", 0.55, "cpu").split("; "):
        ...     print(part)
        int16x8 8.80 ms/sample is 16.0x float32's 0.550 ms on cpu
        allow it with max_slowdown=16 (--max-slowdown 16)
    """
    ratio = slowdown(latency_ms, baseline_ms)
    allow = allowing(ratio)
    times = f"{ratio:.1f}" if ratio >= 10 else f"{ratio:.2f}"
    return (
        f"{name} {ms(latency_ms)} ms/sample is {times}x {baseline}'s {ms(baseline_ms)} ms "
        f"on {backend}; allow it with max_slowdown={allow} (--max-slowdown {allow})"
    )


def measure_latency(
    content: bytes, *, backend: str, threads: int, name: str, where: Any = None
) -> Latency:
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
        The median (p50) latency per sample in milliseconds (per call at batch 1), with its
        spread (:class:`Latency`).

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
    return Latency(timed.latency_ms, timed.spread_ms)


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


def host_time_finding(state: Any) -> str:
    """What the times of a target that does not judge latency are (``--target mcu``).

    Example:
        >>> host_time_finding(state)  # doctest: +SKIP
        'every attempt timed on tflm (host time of TFLite Micro's reference kernels ...'
    """
    device = get_target(state.target)
    return (
        f"every attempt timed on {state.latency_backend} with {state.threads} thread(s): host "
        f"time on this machine, not a device figure for {device.display_name}, shown and never "
        f"judged (no attempt was refused as slower); {state.baseline_name} "
        f"{ms(state.baseline_ms or 0)} ms; ranked by {device.display_name}'s own rank, then "
        "size"
    )
