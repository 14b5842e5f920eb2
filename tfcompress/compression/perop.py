"""The per-op precision rung of compress: int8, with the ops int8 makes slower or worse float.

Whole-model precision is the wrong unit: an op whose int8 kernel is slow (MTCNN O-Net's PRELU
runs ~45x slower in int8 than in float on an AVX-512 VNNI CPU) can make the int8 file slower
than float32 while every other op gains. The rung starts from the plain int8 attempt and

1. times every op of the float32 file and of the int8 file on the target's latency backend
   (``benchmark --profile-ops``: :mod:`tfcompress.bench.op_profile`, each op alone on the
   values it gets in the model) and takes the ops slower in int8 (:func:`slow_ops`: beyond
   both timings' spread and :data:`OP_FLOOR_MS`);
2. ranks the ops by the error their own op adds
   (:func:`~tfcompress.compression.mixed.rank_by_added_error`, never the model's outputs);
3. climbs: int8 with the slow ops float, then with the 1, 2, 4... worst-error ops float as
   well, until a step passes the gate and is not slower than the baseline. Each step's size
   and latency are stated against plain int8's and the baseline's.

A Keras model or SavedModel gets the converter's int8 with the named op outputs kept float
(``Recipe(float_nodes=...)``, the converter's ``denylisted_nodes``; a ``selective`` attempt);
a float ``.tflite`` gets LiteRT Quantizer's int8 with a ``float`` rule per op. Attempts are
named by what they hold: ``int8 (5 PRELU, 1 CONV_2D float)``. Kept ops are float32 (LiteRT's
CPU runs float16 weights as float32 anyway).

Example:
    >>> describe(["a", "b", "c"], {"a": "PRELU", "b": "PRELU", "c": "CONV_2D"})
    'int8 (2 PRELU, 1 CONV_2D float)'
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tfcompress.compression.handlers import (
    Built,
    Handler,
    Materials,
    PTQHandler,
    _worst_tensors,
    register_handler,
    with_batch,
)
from tfcompress.errors import InvalidInputError
from tfcompress.quantization.config import PTQConfig

if TYPE_CHECKING:
    from tfcompress.compression.candidates import Rung
    from tfcompress.compression.search import SearchState

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


def profile(state: SearchState, content: bytes, name: str) -> dict[str, Any] | str:
    """The per-op profile of ``content`` on the search's latency backend, or why there is none."""
    from tfcompress.bench.device_latency import time_tflite

    if state.latency_backend != "cpu":
        return f"no per-op profile on the {state.latency_backend} backend (LiteRT cpu only)"
    timed = time_tflite(
        content, backend="cpu", threads=state.threads, name=name, runs=PROFILE_RUNS,
        min_seconds=PROFILE_SECONDS, warmup_runs=2, warmup_seconds=0.05, where=state.where,
        profile_ops=True,
    )  # fmt: skip
    found = timed.op_profile or {}
    if not found.get("ops"):
        return str(found.get("unavailable") or f"no per-op profile came back ({timed.status})")
    return found


def find_slow(state: SearchState, int8: bytes, reference: bytes) -> tuple[list[SlowOp], str]:
    """The ops of ``int8`` slower than in ``reference``, and one line saying what was found."""
    from tfcompress.models.tflite_file import read_tflite
    from tfcompress.quantization.float_ops import _float_nodes

    start = time.monotonic()
    profiles = [profile(state, content, name) for content, name in
                ((reference, "float32"), (int8, "int8"))]  # fmt: skip
    for found in profiles:
        if isinstance(found, str):
            return [], f"ops not timed one by one: {found}"
    floats = [name for _, name in _float_nodes(read_tflite(int8))]
    slow = slow_ops(profiles[0], profiles[1], already_float=floats)  # type: ignore[arg-type]
    took = time.monotonic() - start
    if not slow:
        return [], f"no op is slower in int8 than in float on {state.latency_backend} ({took:.1f}s)"
    shown = "; ".join(str(s) for s in slow[:4]) + (" ..." if len(slow) > 4 else "")
    return slow, (
        f"{len(slow)} op(s) slower in int8 than in float on {state.latency_backend}, timed one "
        f"by one in {took:.1f}s: {shown}"
    )


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


