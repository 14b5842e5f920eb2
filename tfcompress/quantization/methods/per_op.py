"""``quantize --methods per-op``: int8 with the ops int8 makes slower or worse kept float.

The climb of :mod:`.slow_ops`, as ``quantize`` runs it (compress's ``per-op`` rung runs the
same climb with its own attempts: :mod:`tfcompress.compression.perop`). From one trace the
converter makes the float32 reference, plain int8 and the calibrate-only conversion; every
step is that calibrated file quantized with its ops kept float (``Recipe.float_nodes``, as
selective quantization makes it: one quantizer call, no new calibration): the slow ops
(timed on LiteRT's CPU), then the 1, 2, 4... worst-error ops (:func:`~.slow_ops.climb`),
until a step's weakest output reaches the bar (:class:`PerOpBar`, or the gate when one is
given) and the step is not slower than float32 (:func:`~.slow_ops.too_slow`); a step at
float16's size (half float32's) ends the climb too. Each step is a candidate of the report
with its size, latency and scores. No step at float16's size or more is kept. The file kept
is the first good enough and not slower than float32 (plain int8 first: a step only for being
faster beyond the timings' noise), else of those not slower the one nearest the bar (the
gate's "better": its margin on the weakest output), else plain int8, with a warning that
names float16.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import reduce
from typing import Any

from tfcompress._config_fields import check_fields, number, option
from tfcompress.errors import ConversionError, InvalidInputError, UnsupportedModelError
from tfcompress.quantization.methods.registry import PrecisionMethod, register_method
from tfcompress.quantization.methods.slow_ops import (
    FLOOR_MS,
    climb,
    describe,
    find_slow,
    measure_latency,
    ms,
    opcodes_of,
    slowdown,
    too_slow,
    worst_first,
)

#: The backend and threads every file is timed on: LiteRT's CPU, the one per-op profiler.
BACKEND, THREADS = "cpu", 1


@dataclass(frozen=True)
class PerOpBar:
    """The quality bar of ``--methods per-op`` when no gate is given (a gate replaces it).

    Attributes:
        per_op_min_snr: The SNR (dB) against float32 the weakest output must reach. 25 dB:
            noise at 5.6% of the output's RMS; plain int8 reached 29-45 dB on the weakest
            output of the stand-ins in docs/benchmarks.md, and issue 39's O-Net goal is its
            box head at 24 dB. A classifier's agreement is a gate's (``--eval`` with
            ``--min-agreement``).
    """

    per_op_min_snr: float = option(
        25.0,
        unit="dB",
        help="--methods per-op without a gate: the SNR against float32 the weakest output must "
        "reach",
        check=number(-math.inf, math.inf, "a finite number of dB"),
    )

    def __post_init__(self) -> None:
        check_fields(self)


@register_method
class PerOp(PrecisionMethod):
    """``per-op``: the climb of the module docstring."""

    name = "per-op"
    summary = "int8 with the ops slower in int8 (timed op by op) or worst in error kept float"
    order = 55  # run alone: its place only orders --help

    def check_target(self, target: Any) -> None:
        """Refuse a target whose artifacts do not run on LiteRT's CPU (no per-op profile)."""
        if target is not None and (target.latency_backend != BACKEND or target.shapes_artifact):
            raise InvalidInputError(
                f"--methods per-op times every op on LiteRT's CPU, and target {target.name} runs "
                f"{target.display_name or target.name}'s own way ({target.latency_backend}): drop "
                "--methods per-op, or quantize for --target cpu."
            )

    def quantize(self, model: Any, recipe: Any, **context: Any) -> Any:
        """Climb (see the module docstring); the outcome :mod:`.apply` returns for methods."""
        given = (recipe.float_nodes, recipe.rules, recipe.integer_only)
        flags = ("--float-nodes (float_nodes)", "--rules (rules)", "--integer-only")
        fixed = [flag for flag, value in zip(flags, given, strict=True) if value]
        if fixed:
            raise InvalidInputError(
                f"--methods per-op chooses the ops kept float itself: drop {' and '.join(fixed)}"
                ", or drop --methods per-op."
            )
        return _Climb(model, recipe, **context).run()


