"""Which ops int8 makes slower, measured op by op, and the climb that keeps them float.

Whole-model precision is the wrong unit: an op whose int8 kernel is slow (MTCNN O-Net's PRELU
runs ~45x slower in int8 than in float on an AVX-512 VNNI CPU) can make the int8 file slower
than float32 while every other op gains. Shared by ``quantize --methods per-op``
(:mod:`.per_op`) and compress's ``per-op`` rung (:mod:`tfcompress.compression.perop`), which
make and judge their steps each in their own way but decide the same things here:

1. every op of the float32 file and of the int8 file is timed on the backend
   (``benchmark --profile-ops``: :mod:`tfcompress.bench.op_profile`, each op alone on the
   values it gets in the model) and the ops slower in int8 are taken (:func:`slow_ops`:
   beyond both timings' spread and :data:`OP_FLOOR_MS`);
2. the ops are ranked by the error their own op adds (the caller's ranking; never the
   model's outputs);
3. :func:`climb`: int8 with the slow ops float, then with the 1, 2, 4... worst-error ops
   float as well (:func:`plan_steps`), until a step is good enough.

Steps are named by what they hold: ``int8 (5 PRELU, 1 CONV_2D float)``. And the timing both
judge files by: a median per sample with its interval (:class:`Latency`), slower only beyond
both intervals and a floor (:func:`too_slow`).

Example:
    >>> describe(["a", "b", "c"], {"a": "PRELU", "b": "PRELU", "c": "CONV_2D"})
    'int8 (2 PRELU, 1 CONV_2D float)'
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tfcompress.errors import BackendUnavailableError

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


#: The least excess of an op's int8 time over its float time (ms) that makes it slow, whatever
#: the spreads say: an op's time is its one-op model's median less the empty call's (about
#: 2-4 us here), and half a microsecond is within what that subtraction moves between runs.
OP_FLOOR_MS = 0.0005
#: The most error-ranked ops one climb adds (steps of 1, 2, 4, 8 on top of the slow ops).
MAX_WORST = 8
#: Each op's share of the profile's timing: enough runs for stable medians of one-op models.
PROFILE_RUNS = 20
PROFILE_SECONDS = 0.3
_GLUE = frozenset({"QUANTIZE", "DEQUANTIZE"})


@dataclass(frozen=True)
class SlowOp:
    """An op int8 makes slower: its output name, opcode and both times (ms per call).

    Example:
        >>> str(SlowOp("p", "PRELU", 0.383, 0.0082))
        'PRELU 383.0 us in int8 vs 8.2 us in float'
    """

    name: str
    op: str
    int8_ms: float
    float_ms: float

    def __str__(self) -> str:
        return (
            f"{self.op} {self.int8_ms * 1000:.1f} us in int8 vs {self.float_ms * 1000:.1f} us "
            "in float"
        )


def slow_ops(
    float_profile: Mapping[str, Any],
    int8_profile: Mapping[str, Any],
    *,
    already_float: Sequence[str] = (),
) -> list[SlowOp]:
    """The ops of the float file that run slower in the int8 file, the largest excess first.

    Each int8 op is matched to the float op whose output name is its own, or the longest
    float name its name starts with (the converter renames an output op ``...:01`` and
    gives the model's name to the DEQUANTIZE after it: both count as that op's int8 cost).
    QUANTIZE/DEQUANTIZE that match no float op (the input's) are nobody's. An op is slow when
    its int8 time exceeds its float time by more than the two timings' combined spread
    (how far each median lies above its fastest run: ``spread_ms`` of
    :mod:`tfcompress.bench.op_profile`) and than :data:`OP_FLOOR_MS`.

    Args:
        float_profile: ``op_profile`` of the float32 file's row.
        int8_profile: ``op_profile`` of the int8 file's row.
        already_float: Output names that stay float in the int8 file (nothing to gain).

    Returns:
        The slow ops, largest excess first.

    Example:
        >>> row = lambda name, op, ms: {"output": name, "op": op, "ms": ms, "spread_ms": 0.0}
        >>> f = {"ops": [row("c", "CONV_2D", 0.03), row("p", "PRELU", 0.008)]}
        >>> q = {"ops": [row("c", "CONV_2D", 0.01), row("p", "PRELU", 0.38)]}
        >>> [s.name for s in slow_ops(f, q)]
        ['p']
    """
    floats = {op["output"]: op for op in float_profile.get("ops", ()) if op.get("ms") is not None}
    longest_first = sorted(floats, key=len, reverse=True)
    costs: dict[str, list[float]] = {}
    for op in int8_profile.get("ops", ()):
        if op.get("ms") is None:
            continue
        name = op["output"] if op["output"] in floats else None
        if name is None:
            name = next((n for n in longest_first if op["output"].startswith(n)), None)
        if name is None or (op["op"] in _GLUE and floats[name]["op"] in _GLUE):
            continue
        cost = costs.setdefault(name, [0.0, 0.0])
        cost[0] += op["ms"]
        cost[1] += (op.get("spread_ms") or 0.0) ** 2
    slow = []
    for name, (ms, variance) in costs.items():
        reference = floats[name]
        if name in already_float or reference["op"] in _GLUE:
            continue
        noise = math.sqrt(variance + (reference.get("spread_ms") or 0.0) ** 2)
        if ms - reference["ms"] > max(noise, OP_FLOOR_MS):
            slow.append(SlowOp(name, reference["op"], ms, reference["ms"]))
    return sorted(slow, key=lambda s: -(s.int8_ms - s.float_ms))


def describe(names: Sequence[str], opcodes: Mapping[str, str]) -> str:
    """The attempt's name: what it holds (``int8 (5 PRELU float)``), most frequent op first."""
    counts = Counter(opcodes.get(name, "op") for name in names)
    if not counts:
        return "int8"
    held = ", ".join(f"{count} {op}" for op, count in counts.most_common())
    return f"int8 ({held} float)"


def opcodes_of(content: bytes) -> dict[str, str]:
    """Output tensor name -> opcode of every op of a ``.tflite``'s first subgraph."""
    from tfcompress.models.tflite_file import read_tflite

    graph = read_tflite(content).subgraphs[0]
    return {
        graph.tensors[i].name: op.opcode
        for op in graph.operators
        for i in op.outputs[:1]
        if 0 <= i < len(graph.tensors)
    }


def profile(
    content: bytes, name: str, *, backend: str, threads: int, where: Any = None
) -> dict[str, Any] | str:
    """The per-op profile of ``content`` on ``backend``, or why there is none."""
    from tfcompress.bench.device_latency import time_tflite

    if backend != "cpu":
        return f"no per-op profile on the {backend} backend (LiteRT cpu only)"
    timed = time_tflite(
        content, backend="cpu", threads=threads, name=name, runs=PROFILE_RUNS,
        min_seconds=PROFILE_SECONDS, warmup_runs=2, warmup_seconds=0.05, where=where,
        profile_ops=True,
    )  # fmt: skip
    found = timed.op_profile or {}
    if not found.get("ops"):
        return str(found.get("unavailable") or f"no per-op profile came back ({timed.status})")
    return found


def find_slow(
    int8: bytes, reference: bytes, *, backend: str, threads: int, where: Any = None
) -> tuple[list[SlowOp], str]:
    """The ops of ``int8`` slower than in ``reference``, and one line saying what was found."""
    from tfcompress.models.tflite_file import read_tflite
    from tfcompress.quantization.float_ops import _float_nodes

    start = time.monotonic()
    profiles = [profile(content, name, backend=backend, threads=threads, where=where)
                for content, name in ((reference, "float32"), (int8, "int8"))]  # fmt: skip
    for found in profiles:
        if isinstance(found, str):
            return [], f"ops not timed one by one: {found}"
    floats = [name for _, name in _float_nodes(read_tflite(int8))]
    slow = slow_ops(profiles[0], profiles[1], already_float=floats)  # type: ignore[arg-type]
    took = time.monotonic() - start
    if not slow:
        return [], f"no op is slower in int8 than in float on {backend} ({took:.1f}s)"
    shown = "; ".join(str(s) for s in slow[:4]) + (" ..." if len(slow) > 4 else "")
    return slow, (
        f"{len(slow)} op(s) slower in int8 than in float on {backend}, timed one by one in "
        f"{took:.1f}s: {shown}"
    )


def rank_by_added_error(
    snr_db: dict[str, float], reference: bytes, *, outputs: bool = False
) -> list[str]:
    """Tensor names, the op that adds the most quantization noise first.

    Args:
        snr_db: Each quantized tensor's SNR against the float model (dB; inf: exact).
        reference: The float ``.tflite`` whose ops wrote those tensors (their inputs are
            read from its graph; a constant or an input the search did not measure adds
            no noise of its own).
        outputs: Rank the model's output tensors too (False: they are left out).

    Returns:
        The names of ``snr_db`` (without the model's outputs unless ``outputs``) whose op adds
        noise: ``10**(-snr/10)`` less the largest such value among the op's measured inputs,
        largest first (ties: lower SNR first). An op that adds none (a RESHAPE, TRANSPOSE or
        MAX_POOL_2D is exact in int8: on MTCNN's O-Net they ranked next, and keeping them
        float only added time) is left out: keeping it float cannot lower the error.

    Example:
        >>> from tfcompress.models.tflite_file import read_tflite  # doctest: +SKIP
        >>> rank_by_added_error({"conv": 20.0, "out": 10.0}, float_file)  # doctest: +SKIP
        ['conv']
    """
    from tfcompress.models.tflite_file import read_tflite

    noise = {name: _noise(snr) for name, snr in snr_db.items()}
    graph = read_tflite(reference).subgraphs[0]
    names = [t.name for t in graph.tensors]
    left_out = set() if outputs else {names[i] for i in graph.outputs if 0 <= i < len(names)}
    inputs: dict[str, list[str]] = {}
    for op in graph.operators:
        read = [names[i] for i in op.inputs if 0 <= i < len(names)]
        for index in op.outputs:
            if 0 <= index < len(names):
                inputs[names[index]] = read
    added = {
        name: own - max((noise[i] for i in inputs.get(name, ()) if i in noise), default=0.0)
        for name, own in noise.items()
    }
    ranked = sorted(noise, key=lambda n: (-added[n], snr_db[n]))
    return [name for name in ranked if name not in left_out and added[name] > 0]


def _noise(snr_db: float) -> float:
    """Noise power over signal power: 10**(-SNR/10) (0 for an exact tensor)."""
    if math.isnan(snr_db):
        return math.inf
    return 0.0 if snr_db == math.inf else 10 ** (-snr_db / 10)


def worst_first(errors: Iterable[Any], reference: bytes) -> list[str]:
    """:func:`rank_by_added_error` of a layer-errors report's tensors (``.tensor``, ``.snr_db``)."""
    return rank_by_added_error({t.tensor: t.snr_db for t in errors}, reference)


def plan_steps(slow: Sequence[str], worst: Sequence[str]) -> list[tuple[str, ...]]:
    """The float sets of the climb: the slow ops, then those plus 1, 2, 4... worst-error ops.

    Example:
        >>> plan_steps(["p1", "p2"], ["c", "p1", "d", "e"])
        [('p1', 'p2'), ('p1', 'p2', 'c'), ('p1', 'p2', 'c', 'd'), ('p1', 'p2', 'c', 'd', 'e')]
        >>> plan_steps([], ["c", "d"])
        [('c',), ('c', 'd')]
    """
    extra = [name for name in worst if name not in slow][:MAX_WORST]
    steps = [tuple(slow)] if slow else []
    k = 1
    while extra:
        steps.append((*slow, *extra[:k]))
        if k >= len(extra):
            break
        k = min(k * 2, len(extra))
    return steps


def short(name: str) -> str:
    """An op output's name as people read it: its first scope (the converter joins several).

    Example:
        >>> short("m/prelu1/add;m/prelu1/Relu;m/prelu1/Neg_1")
        'm/prelu1/add'
    """
    return name.split(";")[0]


def climb(
    slow: Sequence[SlowOp],
    worst: Callable[[], Sequence[str]],
    step: Callable[[tuple[str, ...], bool], bool],
    planned: Callable[[int], None] = lambda count: None,
) -> None:
    """Make the steps of a per-op climb until ``step`` says stop.

    Args:
        slow: The ops slower in int8 (:func:`find_slow`): the first step keeps them float.
        worst: The ops by the error their own op adds, worst first (asked for only when the
            speed step, if any, did not end the climb).
        step: Makes and judges one step, given its float ops and whether it is the speed
            step; returns True to climb on.
        planned: Told how many error steps follow.

    Example:
        >>> made = []
        >>> climb([], lambda: ["c", "d", "e"], lambda kept, speed: made.append(kept) or True)
        >>> made
        [('c',), ('c', 'd'), ('c', 'd', 'e')]
    """
    names = tuple(s.name for s in slow)
    if names and not step(names, True):
        return
    steps = plan_steps(names, worst())[1 if names else 0 :]
    planned(len(steps))
    for kept in steps:
        if not step(kept, False):
            return
