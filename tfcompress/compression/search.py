"""The search of :func:`tfcompress.compress`: try the ladder cheapest first, stop when beaten.

Stop rule (docs/compress.md): before each rung, every remaining rung whose lower bound
cannot beat the best passing artifact is dropped; when none is left the search stops. A rung
bounded by ``"int8"`` stores at least int8 weights and runs at least the plain int8 graph,
so it cannot be smaller (gzip) or faster than the plain int8 attempt by more than
:data:`SIZE_SLACK` / :data:`LATENCY_SLACK`; selective steps only add float layers, so the
first passing step ends them; int16x8 is tried only when no int8 attempt passed.
Pruning and clustering have no bound (they shrink gzip) and are always tried when asked for.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from tfcompress.compression.attempts import Attempt
from tfcompress.compression.build import Built, build
from tfcompress.compression.candidates import LATENCY_BACKENDS, Rung
from tfcompress.compression.judging import edgetpu_rank, edgetpu_summary, edgetpu_verdict, judge
from tfcompress.errors import ConversionError, UnsupportedModelError

logger = logging.getLogger(__name__)

SIZE_SLACK = 0.01  # re-calibrating moves a few bytes of scales: not worth an attempt
LATENCY_SLACK = 0.05  # below timing noise on a shared machine


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

    # -- ranking ------------------------------------------------------------------------
    def key(self, attempt: Attempt) -> tuple[float, ...]:
        """Smaller is better: Edge TPU single segment first, then gzip bytes or latency."""
        measure = attempt.latency_ms if self.objective == "latency" else attempt.gzip_bytes
        first = edgetpu_rank(attempt) if self.target == "edgetpu" else 0
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
        return any(a.passed and a.technique in ("ptq", "selective", "qat") for a in self.attempts)

    def beaten(self, rung: Rung) -> str | None:
        """Why ``rung`` cannot beat the best passing artifact, or None when it might."""
        best = self.best
        if rung.fallback_only and self.int8_passed():
            return f"{rung.name} is the fallback when no int8 attempt passes"
        if rung.last_resort and best is not None:
            return f"{rung.name} is the last resort when nothing smaller passes"
        if best is None or rung.bound != "int8":
            return None
        int8 = self.plain_int8()
        if int8 is None or self.key(best)[0] > 0:
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
                Built(prebuilt, {"recipe": recipe})
                if prebuilt is not None
                else build(
                    technique,
                    recipe,
                    self.reference,
                    representative_data=self.representative,
                    train_data=self.train_data,
                    eval_data=self.eval_set,
                    target=self.target if self.target == "edgetpu" else None,
                    seed=self.seed,
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
        except (ConversionError, UnsupportedModelError) as error:
            # A rung this model cannot take (no integer kernel, tfmot refuses a layer, an
            # export the runtime rejects): recorded with the reason, the search goes on.
            done = Attempt(
                index, name, technique, _as_made(technique, recipe), "error", str(error),
                seconds=time.monotonic() - start, float_layers=float_layers, notes=notes,
            )  # fmt: skip
            return self.record(done, None)
        from tfcompress.training.sparsity import gzip_size

        latency = None
        if self.measure:
            from tfcompress.compression.latency import measure_latency

            latency = measure_latency(
                built.content,
                backend=LATENCY_BACKENDS[self.target],
                threads=self.threads,
                name=name,
            )
        edgetpu = None
        if self.target == "edgetpu":
            edgetpu = self.lint(built)
            refusal = edgetpu_verdict(edgetpu, built.float_nodes)
            if refusal is not None and fields["status"] == "passed":
                fields = {**fields, "status": "failed", "why": f"gate passed, but {refusal}"}
        done = Attempt(
            index=index,
            name=name,
            technique=technique,
            recipe=built.recipe,
            size_bytes=len(built.content),
            gzip_bytes=gzip_size(built.content),
            latency_ms=latency,
            float_layers=float_layers,
            float_nodes=built.float_nodes,
            edgetpu=edgetpu,
            seconds=time.monotonic() - start,
            notes=notes,
            **fields,
        )
        return self.record(done, built.content)

    def lint(self, built: Built) -> dict[str, Any]:
        """The Edge TPU linter's summary of the artifact."""
        import tfcompress

        report = getattr(built.edgetpu, "linter", built.edgetpu)  # quantize's EdgeTPUVerdict
        if report is None:
            report = tfcompress.edgetpu.check(built.content)
        return edgetpu_summary(report)

    def record(self, attempt: Attempt, content: bytes | None) -> Attempt:
        """Keep the attempt (and a passing one's bytes) and report progress."""
        self.attempts.append(attempt)
        if content is not None and attempt.passed:
            self.contents[attempt.index] = content
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
    counts, k = [], 1
    while k < len(state.sensitive):
        counts.append(k)
        k *= 2
    state.planned += max(len(counts) - 1, 0)
    for count in counts:
        if state.out_of_time():
            return
        kept = state.sensitive[:count]
        recipe = {**rung.recipe, "float_nodes": [s.node for s in kept]}
        done = state.attempt(
            f"selective-{count}",
            "selective",
            recipe,
            float_layers=tuple(layer_of(s) for s in kept),
        )
        gate_passed = bool((done.gate or {}).get("passed"))
        if done.passed or gate_passed or done.status == "error":
            return  # more float layers cannot pass a target that refuses float ones


def layer_of(entry: Any) -> str:
    """The Keras layer of a ranked node, or the node's own name when it maps to none."""
    return entry.layer or entry.node


def _as_made(technique: str, recipe: dict[str, Any]) -> dict[str, Any]:
    """The recipe of an attempt that made nothing, in the shape a made one records."""
    if technique in ("ptq", "selective"):
        return recipe if "recipe" in recipe else {"recipe": recipe}
    return {"technique": technique, **recipe}
