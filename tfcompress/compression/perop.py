"""The per-op precision rung of compress: int8, with the ops int8 makes slower or worse float.

The rung starts from the plain int8 attempt and climbs as ``quantize --methods per-op`` does
(:func:`tfcompress.quantization.methods.slow_ops.climb`, timed on the target's latency
backend, the errors ranked on the plain int8 file itself), each step an attempt judged by
the gate and stated against plain int8's and the baseline's size and latency, until a step
passes the gate and is not slower than the baseline.

A Keras model or SavedModel gets the converter's int8 with the named op outputs kept float
(``Recipe(float_nodes=...)``, the converter's ``denylisted_nodes``; a ``selective`` attempt);
a float ``.tflite`` gets LiteRT Quantizer's int8 with a ``float`` rule per op. Kept ops are
float32 (LiteRT's CPU runs float16 weights as float32 anyway).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tfcompress.compression.handlers import (
    Built,
    Materials,
    PTQHandler,
    register_handler,
    with_batch,
)
from tfcompress.errors import InvalidInputError
from tfcompress.quantization.config import PTQConfig
from tfcompress.quantization.methods.slow_ops import (
    SlowOp,
    climb,
    describe,
    find_slow,
    opcodes_of,
    short,
    worst_first,
)

if TYPE_CHECKING:
    from tfcompress.compression.attempts import Attempt
    from tfcompress.compression.candidates import Rung
    from tfcompress.compression.search import SearchState

#: The least share of the remaining gap to the gate a step must close for the climb to
#: go on (the old int16-worst/float-worst rungs spent 6 attempts, 220 s, on a model and moved
#: its output by 0.04 dB in all).
MIN_STEP_GAIN = 0.10


def run_per_op(state: SearchState, rung: Rung, config: PTQConfig) -> None:
    """The climb of the rung (see the module docstring); stops at the first step that passes.

    The error ranking (:func:`_ranked`) is made only when the speed step does not pass alone.
    """
    from tfcompress.compression.search import _selective_pointless
    from tfcompress.quantization.methods.apply import why_not_keras

    int8, reference = state.int8, state.reference_bytes()
    if int8 is None or reference is None or state.plain_int8() is None:
        state.say(f"skipping {rung.name}: no plain int8 file to start from")
        return
    slow: list[SlowOp] = []
    if state.measure:
        timing = {"backend": state.latency_backend, "threads": state.threads}
        slow, line = find_slow(int8, reference, **timing, where=state.where)
        state.say(line)
    opcodes = opcodes_of(reference)
    before = [state.plain_int8()]
    # Equalization keeps every op int8 and the float function, and reaches what keeping ops
    # float cannot (O-Net's box head: 22.5 dB in plain int8, 24.3 with its slow ops float,
    # 25.9 with both). The first step made tries it against its own plain form (quantize's
    # methods search, scored on the eval data); the later steps apply what that one kept.
    # (Not for a model fed otherwise than batch first: the methods score batch-first samples.)
    layout = getattr(state.representative, "layout", None)
    keras = config.engine != "litert-quantizer" and why_not_keras(state.reference) is None
    keras = keras and (layout is None or layout.batch_first)
    methods: list[str | tuple[str, ...]] = ["equalize" if keras else ()]

    def worst() -> list[str]:
        if not state.worst_tensors:
            start = time.monotonic()
            state.worst_tensors = tuple(_ranked(state, int8, reference))
            shown = ", ".join(short(n) for n in state.worst_tensors[:4]) or "none"
            state.say(
                f"ranked {len(state.worst_tensors)} ops by the int8 error they add in "
                f"{time.monotonic() - start:.1f}s: worst {shown}"
            )
        return [name for name in state.worst_tensors if name in opcodes]

    def step(kept: tuple[str, ...], speed: bool) -> bool:
        # As selective steps: float16 first when the step's computed size nears it, and no
        # step that cannot be smaller than the best passing file or than float32.
        if not speed and (
            state.out_of_time()
            or _selective_pointless(state, describe(kept, opcodes), state.selective_bound(kept))
        ):
            return False
        done = _step(state, config, kept, speed, opcodes, before[-1], slow, methods[0])
        if done is not None and isinstance(methods[0], str):
            methods[0] = tuple(done.recipe.get("recipe", {}).get("methods") or ())
        if done is None or done.passed:
            return False
        if speed:  # passed the gate but too slow: more float ops only add time
            return not (done.gate or {}).get("passed")
        before.append(done)
        return not any("climb stopped" in n for n in done.notes)

    def planned(count: int) -> None:
        state.planned += max(count - 1, 0)

    climb(slow, worst, step, planned)


def _ranked(state: SearchState, int8: bytes, reference: bytes) -> list[str]:
    """The ops of plain int8 (the file the steps change), the one adding most error first.

    Its tensors against the float32 file on the eval data (:func:`.slow_ops.worst_first`).
    Another quantizer's file misleads: LiteRT Quantizer keeps O-Net's PRELU float, and the
    TRANSPOSE and MAX_POOL_2D after them then read as adding the noise they only carry.
    """
    from tfcompress.quantization.layer_errors import contained_layer_errors

    errors = contained_layer_errors(
        reference, int8, state.eval_set, seed=state.seed, what="the per-op rung's error ranking"
    )
    return worst_first(errors.tensors, reference)


def _step(
    state: SearchState,
    config: PTQConfig,
    kept: tuple[str, ...],
    speed: bool,
    opcodes: Mapping[str, str],
    before: Any,
    slow: Sequence[SlowOp],
    methods: str | tuple[str, ...],
) -> Any:
    """Make, judge and note one step (why each op is float, the cost; None: not made).

    ``methods``: tried against the step's plain form (a name), or applied as given (a tuple).
    """
    from tfcompress.models.loading import keras_layer_names
    from tfcompress.quantization.selective_names import layer_of

    searched = isinstance(methods, str)  # tried at this step; a tuple: applied as given
    name = describe(kept, opcodes) + ("" if searched else "".join(f" + {m}" for m in methods))
    layers, model = keras_layer_names(state.reference)
    shown = tuple(layer_of(n, layers, model) or short(n) for n in kept)
    if config.engine == "litert-quantizer":
        rules = [{"pattern": f"(?:^|;){re.escape(n)};", "mode": "float"} for n in kept]
        calibration = _calibration_of(state.plain_int8())
        recipe = {"recipe": {"name": "int8", "rules": rules, "calibration": calibration},
                  "engine": config.engine}  # fmt: skip
        done = state.attempt(name, "ptq", recipe, float_layers=shown)
    else:
        inner = {"name": "int8", "float_nodes": list(kept), "methods": [] if searched else methods}
        recipe = {"recipe": inner, "methods": methods} if searched else inner
        done = state.attempt(name, "selective", with_batch(recipe, state.static_batch),
                             float_layers=shown)  # fmt: skip
        kept_methods = done.recipe.get("recipe", {}).get("methods") or ()
        if searched and kept_methods:  # the name says what the file holds
            index, name = state.attempts.index(done), f"{name} + {' + '.join(kept_methods)}"
            gate = {**done.gate, "candidate": name} if done.gate else done.gate
            if done.name in state.paired:  # its back-to-back timing, under its new name
                state.paired[name] = state.paired[done.name]
            done = state.attempts[index] = replace(done, name=name, gate=gate)
    if done.status == "error":
        return None
    stop = None
    if not done.passed:
        stop = state.too_slow(done)
        if stop is None and not (done.gate or {}).get("passed") and not speed:
            stop = _too_little(state, done, before)
    because = {s.name: str(s) for s in slow}
    whys = ", ".join(f"{short(n)} ({because.get(n, 'int8 error')})" for n in kept)
    return note_step(state, done, f"float: {whys}", stop)


def _calibration_of(plain: Attempt | None) -> str:
    """The activation calibration plain int8 was made with: each step differs by its rules.

    (LiteRT Quantizer's int8 keeps the better of its two calibrations, with eval data.)
    """
    from tfcompress.quantization.engines.calibration import DEFAULT_CALIBRATION

    recipe = (plain.recipe if plain is not None else {}).get("recipe", {})
    kept = recipe.get("calibration") if isinstance(recipe, dict) else None
    return str(kept or DEFAULT_CALIBRATION)


def _too_little(state: SearchState, done: Attempt, before: Attempt | None) -> str | None:
    """Why ``done`` gained too little over ``before`` to climb on, or None.

    The gain is measured on the number the gate decides by (:func:`.result.shortfall`: the
    distance to the threshold, in the metric's own units), when both were decided by the
    same metric.
    """
    from tfcompress.compression.result import shortfall

    if before is None or before.value is None or done.value is None:
        return None
    if before.metric != done.metric or before.threshold is None or done.threshold is None:
        return None
    mode = str(getattr(state.settings, "mode", "strict"))
    gap, now = shortfall(before, mode), shortfall(done, mode)
    if gap <= 0:
        return None
    gained = gap - now
    if gained >= MIN_STEP_GAIN * gap:
        return None
    unit = " dB" if done.metric == "snr" else (" pt" if done.kind == "task" else "")
    scale = 100 if done.kind == "task" else 1
    return (
        f"{done.name} closed {gained * scale:.3g}{unit} of the {gap * scale:.3g}{unit} "
        f"{done.metric} gap {before.name} left to the gate, under the {MIN_STEP_GAIN:.0%} a "
        "step must close"
    )


def note_step(state: SearchState, done: Attempt, what: str, stop: str | None) -> Attempt:
    """``done`` with a first note: what the step is, its size and latency against plain int8.

    A second note says why the climb stops there, when it does. Returns the attempt as
    now recorded.
    """
    from tfcompress.quantization.methods.slow_ops import ms, slowdown

    int8 = state.plain_int8()
    parts = [what]
    if int8 is not None and int8.size_bytes and done.size_bytes:
        extra = done.size_bytes - int8.size_bytes
        parts.append(
            f"{done.size_bytes:,} B ({extra:+,} B, {extra / int8.size_bytes:+.1%} against "
            f"int8's {int8.size_bytes:,} B)"
        )
    if done.latency_ms is not None:
        cost = f"{ms(done.latency_ms)} ms/sample"
        if int8 is not None and int8.latency_ms:
            cost += f" ({slowdown(done.latency_ms, int8.latency_ms):.2f}x int8's)"
        if state.baseline_ms:
            cost += f", {slowdown(done.latency_ms, state.baseline_ms):.2f}x {state.baseline_name}'s"
        parts.append(cost)
    notes = ["; ".join(parts)]
    if stop is not None:
        notes.append(f"climb stopped: {stop}")
        state.say(f"  stopping the per-op climb: {stop}")
    index = state.attempts.index(done)
    # What the step is and costs first; how it was timed (a re-timing's note) after.
    state.attempts[index] = replace(done, notes=(*notes, *done.notes))
    return state.attempts[index]


@register_handler("per-op")
class PerOpHandler(PTQHandler):
    """int8 with the ops int8 makes slower, then the worst-error ops, kept float.

    It reads and records its recipe as the PTQ handler does: the int8 recipe (and engine)
    the steps start from.
    """

    records_attempts = False  # each step is a selective or ptq attempt with its float ops

    def make(self, config: PTQConfig, materials: Materials) -> Built:
        """Refused: the rung's steps are made (and replayed) as their own attempts."""
        raise InvalidInputError(
            "a per-op rung is made step by step, each step an int8 attempt with its float ops "
            "named in the recipe: make (or --replay) that step."
        )

    def run(self, state: SearchState, rung: Rung) -> None:
        """Profile, rank, climb (:func:`run_per_op`)."""
        run_per_op(state, rung, self.read(rung.recipe, seed=state.seed))
