"""The search of :func:`tfcompress.compress`: try the ladder cheapest first, stop when beaten.

Stop rule (docs/compress.md): before each rung, every remaining rung whose lower bound
cannot beat the best passing artifact is dropped; when none is left the search stops. A rung
bounded by ``"int8"`` stores at least int8 weights and runs at least the plain int8 graph,
so it cannot be smaller (gzip) or faster than the plain int8 attempt by more than
:data:`SIZE_SLACK` / :data:`LATENCY_SLACK`; int16x8 is tried only when no int8 attempt
passed. Selective steps only add float layers: the first passing step ends them, and each
step's size is computed before it is made (int8 plus the float weights it keeps,
:mod:`tfcompress.compression.bounds`), so a step that cannot be smaller than the best
passing artifact, or than the float32 file, is never made. float16's size is computed from
the float32 file the same way: it is skipped when something smaller passed, and tried as
soon as a selective step would reach :data:`FLOAT16_APPROACH` of it, not only at the end.
Pruning and clustering have no bound (they shrink gzip) and are always tried when asked for.
Whatever the rungs, nothing larger than the float32 file (a ``.tflite`` input: the file
given) is ever chosen: such an artifact is recorded as failed, with the sizes.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tfcompress.compression.attempts import Attempt
from tfcompress.compression.bounds import SizeBound, float16_bound, selective_bound
from tfcompress.compression.candidates import Rung, rung_recipe
from tfcompress.compression.handlers import Built, build, get_handler
from tfcompress.errors import (
    ConversionError,
    MissingDependencyError,
    NativeCrashError,
    UnsupportedModelError,
)
from tfcompress.targets.base import get_target
from tfcompress.training.configs import TRAINING_CONFIGS

logger = logging.getLogger(__name__)

SIZE_SLACK = 0.01  # re-calibrating moves a few bytes of scales: not worth an attempt
LATENCY_SLACK = 0.05  # below timing noise on a shared machine
#: A selective step whose computed gzip size reaches this share of float16's has float16
#: tried first: float16 keeps float accuracy, so it usually passes and then bounds the rest.
FLOAT16_APPROACH = 0.75
INT8_FAMILY = ("selective", "qat")  # with the ptq attempts of recipe int8


@dataclass
class SearchState:
    """What the loop knows so far (mutable, private to one search)."""

    reference: Any
    eval_set: Any
    representative: Any
    train_data: Any
    checks: Any
    settings: Any
    objective: str
    target: str
    threads: int
    measure: bool
    seed: int
    progress: bool
    deadline: float | None
    started: float = field(default_factory=time.monotonic)
    attempts: list[Attempt] = field(default_factory=list)
    contents: dict[int, bytes] = field(default_factory=dict)
    sensitive: tuple[Any, ...] = ()
    planned: int = 0
    stop_reason: str = ""
    float32: bytes | None = None  # the baseline, from the first conversion
    worst_tensors: tuple[str, ...] = ()  # int8 tensors, the op adding most error first
    make_float32: Callable[[], bytes] | None = None  # when no conversion has made it yet
    int8: bytes | None = None  # the plain int8 file, passing or not: the selective bounds
    pending: list[Rung] = field(default_factory=list)  # rungs not tried nor dropped yet
    run_rung: Callable[[Rung], None] | None = None  # how _climb runs one (for early float16)
    skipped: list[str] = field(default_factory=list)  # why computed bounds dropped steps
    static_batch: int | None = None  # a static batch for every post-training artifact
    batch_size: int | None = None  # the fine-tuning rungs' batch (None: their config's)
    freeze_batchnorm: bool = True  # how the fine-tuning rungs treat BatchNorm
    training_hurts: str | None = None  # a fine-tuned attempt came out worse than its PTQ
    float16_size: SizeBound | None = None  # float16_bound(), computed once
    where: Any = None  # the device latencies are measured on (compress --on); None: here
    max_slowdown: float = 1.0  # the slowest artifact returned, as a ratio of the baseline's
    baseline: bytes | None = None  # the timed baseline (a .tflite input: the file given)
    baseline_name: str = "float32"
    baseline_ms: float | None = None  # its median latency per sample (timed on first need)
    # name -> (its ms, the baseline's ms), timed back to back when its first timing looked
    # too slow: the pair the slowdown rule judges it on (load moves both alike).
    paired: dict[str, tuple[float, float]] = field(default_factory=dict)

    def reference_bytes(self) -> bytes | None:
        """The float32 ``.tflite`` (made now when no conversion made it yet)."""
        if self.float32 is None and self.make_float32 is not None:
            self.float32 = self.make_float32()
        return self.float32

    # -- timing -------------------------------------------------------------------------
    @property
    def latency_backend(self) -> str:
        """The backend every attempt (and the baseline) is timed on."""
        return get_target(self.target).latency_backend

    @property
    def judges_latency(self) -> bool:
        """Whether the latency backend's time may refuse an attempt (not TFLM's host time)."""
        return get_target(self.target).judges_latency

    def time(self, content: bytes, name: str) -> float:
        """Median latency per sample of ``content`` on the latency backend (here or ``where``)."""
        from tfcompress.quantization.methods.slow_ops import measure_latency

        return measure_latency(
            content, backend=self.latency_backend, threads=self.threads, name=name,
            where=self.where,
        )  # fmt: skip

    def baseline_bytes(self) -> bytes | None:
        """The timed baseline's bytes: the file given, else the float32 ``.tflite``."""
        return self.baseline if self.baseline is not None else self.reference_bytes()

    def baseline_latency(self) -> float | None:
        """The baseline's latency, timed twice on first need (the lower median kept)."""
        if not self.measure:
            return None
        if self.baseline_ms is None:
            content = self.baseline_bytes()
            if content is None:
                return None
            self.baseline_ms = min(self.time(content, self.baseline_name) for _ in range(2))
        return self.baseline_ms

    def timed(self, content: bytes, name: str) -> float:
        """``content``'s latency; re-timed back to back with the baseline when it looks too slow.

        The baseline was timed minutes earlier; on a shared machine the load in between can
        slow one file's timing by a third. A file that looks too slow is timed again right
        after the baseline is, and :meth:`slowness` judges it on that pair; the lower of its
        own timings is its latency. The baseline's own bytes (the float32 rung of a Keras
        model) reuse its latency.
        """
        from tfcompress.quantization.methods.slow_ops import too_slow

        baseline = self.baseline_latency()
        if baseline is None:
            return self.time(content, name)
        own = self.baseline_bytes()
        if content == own:
            return baseline
        latency = self.time(content, name)
        if self.judges_latency and too_slow(latency, baseline, self.max_slowdown):
            base_now = self.time(own, self.baseline_name)
            again = self.time(content, name)
            self.paired[name] = (again, base_now)
            latency = min(latency, again)
        return latency

    def slowness(self, name: str, latency: float | None) -> str | None:
        """Why ``name``, timed at ``latency``, is too slow to return (both latencies, the flag).

        Judged on its back-to-back pair with the baseline when it has one, else on its
        latency against the baseline's; None when it is fast enough, nothing was timed, or
        the time is no device figure (the target does not judge latency).
        """
        from tfcompress.compression.latency import slowdown_reason
        from tfcompress.quantization.methods.slow_ops import too_slow

        if latency is None or self.baseline_ms is None or not self.judges_latency:
            return None
        mine, base = self.paired.get(name, (latency, self.baseline_ms))
        if not too_slow(mine, base, self.max_slowdown):
            return None
        return slowdown_reason(name, mine, self.baseline_name, base, self.latency_backend)

    def retimed_note(self, name: str, latency: float | None) -> str | None:
        """What the back-to-back re-timing of ``name`` showed, when it cleared the file.

        Shown after the attempt's name (``name: note``), so it does not repeat it.
        """
        from tfcompress.quantization.methods.slow_ops import ms

        if name not in self.paired or self.slowness(name, latency) is not None:
            return None
        mine, base = self.paired[name]
        return (
            f"timed {ms(latency or 0)} ms/sample against {self.baseline_name}'s "
            f"{ms(self.baseline_ms or 0)} timed earlier; timed again right after "
            f"{self.baseline_name}: {ms(mine)} vs {ms(base)} ms ({mine / base:.2f}x), within "
            f"max_slowdown {self.max_slowdown:g}: the gap was this machine's load, not the file"
        )

    def too_slow(self, attempt: Attempt) -> str | None:
        """Why ``attempt`` runs too slowly to be returned (both latencies, the flag), or None."""
        return self.slowness(attempt.name, attempt.latency_ms)

    # -- ranking ------------------------------------------------------------------------
    def key(self, attempt: Attempt) -> tuple[float, ...]:
        """Smaller is better: the target's rank first (one Edge TPU segment), then size or speed."""
        measure = attempt.latency_ms if self.objective == "latency" else attempt.gzip_bytes
        first = get_target(self.target).rank(attempt)
        return (first, float("inf") if measure is None else float(measure))

    @property
    def best(self) -> Attempt | None:
        """The best passing attempt so far."""
        passing = [a for a in self.attempts if a.passed]
        return min(passing, key=self.key) if passing else None

    def plain_int8(self) -> Attempt | None:
        """The plain int8 attempt (the bound of the int8 family), when made."""
        return next((a for a in self.attempts if a.name == "int8" and a.size_bytes), None)

    def int8_passed(self) -> bool:
        """An int8-family attempt passed (int16x8, the fallback, is then not needed)."""
        return any(a.passed and _int8_family(a) for a in self.attempts)

    def beaten(self, rung: Rung) -> str | None:
        """Why ``rung`` cannot beat the best passing artifact, or None when it might."""
        best = self.best
        if rung.fallback_only and self.int8_passed():
            return f"{rung.name} is the fallback when no int8 attempt passes"
        if rung.last_resort and best is not None:
            return f"{rung.name} is the last resort when nothing smaller passes"
        if rung.technique in TRAINING_CONFIGS and self.training_hurts is not None:
            return f"{rung.name} fine-tunes on the same data, and {self.training_hurts}"
        if rung.bound == "float16":
            bound = self.float16_bound()
            return self.not_smaller_than_float32(rung.name, bound) or self.bigger_than_best(
                rung.name, bound
            )
        int8 = self.plain_int8()
        if rung.bound != "int8" or int8 is None:
            return None
        # Another calibration, the methods, QAT: every op still int8, so plain int8's time.
        slow = rung.technique not in ("selective", "per-op") and rung_recipe(rung) == "int8"
        if slow and (why := self.slowness(int8.name, int8.latency_ms)) is not None:
            return f"{rung.name} runs plain int8's graph, and {why}"
        if best is None or self.key(best)[0] > 0:
            return None
        if self.objective == "latency":
            if int8.latency_ms is None or best.latency_ms is None:
                return None
            if best.latency_ms <= int8.latency_ms * (1 + LATENCY_SLACK):
                return f"{rung.name} runs at least the int8 graph ({int8.latency_ms:.3f} ms)"
            return None
        small = int8.gzip_bytes is not None and best.gzip_bytes is not None
        if small and best.gzip_bytes <= int8.gzip_bytes * (1 + SIZE_SLACK):  # type: ignore[operator]
            return f"{rung.name} stores at least int8 weights ({int8.gzip_bytes:,} B gzip)"
        return None

    def float16_bound(self) -> SizeBound | None:
        """float16's size, computed once from the float32 file (None before there is one)."""
        reference = self.reference_bytes()
        if self.float16_size is None and reference is not None:
            self.float16_size = float16_bound(reference)
        return self.float16_size

    def selective_bound(self, nodes: tuple[str, ...]) -> SizeBound | None:
        """The size of int8 with ``nodes`` kept float (None without the two files)."""
        reference = self.reference_bytes()
        if reference is None or self.int8 is None:
            return None
        return selective_bound(self.int8, reference, nodes)

    def bigger_than_best(self, name: str, bound: SizeBound | None) -> str | None:
        """Why a candidate of this size cannot win (size objective), or None."""
        best = self.best
        if bound is None or self.objective != "size" or best is None or best.gzip_bytes is None:
            return None
        if self.key(best)[0] > 0:  # an Edge TPU artifact in several segments can still lose
            return None
        if bound.gzip >= best.gzip_bytes:
            return (
                f"{name} would be at least {bound.gzip:,} B gzip ({bound.how}), not smaller "
                f"than {best.name} ({best.gzip_bytes:,} B gzip)"
            )
        return None

    def not_smaller_than_float32(self, name: str, bound: SizeBound | None) -> str | None:
        """Why a candidate of this size cannot be chosen at all (see :meth:`too_big`), or None."""
        baseline = self.baseline_bytes()
        if bound is None or baseline is None or bound.raw < len(baseline):
            return None
        return (
            f"{name} would be at least {bound.raw:,} B ({bound.how}), not smaller than "
            f"{self.baseline_file} ({len(baseline):,} B)"
        )

    def run_early(self, bound: str, why: str) -> Attempt | None:
        """Run the pending rung with ``bound`` now (float16 before a large selective step)."""
        rung = next((r for r in self.pending if r.bound == bound), None)
        if rung is None or self.run_rung is None or self.beaten(rung) is not None:
            return None
        self.pending.remove(rung)
        self.say(f"trying {rung.name} now: {why}")
        before = len(self.attempts)
        self.run_rung(rung)
        return self.attempts[-1] if len(self.attempts) > before else None

    def out_of_time(self) -> bool:
        """The time budget is spent (checked between attempts)."""
        return self.deadline is not None and time.monotonic() >= self.deadline

    # -- one attempt ----------------------------------------------------------------------
    def attempt(
        self,
        name: str,
        technique: str,
        recipe: dict[str, Any],
        *,
        float_layers: tuple[str, ...] = (),
        notes: tuple[str, ...] = (),
        prebuilt: bytes | None = None,
    ) -> Attempt:
        """Make, gate, (measure) and record one candidate."""
        index = len(self.attempts) + 1
        self.say(f"attempt {index} of ~{max(self.planned, index)}: {name} ...")
        start = time.monotonic()
        try:
            built = (
                Built(prebuilt, self.recorded(technique, recipe))
                if prebuilt is not None
                else build(
                    technique,
                    recipe,
                    self.reference,
                    representative_data=self.representative,
                    train_data=self.train_data,
                    eval_data=self.eval_set,
                    target=self.target,
                    seed=self.seed,
                    isolate=True,
                )
            )
            if self.float32 is None and built.reference is not None:
                self.float32 = built.reference
            fields = judge(
                self.reference,
                built.content,
                self.eval_set,
                name=name,
                checks=self.checks,
                settings=self.settings,
                threads=self.threads,
            )
        except (
            ConversionError,
            UnsupportedModelError,
            MissingDependencyError,
            NativeCrashError,
        ) as error:
            # A rung this model cannot take (an integer-only target, tfmot refuses a layer,
            # an export the runtime rejects, an engine not installed, fine-tuning crashed in
            # its child process): recorded with the reason, the search goes on with the best
            # artifact so far.
            # A fine-tune that crashed: the other fine-tunes run the same fit. (A conversion or
            # a measurement that crashed in its child is that rung's alone.)
            if isinstance(error, NativeCrashError) and technique in TRAINING_CONFIGS:
                self.training_hurts = f"{name} crashed in TensorFlow's native code"
            done = Attempt(
                index, name, technique, self.recorded(technique, recipe), "error", str(error),
                seconds=time.monotonic() - start, float_layers=float_layers, notes=notes,
            )  # fmt: skip
            return self.record(done, None)
        from tfcompress.quantization.payoff import payoff_failure
        from tfcompress.training.sparsity import gzip_size

        latency = self.timed(built.content, name) if self.measure else None
        summary = self.target_summary(built)
        gzip_bytes = gzip_size(built.content)
        # What fails an artifact the gate passed, the first that applies.
        fails = [
            summary and get_target(self.target).refusal(summary, built.float_nodes),
            self.too_big(len(built.content), technique, recipe)
            # an int8 file that quantized nothing did not pay off either
            or payoff_failure(technique, built.recipe, built.content),
        ]
        if built.worse:
            notes = (*notes, *built.worse)
            self.training_hurts = self.training_hurts or built.worse[0]
            baseline = built.baseline_gzip
            if baseline is not None and gzip_bytes >= baseline * (1 - SIZE_SLACK):
                fails.append(f"{built.worse[0]}, at no smaller size")
        fails.append(self.slowness(name, latency))
        why_fails = next((why for why in fails if why), None)
        if why_fails and fields["status"] == "passed":
            fields = {**fields, "status": "failed", "why": f"gate passed, but {why_fails}"}
        retimed = self.retimed_note(name, latency)
        if retimed is not None:
            notes = (*notes, retimed)
        done = Attempt(
            index=index,
            name=name,
            technique=technique,
            recipe=built.recipe,
            size_bytes=len(built.content),
            gzip_bytes=gzip_bytes,
            latency_ms=latency,
            device=None if latency is None or self.where is None else self.where.name,
            float_layers=float_layers,
            float_nodes=built.float_nodes,
            target_verdict=summary,
            verdict_of=None if summary is None else self.target,
            seconds=time.monotonic() - start,
            notes=notes,
            **fields,
        )
        return self.record(done, built.content)

    def recorded(self, technique: str, recipe: dict[str, Any]) -> dict[str, Any]:
        """What an attempt records of a recipe it did not make itself (a reused file, an error).

        The same shape as a made one records: its handler's config, with this search's seed.
        """
        handler = get_handler(technique)
        return handler.record(handler.read(recipe, seed=self.seed, target=self.target))

    @property
    def baseline_file(self) -> str:
        """How messages name the size baseline: the float32 file, or the input .tflite."""
        return "the float32 file" if self.baseline is None else self.baseline_name

    def too_big(self, size: int, technique: str, recipe: dict[str, Any]) -> str | None:
        """Why an artifact of ``size`` bytes may not be chosen, or None.

        Nothing larger than the baseline (the float32 file; a ``.tflite`` input: the file
        given, which may be float16 and smaller than its float32 form) is chosen; for the
        size objective nothing as large either (the baseline itself would do). The latency
        objective may choose the float32 file itself, when it is no larger.
        """
        baseline = self.baseline_bytes()
        if baseline is None:
            return None
        inner = recipe.get("recipe", recipe)
        is_float32 = technique == "ptq" and inner.get("name") == "float32"
        if size > len(baseline) or (
            size == len(baseline) and self.objective == "size" and not is_float32
        ):
            return f"its {size:,} B are not smaller than {self.baseline_file} ({len(baseline):,} B)"
        return None

    def target_summary(self, built: Built) -> dict[str, Any] | None:
        """The target check's numbers for the artifact (Edge TPU: the linter's), or None.

        quantize's verdict is reused; a fine-tuned artifact, made without the target, is
        checked here.
        """
        device = get_target(self.target)
        if not device.checks:
            return None
        verdict = built.verdict if built.verdict is not None else device.check(built.content)
        return device.summarize(verdict)

    def record(self, attempt: Attempt, content: bytes | None) -> Attempt:
        """Keep the attempt (and a passing one's bytes) and report progress."""
        self.attempts.append(attempt)
        if content is not None and attempt.passed:
            self.contents[attempt.index] = content
        if content is not None and attempt.name == "int8":
            self.int8 = content
        best = self.best
        shown = "none yet" if best is None else f"{best.name} ({self._measure(best)})"
        self.say(f"  {attempt.name}: {attempt.status} - {attempt.why} | best: {shown}")
        return attempt

    def _measure(self, attempt: Attempt) -> str:
        if self.objective == "latency" and attempt.latency_ms is not None:
            return f"{attempt.latency_ms:.3f} ms"
        return f"{attempt.gzip_bytes:,} B gzip"

    def say(self, line: str) -> None:
        """Print a progress line on stderr with ``progress``; else log it (once, not both)."""
        if self.progress:
            print(f"[compress] {line}", file=sys.stderr, flush=True)
        else:
            logger.info("%s", line)


