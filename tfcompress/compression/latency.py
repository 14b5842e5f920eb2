"""What compress says about latency: the slowdown rule's words and its findings.

The rule of :func:`tfcompress.compress`: an attempt that passes the gate but runs slower
than ``max_slowdown`` times the float32 baseline (timed in the same run, on the same
backend) is not returned. The timing and the judging live in
:mod:`tfcompress.quantization.methods.slow_ops` (``measure_latency``, ``Latency``,
``slowdown``), shared with the per-op method; an attempt that looks too slow is timed again
back to back with the baseline (``SearchState.timed``). Here: the limit that would let a
ratio through, the reason a passing attempt is refused, and the notes on int8 and host time.
"""

from __future__ import annotations

import math
from typing import Any

from tfcompress.quantization.methods.slow_ops import ms, slowdown
from tfcompress.targets.base import get_target


def allowing(ratio: float) -> str:
    """The ``max_slowdown`` that lets a ``ratio`` through: rounded up to a tenth, as typed.

    Example:
        >>> allowing(16.0), allowing(16.01), allowing(1.234)
        ('16', '16.1', '1.3')
    """
    if not math.isfinite(ratio):
        return "inf"
    return f"{math.ceil(round(ratio * 10, 6)) / 10:g}"


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