class _Climb:
    """One run of the method: the three conversions, the scorer, each step made and judged."""

    def __init__(
        self, model: Any, recipe: Any, *, calibration: Any, scoring: Any, measured_on: str,
        configure_for: Any, source: str, gate: Any = None, bar: PerOpBar | None = None,
    ) -> None:  # fmt: skip
        from tfcompress.quantization.converter import convert_all
        from tfcompress.quantization.methods.apply import _clock, why_not_keras, with_methods
        from tfcompress.quantization.methods.selection import Scorer

        self.start = _clock()
        self.plain_recipe = with_methods(recipe, ())
        made = convert_all(
            model,
            [None, configure_for(self.plain_recipe, False), configure_for(self.plain_recipe, True)],
            static_batch=recipe.static_batch,
        )
        self.reference, self.plain, self.calibrated = made
        self.calibration, self.scoring, self.measured_on = calibration, scoring, measured_on
        self.source, self.gate, self.bar = source, gate, bar or PerOpBar()
        self.scoring_seconds = 0.0
        self.scorer = self._measured(
            Scorer, self.reference.content, scoring, source=source, gate=gate
        )
        self.float_ms = min(self._time(self.reference.content, "float32") for _ in range(2))
        self.opcodes = opcodes_of(self.reference.content)
        self.steps: list[tuple[Any, bytes, tuple[str, ...]]] = []
        # Equalization (keeps every op int8 and the float function) is tried at the first
        # step against its plain form; the steps after it build on the better (compress's
        # per-op rung does the same: tfcompress.compression.perop).
        self.model, self.configure_for = model, configure_for
        self.methods: tuple[str, ...] | None = None if why_not_keras(model) is None else ()
        self.first = ""  # what the first step's comparison showed

    def run(self) -> Any:
        """Find the slow ops, climb, keep one file; the report says what each step cost."""
        from tfcompress.quantization.methods.apply import MethodsOutcome, _clock
        from tfcompress.quantization.methods.report import MethodsReport

        plain = self._judged((), self.plain.content, self.plain.seconds)
        slow, finding = self._measured(
            find_slow, self.plain.content, self.reference.content, backend=BACKEND, threads=THREADS
        )
        if slow or not self._good(plain):
            climb(slow, self._worst, self._step)
        chosen, why = self._choose(plain)
        made = [(plain, self.plain.content, ()), *self.steps]
        _, content, kept = next(entry for entry in made if entry[0] is chosen)
        warnings = () if why.startswith("it") else (f"--methods per-op: {why}",)
        report = MethodsReport(
            measured_on=self.measured_on,
            samples=len(self.scoring),
            plain=plain,
            candidates=tuple(c for c, _, _ in self.steps),
            kept=chosen.methods,
            reason="; ".join(filter(None, (why, self.first, finding))),
            searched=True,
            gated=self.gate is not None,
            reference_seconds=self.reference.seconds,
            scoring_seconds=self.scoring_seconds,
            total_seconds=_clock() - self.start,
        )
        quantized = replace(self.plain, content=content, warnings=self.plain.warnings + warnings)
        methods = (self.methods or ()) if kept else ()  # plain int8: none of the steps'
        kept_recipe = replace(self.plain_recipe, float_nodes=kept, methods=methods)
        return MethodsOutcome(self.reference, quantized, kept_recipe, report, warnings)

    def _measured(self, call: Any, *args: Any, **options: Any) -> Any:
        """``call``'s result; its seconds count as the report's scoring (running the files)."""
        from tfcompress.quantization.methods.apply import _clock

        start = _clock()
        result = call(*args, **options)
        self.scoring_seconds += _clock() - start
        return result

    def _time(self, content: bytes, name: str) -> float:
        return self._measured(measure_latency, content, backend=BACKEND, threads=THREADS, name=name)

    def _judged(self, methods: tuple[str, ...], content: bytes, seconds: float) -> Any:
        from tfcompress.quantization.methods.report import Candidate

        fidelity, margins = self._measured(self.scorer.score, content)
        latency = self._time(content, methods[0] if methods else "int8")
        return Candidate(methods, fidelity, len(content), seconds, gate=margins, latency_ms=latency)

    def _good(self, candidate: Any) -> bool:
        """The weakest output reaches the bar (the gate passes, when one is given)."""
        if self.gate is not None:
            return bool(candidate.passes)
        return candidate.error is None and candidate.worst_snr >= self.bar.per_op_min_snr

    def _slower(self, candidate: Any) -> bool:
        return candidate.latency_ms is not None and too_slow(
            candidate.latency_ms, self.float_ms, 1.0
        )

    def _worst(self) -> list[str]:
        """The ops by the error their own op adds in plain int8 (the model's outputs left out)."""
        from tfcompress._child import call
        from tfcompress.quantization.layer_errors import MAX_SAMPLES

        errors = self._measured(
            call,
            "tfcompress.quantization.layer_errors:measure_layer_errors",
            self.reference.content,
            self.plain.content,
            self.calibration.take(MAX_SAMPLES),
            what=f"the per-op error ranking of {self.source!r}",
        )
        ranked = worst_first(errors.tensors, self.reference.content)
        return [name for name in ranked if name in self.opcodes]

    def _step(self, kept: tuple[str, ...], speed: bool) -> bool:
        """Make and judge one step; True: climb on."""
        from tfcompress.quantization.methods.apply import _clock
        from tfcompress.quantization.methods.report import Candidate
        from tfcompress.quantization.selective import quantize_calibrated

        label, start = describe(kept, self.opcodes), _clock()
        try:
            recipe = replace(self.plain_recipe, float_nodes=kept)
            made = quantize_calibrated(self.calibrated, recipe, source=self.source)
        except ConversionError as error:
            self.steps.append((Candidate((label,), error=str(error)), b"", kept))
            return False
        step = self._judged((" + ".join((label, *(self.methods or ()))),), made.content,
                            _clock() - start)  # fmt: skip
        if self.methods is None:  # the first step: equalized too, the better kept
            step, made = self._equalized(kept, label, step, made)
        self.steps.append((step, made.content, kept))
        # Good enough, slower than float32 (more float ops only add time), or at float16's
        # size (half float32's: float16 keeps float accuracy there): stop.
        big = 2 * (step.size_bytes or 0) >= len(self.reference.content)
        return not (self._slower(step) or self._good(step) or big)

    def _equalized(self, kept: tuple[str, ...], label: str, step: Any, made: Any) -> Any:
        """The first step, or its equalized form when better by :func:`.selection.choose`.

        An equalized form kept becomes the calibrated file every later step quantizes.
        """
        from tfcompress.quantization.methods.apply import _clock, _rewritten
        from tfcompress.quantization.methods.selection import choose
        from tfcompress.quantization.selective import quantize_calibrated

        self.methods, start, name = (), _clock(), f"{label} + equalize"
        recipe = replace(self.plain_recipe, float_nodes=kept, methods=("equalize",))
        try:
            base = _rewritten(self.model, ("equalize",), recipe, self.calibration,
                              self.configure_for, searched=False)[0]  # fmt: skip
            equalized = quantize_calibrated(base, recipe, source=self.source)
        except (ConversionError, UnsupportedModelError) as error:
            self.first = f"{name} not made: {error}"
            return step, made
        other = self._judged((name,), equalized.content, _clock() - start)
        index, _ = choose(step, [other], gated=self.gate is not None)
        self.first = (
            f"{name if index == 0 else label} kept: weakest output {other.worst_snr:.1f} dB with "
            f"equalize, {step.worst_snr:.1f} dB without"
        )
        if index != 0:
            return step, made
        self.methods, self.calibrated = ("equalize",), base
        return other, equalized

    def _choose(self, plain: Any) -> tuple[Any, str]:
        """The file to keep and why (the module docstring's rule)."""
        made = [plain, *(c for c, _, _ in self.steps if c.error is None)]
        bar = "the gate" if self.gate is not None else f"the {self.bar.per_op_min_snr:g} dB bar"
        # A step at float16's size or more is never kept: float16 keeps float accuracy there
        # (on a tiny model, ops kept float made a file larger than float32's).
        small = [c for c in made if 2 * c.size_bytes < len(self.reference.content)]
        fast = [c for c in made if not self._slower(c) and (c is plain or c in small)]
        good = [c for c in fast if self._good(c)]
        if good:
            # A later step made only by float ops: kept for speed, or not at all (the
            # emotion classifier's 5 "slow" ops cost 408 B and 0.4 pt and gained no time).
            chosen = reduce(lambda a, b: b if too_slow(a.latency_ms, b.latency_ms, 1) else a, good)
            extra = (chosen.latency_ms - self.float_ms) * 1000  # > 0: say why not slower
            return chosen, f"it reaches {bar} and is {self._cost(chosen)}" + (
                f" (+{extra:.1f} us: within the timings' spread or under the {FLOOR_MS * 1000:g}"
                " us floor, not slower)" * (extra > 0)
            )
        if not fast:
            return plain, (
                f"every file that keeps ops float is slower than float32 or at float16's size, "
                f"and so is plain int8 ({self._cost(plain)}): kept plain int8, the smallest; "
                "--recipe float16 keeps float accuracy at half float32's size"
            )
        best = max(fast, key=lambda c: (self._margin(c), -c.size_bytes))
        return best, (
            f"no file reached {bar} without being slower than float32 or reaching float16's "
            f"size; kept {best.label}, the nearest to it of those not slower ({self._cost(best)}"
            "); --recipe float16 keeps float accuracy at half float32's size"
        )

    def _margin(self, candidate: Any) -> float:  # nearness to the bar: the gate's, else SNR
        worst = candidate.worst_margin if self.gate is not None else None
        value = candidate.worst_snr if worst is None else worst.scaled
        return -math.inf if math.isnan(value) else value  # unmeasurable: the worst

    def _cost(self, candidate: Any) -> str:
        size, latency = len(self.reference.content), candidate.latency_ms
        return (
            f"{candidate.size_bytes:,} B ({candidate.size_bytes / size:.2f}x float32's {size:,} "
            f"B), {ms(latency)} ms/sample ({slowdown(latency, self.float_ms):.2f}x float32's "
            f"{ms(self.float_ms)} ms on {BACKEND}, {THREADS} thread), weakest output "
            f"{candidate.worst_snr:.1f} dB"
        )