def judge(
    reference: Any,
    content: bytes,
    eval_set: Any,
    *,
    name: str,
    checks: Any,
    settings: Any,
    threads: int,
) -> dict[str, Any]:
    """Run :func:`tfcompress.testing.output_gates.check_gate` on the artifact; attempt fields.

    The gate is the same check as ``tfcompress gate`` and the pytest plugin, so an artifact
    that passes here passes the user's CI gate on the same data.

    Returns:
        ``Attempt`` keyword fields: status, why, the deciding verdict's numbers, the report.
    """
    from tfcompress.models import TFLiteModel
    from tfcompress.testing.output_gates import check_gate

    candidate = TFLiteModel(content, label=name, verified=True)
    report = check_gate(
        reference, candidate, eval_set, checks=checks, settings=settings, threads=threads
    )
    deciding = report.failures[0] if report.failures else report.verdicts[0]
    return {
        "status": "passed" if report.passed else "failed",
        "why": report.headline(),
        "metric": deciding.metric,
        "kind": deciding.kind,
        "reference_score": deciding.reference_score,
        "score": deciding.candidate_score,
        "value": deciding.value,
        "ci_low": deciding.ci_low,
        "ci_high": deciding.ci_high,
        "threshold": deciding.threshold,
        "gate": report.to_dict(),
    }


