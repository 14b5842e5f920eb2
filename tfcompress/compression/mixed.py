"""Which tensors int8 hurts first, how far a climb goes, what each step cost.

Shared by the per-op rung (:mod:`tfcompress.compression.perop`, on the built-in ladders) and
the ``rules`` technique (a rung of ``technique="rules"`` and a ``mode``, which the built-in
ladders no longer hold: it gives the 1, 2, 4... tensors that int8 hurts most a LiteRT
Quantizer rule of its mode, e.g. 16-bit activations, which run on reference kernels). Which hurt
most is read from the per-tensor error of LiteRT Quantizer's int8 file against the float
``.tflite`` (:mod:`tfcompress.quantization.layer_errors`). That error accumulates along the
graph: a model's output always looks worst, though the op that wrecked it may be the first.
So tensors are ranked by the error their own op *adds* (:func:`rank_by_added_error`): the
noise-to-signal ratio of the tensor less that of its noisiest input, the additive-noise
view of quantization error. The model's own outputs are left out of the ranking: an output
head's op is where every inherited error is read, so it ranked worst on three real models
(``StatefulPartitionedCall:0``), and keeping the output float is a choice a user makes with a
rule, not one a search should make for them. The climb stops at the first passing step, and
also when a step pays too little (:data:`MIN_STEP_GAIN`) or runs slower than ``max_slowdown``
allows.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tfcompress.compression.attempts import Attempt
    from tfcompress.compression.candidates import Rung
    from tfcompress.compression.search import SearchState

#: The least share of the remaining gap to the gate a rules step must close for the climb to
#: go on (the old int16-worst/float-worst rungs spent 6 attempts, 220 s, on a model and moved
#: its output by 0.04 dB in all).
MIN_STEP_GAIN = 0.10


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
        The names of ``snr_db`` (without the model's outputs unless ``outputs``), by
        ``10**(-snr/10)`` less the largest such value among the op's measured inputs, largest
        first (ties: lower SNR first).

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
    return [name for name in ranked if name not in left_out]


def _noise(snr_db: float) -> float:
    """Noise power over signal power: 10**(-SNR/10) (0 for an exact tensor)."""
    if math.isnan(snr_db):
        return math.inf
    return 0.0 if snr_db == math.inf else 10 ** (-snr_db / 10)


def worst_first(errors: Iterable[Any], reference: bytes) -> list[str]:
    """:func:`rank_by_added_error` of a layer-errors report's tensors (``.tensor``, ``.snr_db``)."""
    return rank_by_added_error({t.tensor: t.snr_db for t in errors}, reference)


def run_rules(state: SearchState, rung: Rung, rank: Any) -> None:
    """LiteRT Quantizer: give the 1, 2, 4... worst tensors the rung's mode until one passes.

    The tensors are ranked once (:func:`rank_by_added_error`); each step adds a rule per
    tensor that matches exactly that op (its scope holds the tensor's name between ``;``),
    so the recipe replays to the same bytes. Mode ``int16``
    is mixed precision at int8 weight size: int8 weights everywhere, 16-bit activations
    on the named ops only.

    The climb stops at the first step that passes the gate, and also when a step pays too
    little: when it closes less than :data:`MIN_STEP_GAIN` of the gap between the attempt
    before it (the plain int8 attempt for the first step) and the gate, or when it already
    runs slower than ``max_slowdown`` allows (more 16-bit or float ops only add time). Each
    step's notes state its size and latency against plain int8's.
    """
    if not state.worst_tensors:
        start = time.monotonic()
        state.worst_tensors = tuple(rank())
        shown = ", ".join(state.worst_tensors[:4]) or "none"
        state.say(
            f"ranked {len(state.worst_tensors)} tensors by the int8 error their op adds in "
            f"{time.monotonic() - start:.1f}s: worst {shown}"
        )
    mode, worst = rung.recipe["mode"], state.worst_tensors
    counts, k = [], 1
    while k <= len(worst):
        counts.append(k)
        k *= 2
    state.planned += max(len(counts) - 1, 0)
    before = state.plain_int8()
    calibration = _calibration_of(before)
    for count in counts:
        if state.out_of_time():
            return
        rules = [{"pattern": f"(?:^|;){re.escape(name)};", "mode": mode} for name in worst[:count]]
        recipe = {
            "recipe": {**rung.recipe["recipe"], "rules": rules, "calibration": calibration},
            "engine": rung.recipe["engine"],
        }
        named = tuple(worst[:count])
        done = state.attempt(
            f"{mode}-worst-{count}", "ptq", recipe,
            float_layers=named if mode == "float" else (),
        )  # fmt: skip
        if done.status == "error":
            return
        stop = None
        if not (done.passed or bool((done.gate or {}).get("passed"))):
            stop = state.too_slow(done) or _too_little(state, done, before)
        _note_step(state, done, mode, named, stop)
        if done.passed or bool((done.gate or {}).get("passed")) or stop is not None:
            return
        before = done


def _calibration_of(plain: Attempt | None) -> str:
    """The activation calibration every rules step uses: the one plain int8 was made with.

    A ``.tflite`` input's int8 attempt is LiteRT Quantizer's, which with eval data compares
    its two calibrations and records the one it kept; steps that differ from it by a few
    rules then differ by those rules only (and do not pay for the comparison again). The
    converter's int8 (a Keras or SavedModel input) calibrates by full min/max.
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


def _note_step(
    state: SearchState, done: Attempt, mode: str, named: tuple[str, ...], stop: str | None
) -> None:
    """Add the step's size and latency cost against plain int8 (and why the climb stops)."""
    words = {"int16": "16-bit activations", "float": "float"}.get(mode, mode)
    what = f"{words} on the {len(named)} worst tensor(s) ({', '.join(named)})"
    note_step(state, done, what, stop, mode)


def note_step(
    state: SearchState, done: Attempt, what: str, stop: str | None, climb: str
) -> Attempt:
    """``done`` with a first note: what the step is, its size and latency against plain int8.

    A second note says why the ``climb`` stops there, when it does. Returns the attempt as
    now recorded.
    """
    from tfcompress.compression.latency import ms, slowdown

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
        state.say(f"  stopping the {climb} climb: {stop}")
    index = state.attempts.index(done)
    # What the step is and costs first; how it was timed (a re-timing's note) after.
    state.attempts[index] = replace(done, notes=(*notes, *done.notes))
    return state.attempts[index]
