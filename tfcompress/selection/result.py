"""The selection's result: one record per candidate, the Pareto front and the pick."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfcompress.selection.budgets import Budgets

if TYPE_CHECKING:
    from tfcompress.selection.config import SelectionConfig

TRAINED, OVER_BUDGET, FAILED = "trained", "over_budget", "failed"
FORMAT = "tfcompress.selection/1"


@dataclass(frozen=True)
class CandidateRecord:
    """Everything measured about one candidate, and its verdict.

    ``status`` is ``trained`` (accuracy measured on the int8 artifact), ``over_budget``
    (over the size or latency budget after phase 1, so never trained: no accuracy, no
    training time) or ``failed`` (``reason`` says where). ``meets_budgets`` is True only
    for a trained candidate within every budget; ``reason`` says which budget it misses.
    ``worker`` and ``host`` are where the latency was measured (``train_worker`` and
    ``train_host`` where it was trained); ``device`` names the worker of ``select --on``
    that measured it (None: the worker that built the candidate). ``target_measures``
    holds what the target measured of the int8 file for its budget fields (the Edge TPU's
    predicted segments). ``reused`` says the phases came from the work folder of an
    earlier run.
    """

    name: str
    family: str
    width: float
    resolution: int
    status: str
    meets_budgets: bool = False
    reason: str | None = None
    params: int | None = None
    macs: int | None = None
    size_bytes: int | None = None
    latency_ms: float | None = None
    latency_backend: str | None = None
    threads: int | None = None
    target_measures: dict[str, float] | None = None
    worker: str | None = None
    host: str | None = None
    device: str | None = None
    accuracy: float | None = None
    train_seconds: float | None = None
    train_worker: str | None = None
    train_host: str | None = None
    measured_at: float | None = None
    trained_at: float | None = None
    reward: float | None = None
    reused: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data."""
        return asdict(self)

    def __str__(self) -> str:
        size = f"{self.size_bytes:,} B" if self.size_bytes is not None else "-"
        latency = f"{self.latency_ms:.3f} ms" if self.latency_ms is not None else "-"
        accuracy = f"{self.accuracy:.2%}" if self.accuracy is not None else "-"
        return f"{self.name}: {size}, {latency}, accuracy {accuracy} [{self.status}]"


@dataclass(frozen=True)
class SelectionResult:
    """What :func:`tfcompress.select_model` found.

    Attributes:
        candidates: Every candidate's record, in enumeration order.
        pareto: Names of the trained candidates no other beats on accuracy (higher),
            latency (lower) and size (smaller) at once.
        best: The pick by ``objective`` among candidates meeting every budget, or None.
        budgets: The budgets checked.
        objective: ``"accuracy"`` or ``"reward"``.
        settings: Families, widths, resolutions, epochs and the other search settings.
        executor: Which executor ran the candidates.
        environment: The machine that ran the search (latencies come from ``host``).
        notes: Findings about the search itself (candidates ranked without latency where
            the target's backend could not run, and why).
        config: The :class:`~tfcompress.selection.config.SelectionConfig` searched with
            (``to_dict()["config"]``; ``SelectionConfig.from_dict`` reads it back); None for
            a result built by hand.

    Example:
        >>> result = tfcompress.select_model(...)  # doctest: +SKIP
        >>> result.best.name  # doctest: +SKIP
        'mobilenet_v2-w0.35-r32'
    """

    candidates: tuple[CandidateRecord, ...]
    pareto: tuple[str, ...]
    best: CandidateRecord | None
    budgets: Budgets
    objective: str
    settings: dict[str, Any] = field(default_factory=dict)
    executor: str = ""
    environment: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    config: SelectionConfig | None = None

    def closest(self, count: int = 3) -> list[CandidateRecord]:
        """The candidates nearest to meeting the budgets (largest relative miss first small)."""
        measured = [r for r in self.candidates if r.status != FAILED]
        return sorted(measured, key=lambda r: (shortfall(r, self.budgets), r.name))[:count]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (the ``selection.json`` report)."""
        return {
            "format": FORMAT,
            "objective": self.objective,
            "budgets": self.budgets.to_dict(),
            "settings": dict(self.settings),
            "executor": self.executor,
            "best": self.best.to_dict() if self.best else None,
            "pareto": list(self.pareto),
            "candidates": [r.to_dict() for r in self.candidates],
            "environment": dict(self.environment),
            "notes": list(self.notes),
            "config": None if self.config is None else self.config.to_dict(),
        }

    def __str__(self) -> str:
        from tfcompress.selection.report import summary

        return summary(self)

    def write_report(
        self, directory: str | os.PathLike[str], *, overwrite: bool = False
    ) -> tuple[Path, ...]:
        """Write ``selection.json``, ``selection.md`` and ``pareto.png`` into ``directory``.

        Args:
            directory: The report folder (created if missing).
            overwrite: Replace report files already there.

        Raises:
            OutputExistsError: Report files exist and ``overwrite`` is False.
            MissingDependencyError: matplotlib is not installed (checked before writing).
        """
        from tfcompress.selection.report import write_report

        return write_report(self, Path(directory), overwrite=overwrite)


def shortfall(record: CandidateRecord, budgets: Budgets) -> float:
    """How far ``record`` is from the budgets: its largest relative miss (0 when it meets them).

    Example:
        >>> shortfall(CandidateRecord("m", "f", 1.0, 32, TRAINED, size_bytes=150),
        ...           Budgets(max_size=100))
        0.5
    """
    misses = [0.0]
    if budgets.max_size is not None and record.size_bytes is not None:
        misses.append(record.size_bytes / budgets.max_size - 1.0)
    if budgets.max_latency is not None and record.latency_ms is not None:
        misses.append(record.latency_ms / budgets.max_latency - 1.0)
    if budgets.min_accuracy is not None:
        if record.accuracy is None:
            misses.append(1.0)  # untrained: its accuracy is unknown
        elif budgets.min_accuracy > 0:
            misses.append((budgets.min_accuracy - record.accuracy) / budgets.min_accuracy)
    return max(misses)
