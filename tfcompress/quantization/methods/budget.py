"""What ``auto`` may spend, and what it expects each candidate to cost.

:func:`~tfcompress.quantization.methods.apply.quantize_with_methods` measures the plain path
(the float32 reference and plain int8) and gives ``auto`` :data:`AUTO_BUDGET` times its
seconds. Candidates are made in the order of their expected payoff
(:data:`~tfcompress.quantization.methods.catalog.AUTO_PAYOFF`) per estimated second
(:class:`Costs`: what they share is paid once); one whose estimate would pass the budget is
skipped before it is paid for, and the report says so with the numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tfcompress.quantization.methods.calibrated import SHARED_KEY
from tfcompress.quantization.methods.catalog import AUTO_PAYOFF
from tfcompress.quantization.methods.registry import GraphMethod, range_methods, weight_methods

#: The budget of ``auto``, asked for (``--method auto``) or started by a gate that plain int8
#: fails: its run (plain int8, the float32 reference, the shared calibration, every candidate
#: and its scoring; under a gate, not judging plain int8 itself, which the gate does anyway)
#: may take at most this many times plain int8's seconds: what ``quantize`` without methods
#: does (loading the model, reading the data, the float32 reference and plain int8
#: conversion), measured in the same run.
#: A candidate whose estimated cost would pass it is skipped before it is paid for (a rewrite
#: costs about two conversions, the shared float run about one calibration pass, a candidate
#: on the calibrated graph about the cheapest one made so far); the float run itself stops
#: when, paced on its batches, it would pass it. Every skip is reported with its numbers.
#: Methods named (``--method mse-ranges``) are always made: named is paid for.
AUTO_BUDGET = 1.5


@dataclass(frozen=True)
class Budget:
    """Whether ``auto`` can still afford a candidate (None ``ratio``: no budget, all made).

    Attributes:
        ratio: :data:`AUTO_BUDGET`, or None when the methods were named.
        plain_seconds: Plain int8's seconds in this run (the verb up to the methods, the
            float32 reference and plain int8).

    Example:
        >>> budget = Budget(1.5, 0.6)
        >>> budget.refuses("equalize+bias-correction", spent=0.7, estimate=0.5)[:66]
        "auto's budget 1.5x plain int8 (0.9 s) would be passed (0.7 s spent"
        >>> budget.refuses("mse-ranges", spent=0.7, estimate=0.1) is None
        True
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
            f"({why}); name it to make it (--method {label.replace('+', ',')})"
        )


@dataclass
class Costs:
    """What auto expects the next candidate to cost, in seconds, from this run's timings.

    Attributes:
        graph: A candidate on a calibrated graph: its edit, quantizer call and scoring (the
            cheapest made so far; before any, plain int8's scoring).
        rewrite: A weight method's rewrite and its calibrate-only conversion: about two
            of plain int8's conversions (the rewrite runs a Keras sub-model over the samples
            for its statistics, then converts and calibrates again).
        float_run: The float run of a calibrated graph that its candidates share (one
            calibration pass, as the calibrate-only conversion measured it).
        judging: Running the reference and plain int8 on the samples, paid with the first
            candidate scored (0 once paid).
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
    wanted: set[str] = set()
    for methods in candidates:
        if weight_names(methods) == weights:
            for method in range_methods(methods):
                wanted.add("patches" if isinstance(method, GraphMethod) else "histograms")
    return wanted


def weight_names(methods: tuple[str, ...]) -> tuple[str, ...]:
    """The names of the weight methods among ``methods`` (what one rewritten copy is for)."""
    return tuple(m.name for m in weight_methods(methods))