def run_selective(state: SearchState, rung: Rung, rank: Any) -> None:
    """Keep the 1, 2, 4... most sensitive nodes float until the gate passes."""
    if not state.sensitive:
        start = time.monotonic()
        state.sensitive = tuple(rank())
        state.say(
            f"ranked {len(state.sensitive)} layers by quantization sensitivity in "
            f"{time.monotonic() - start:.1f}s: most sensitive "
            + ", ".join(layer_of(s) for s in state.sensitive[:4])
        )
    counts = [2**i for i in range(max(len(state.sensitive) - 1, 0).bit_length())]  # 1, 2, 4...
    state.planned += max(len(counts) - 1, 0)
    for count in counts:
        if state.out_of_time():
            return
        kept = state.sensitive[:count]
        name = f"selective-{count}"
        bound = state.selective_bound(tuple(s.node for s in kept))
        if _selective_pointless(state, name, bound):
            return
        recipe = {**rung.recipe, "float_nodes": [s.node for s in kept]}
        done = state.attempt(
            name,
            "selective",
            recipe,
            float_layers=tuple(layer_of(s) for s in kept),
        )
        gate_passed = bool((done.gate or {}).get("passed"))
        if done.passed or gate_passed or done.status == "error":
            return  # more float layers cannot pass a target that refuses float ones


def _selective_pointless(state: SearchState, name: str, bound: SizeBound | None) -> bool:
    """Before a selective step: try float16 first when the step nears it; say why to stop."""
    float16 = state.float16_bound()
    if bound is not None and float16 is not None and bound.gzip >= FLOAT16_APPROACH * float16.gzip:
        state.run_early(
            "float16",
            f"{name} would be at least {bound.gzip:,} B gzip, {bound.gzip / float16.gzip:.0%} "
            f"of float16's {float16.gzip:,} B gzip ({float16.how})",
        )
    why = state.not_smaller_than_float32(name, bound) or state.bigger_than_best(name, bound)
    if why is None:
        return False
    state.skipped.append(why)
    state.say(f"  skipping {name} and the larger selective steps: {why}")
    return True


def _int8_family(attempt: Attempt) -> bool:
    """Plain or re-calibrated int8, selective int8 and QAT (int16x8 is their fallback)."""
    if attempt.technique in INT8_FAMILY:
        return True
    inner = attempt.recipe.get("recipe", attempt.recipe)
    return attempt.technique == "ptq" and inner.get("name") == "int8"


def layer_of(entry: Any) -> str:
    """The Keras layer of a ranked node, or the node's own name when it maps to none."""
    return entry.layer or entry.node
