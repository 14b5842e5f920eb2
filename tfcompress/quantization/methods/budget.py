"""What ``auto`` may spend, and what it expects each candidate to cost.

:data:`AUTO_BUDGET` times plain int8's seconds (:func:`~.apply.run_methods` measures them);
candidates by expected payoff per second (:class:`Costs`: what they share is paid once), one
whose estimate would pass the budget skipped unmade, and said with the numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tfcompress.quantization.methods.calibrated import SHARED_KEY
from tfcompress.quantization.methods.catalog import AUTO_PAYOFF
from tfcompress.quantization.methods.registry import GraphMethod, range_methods, weight_methods

#: The budget of ``auto``, asked for or started by a gate that plain int8 fails: the call
#: may take at most this many times what ``quantize`` without methods takes (measured in the
#: same run: up to plain int8's conversion auto does what it does). Every skip is reported
#: with its numbers; methods named are always made (docs/quantization.md, "What it costs").
AUTO_BUDGET = 1.5


@dataclass(frozen=True)
class Budget:
    """Whether ``auto`` can still afford a candidate (None ``ratio``: no budget, all made).

    Attributes:
        ratio: :data:`AUTO_BUDGET`, or None when the methods were named.
        plain_seconds: Plain int8's seconds in this run (the verb up to plain int8's end).
    """

    ratio: float | None
    plain_seconds: float

    @property
    def seconds(self) -> float:
        """The budget in seconds (infinite without one)."""
        return float("inf") if self.ratio is None else self.ratio * self.plain_seconds

    def refuses(self, label: str, *, spent: float, estimate: float) -> str | None:
        """Why a candidate is skipped (its cost would pass the budget), or None: make it."""
        if spent + estimate <= self.seconds:
            return None
        return self.stopped(label, f"{spent:.1f} s spent, about {estimate:.1f} s more")

    def stopped(self, label: str, why: str) -> str:
        """Why ``label`` was skipped: the budget, ``why`` it would be passed, how to make it."""
        return (
            f"auto's budget {self.ratio:g}x plain int8 ({self.seconds:.1f} s) would be passed "
            f"({why}); name it to make it (--methods {label.replace('+', ',')})"
        )


@dataclass
class Costs:
    """What auto expects the next candidate to cost, in seconds, from this run's timings.

    Attributes:
        graph: A candidate on the calibrated graph: its quantizer call and scoring.
        rewrite: A weight method's rewrite and its calibrate-only conversion.
        float_run: The float run of a calibrated graph that its candidates share.
        judging: Running the reference and plain int8 on the samples (0 once paid).
    """

    graph: float
    rewrite: float
    float_run: float
    judging: float = 0.0

    def of(self, methods: tuple[str, ...], calibrated: dict, measured: dict) -> float:
        """The seconds ``methods`` would add: what it shares is paid once."""
        weights = weight_names(methods)
        seconds = self.graph + self.judging
        if weights not in calibrated:
            seconds += self.rewrite
        if SHARED_KEY not in measured.get(weights, {}) and range_methods(methods):
            seconds += self.float_run
        return seconds

    def best(self, pending: list[tuple[str, ...]], calibrated: dict, measured: dict) -> Any:
        """The pending candidate of most expected payoff per second (catalog order on ties)."""
        return max(
            pending,
            key=lambda m: AUTO_PAYOFF.get(m, 1.0) / max(self.of(m, calibrated, measured), 1e-3),
        )

    def made(self, seconds: float, built: Sequence[Any]) -> None:
        """A graph candidate took ``seconds`` (its shared float run apart)."""
        self.graph = seconds if not built else min(self.graph, seconds)


def wanted(candidates: Sequence[tuple[str, ...]], weights: tuple[str, ...]) -> set[str]:
    """The statistics the candidates on one rewrite read from its float run."""
    return {
        "patches" if isinstance(method, GraphMethod) else "histograms"
        for methods in candidates
        if weight_names(methods) == weights
        for method in range_methods(methods)
    }


def weight_names(methods: tuple[str, ...]) -> tuple[str, ...]:
    """The names of the weight methods among ``methods`` (what one rewritten copy is for)."""
    return tuple(m.name for m in weight_methods(methods))