def run_per_op(state: SearchState, rung: Rung, config: PTQConfig, rank: Callable[[], Any]) -> None:
    """The climb of the rung (see the module docstring); stops at the first step that passes.

    The error ranking (a LiteRT Quantizer int8 file and its per-tensor errors) is made only
    when the speed step does not pass on its own.
    """
    from tfcompress.compression.search import _selective_pointless

    int8, reference = state.int8, state.reference_bytes()
    if int8 is None or reference is None or state.plain_int8() is None:
        state.say(f"skipping {rung.name}: no plain int8 file to start from")
        return
    slow: list[SlowOp] = []
    if state.measure:
        slow, line = find_slow(state, int8, reference)
        state.say(line)
    opcodes = opcodes_of(reference)
    before = state.plain_int8()
    if slow:
        done = _step(state, config, tuple(s.name for s in slow), slow, opcodes, before)
        if done is None or done.passed or (done.gate or {}).get("passed"):
            return  # made, or passed the gate but too slow: more float ops only add time
    if not state.worst_tensors:
        start = time.monotonic()
        state.worst_tensors = tuple(rank())
        shown = ", ".join(short(n) for n in state.worst_tensors[:4]) or "none"
        state.say(
            f"ranked {len(state.worst_tensors)} ops by the int8 error they add in "
            f"{time.monotonic() - start:.1f}s: worst {shown}"
        )
    worst = [name for name in state.worst_tensors if name in opcodes]
    steps = plan_steps([s.name for s in slow], worst)[1 if slow else 0 :]
    state.planned += max(len(steps) - 1, 0)
    for kept in steps:
        if state.out_of_time():
            return
        # As selective steps: float16 first when the step's computed size nears it, and no
        # step that cannot be smaller than the best passing file or than float32.
        if _selective_pointless(state, describe(kept, opcodes), state.selective_bound(kept)):
            return
        done = _step(state, config, kept, slow, opcodes, before)
        if done is None or done.passed or any("climb stopped" in n for n in done.notes):
            return
        before = done


def _step(
    state: SearchState,
    config: PTQConfig,
    kept: tuple[str, ...],
    slow: Sequence[SlowOp],
    opcodes: Mapping[str, str],
    before: Any,
) -> Any:
    """Make, judge and note one step (None: it could not be made)."""
    from tfcompress.compression.mixed import _calibration_of, _too_little
    from tfcompress.quantization.selective_names import keras_layer_names, layer_of

    name = describe(kept, opcodes)
    layers, model = keras_layer_names(state.reference)
    shown = tuple(layer_of(n, layers, model) or short(n) for n in kept)
    if config.engine == "litert-quantizer":
        rules = [{"pattern": f"(?:^|;){re.escape(n)};", "mode": "float"} for n in kept]
        calibration = _calibration_of(state.plain_int8())
        recipe = {"recipe": {"name": "int8", "rules": rules, "calibration": calibration},
                  "engine": config.engine}  # fmt: skip
        done = state.attempt(name, "ptq", recipe, float_layers=shown)
    else:
        recipe = with_batch({"name": "int8", "float_nodes": list(kept)}, state.static_batch)
        done = state.attempt(name, "selective", recipe, float_layers=shown)
    if done.status == "error":
        return None
    stop = None
    if not done.passed:
        gate = bool((done.gate or {}).get("passed"))
        speed_step = bool(slow) and kept == tuple(s.name for s in slow)
        stop = state.too_slow(done)
        if stop is None and not gate and not speed_step:
            stop = _too_little(state, done, before)
    return _note(state, done, kept, slow, stop)


def _note(
    state: SearchState, done: Any, kept: Sequence[str], slow: Sequence[SlowOp], stop: str | None
) -> Any:
    """Say what the step keeps float and why, what it costs, and why the climb stops."""
    from tfcompress.compression.mixed import note_step

    because = {s.name: str(s) for s in slow}
    whys = [f"{short(n)} ({because.get(n, 'int8 error')})" for n in kept]
    return note_step(state, done, f"float: {', '.join(whys)}", stop, "per-op")


@register_handler("per-op")
class PerOpHandler(Handler):
    """int8 with the ops int8 makes slower, then the worst-error ops, kept float."""

    records_attempts = False  # each step is a selective or ptq attempt with its float ops

    def read(self, recipe: Any, *, seed: int = 0, target: str | None = None) -> PTQConfig:
        """The int8 recipe (and engine) the steps start from."""
        return PTQHandler().read(recipe, seed=seed, target=target)

    def make(self, config: PTQConfig, materials: Materials) -> Built:
        """Refused: the rung's steps are made (and replayed) as their own attempts."""
        raise InvalidInputError(
            "a per-op rung is made step by step, each step an int8 attempt with its float ops "
            "named in the recipe: make (or --replay) that step."
        )

    def record(self, config: PTQConfig) -> dict[str, Any]:
        """The PTQ config's record."""
        return PTQHandler().record(config)

    def run(self, state: SearchState, rung: Rung) -> None:
        """Profile, rank, climb (:func:`run_per_op`)."""
        config = self.read(rung.recipe, seed=state.seed)
        litert = {"recipe": {"name": "int8"}, "engine": "litert-quantizer"}
        ranking = PTQHandler().read(litert, seed=state.seed)
        run_per_op(state, rung, config, lambda: _worst_tensors(state, ranking))
