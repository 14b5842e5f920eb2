"""Budgets: what a selected model must fit (size, latency on a named target, accuracy)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from tfcompress.errors import InvalidInputError
from tfcompress.targets.base import get_target, list_targets


@dataclass(frozen=True)
class Budgets:
    """Limits a candidate must meet; None means "no limit".

    Latency is the median (p50) of one int8 ``.tflite`` inference at batch 1, measured by
    :func:`tfcompress.benchmark` on the latency backend of ``target`` with ``threads``
    threads, on the worker that ran the candidate.

    Attributes:
        max_size_bytes: Largest int8 ``.tflite`` file, in bytes.
        max_latency_ms: Largest median latency, in milliseconds.
        target: The target latency (and int8 accuracy) is measured for, on its latency
            backend (:func:`tfcompress.targets.base.list_targets`; ``select --target``).
        threads: CPU threads of that backend.
        min_accuracy: Smallest int8 accuracy on the eval data, in [0, 1].
        target_limits: Upper limits on what that target measures of each candidate's int8
            file (its budget fields: ``{"max_edgetpu_segments": 1}`` for the Edge TPU).

    Example:
        >>> Budgets(max_size_bytes=300_000, max_latency_ms=5.0, min_accuracy=0.9).threads
        1
    """

    max_size_bytes: int | None = None
    max_latency_ms: float | None = None
    target: str = "cpu"
    threads: int = 1
    min_accuracy: float | None = None
    target_limits: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "target_limits", dict(self.target_limits))
        check_budgets(self)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data; :meth:`from_dict` reads it back."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Budgets:
        """Budgets from :meth:`to_dict` output.

        Raises:
            InvalidInputError: Unknown keys or impossible values.
        """
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise InvalidInputError(
                f"unknown budget key(s) {unknown}; use {sorted(cls.__dataclass_fields__)}."
            )
        return cls(**data)

    def __str__(self) -> str:
        parts = []
        if self.max_size_bytes is not None:
            parts.append(f"size <= {self.max_size_bytes:,} B")
        if self.max_latency_ms is not None:
            parts.append(
                f"latency <= {self.max_latency_ms:g} ms ({self.target}, "
                f"{self.threads} thread{'s' if self.threads != 1 else ''})"
            )
        if self.min_accuracy is not None:
            parts.append(f"accuracy >= {self.min_accuracy:.2%}")
        for budget in target_budget_fields(self):
            parts.append(f"{budget.label} <= {budget.shown(self.target_limits[budget.name])}")
        return ", ".join(parts) or "no budgets"


def target_budget_fields(budgets: Budgets) -> list[Any]:
    """The budget fields of the budgets' target that have a limit, in the target's order."""
    fields_ = get_target(budgets.target).budget_fields
    return [f for f in fields_ if f.name in budgets.target_limits]


def check_budgets(budgets: Budgets) -> None:
    """Refuse budgets no model can meet or that make no sense.

    Raises:
        InvalidInputError: A negative or zero limit, an accuracy outside [0, 1], an unknown
            target or a thread count below 1.
    """
    size = budgets.max_size_bytes
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size <= 0):
        raise InvalidInputError(
            f"max_size_bytes must be a positive whole number of bytes, got {size!r}."
        )
    latency = budgets.max_latency_ms
    if latency is not None and (
        isinstance(latency, bool)
        or not isinstance(latency, int | float)
        or not math.isfinite(latency)
        or latency <= 0
    ):
        raise InvalidInputError(f"max_latency_ms must be a positive number, got {latency!r}.")
    accuracy = budgets.min_accuracy
    if accuracy is not None and (
        isinstance(accuracy, bool)
        or not isinstance(accuracy, int | float)
        or not 0.0 <= accuracy <= 1.0
    ):
        raise InvalidInputError(
            f"min_accuracy must be a fraction in [0, 1] (0.95 for 95%), got {accuracy!r}."
        )
    target = get_target(budgets.target)  # UnknownNameError lists them
    _check_target_limits(budgets.target, budgets.target_limits)
    if latency is not None and not target.judges_latency:
        flags = ", ".join(f.flag for f in target.budget_fields)
        raise InvalidInputError(
            f"max_latency_ms (--max-latency) would judge by {target.latency_backend}'s time on "
            f"this host, which is no device figure for {target.display_name}: budget "
            f"{flags or 'the size'} instead (the host time is still shown)."
        )
    threads = budgets.threads
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise InvalidInputError(f"threads must be a whole number >= 1, got {threads!r}.")


def _check_target_limits(target: str, limits: Mapping[str, Any]) -> None:
    known = {f.name: f for f in get_target(target).budget_fields}
    for name, limit in limits.items():
        if name not in known:
            owners = [
                t for t in list_targets() if name in {f.name for f in get_target(t).budget_fields}
            ]
            where = f"target {owners[0]!r} (--target {owners[0]})" if owners else None
            raise InvalidInputError(
                f"budget {name!r} applies to {where}, not {target!r}."
                if where
                else f"unknown budget {name!r}; {target!r} takes {sorted(known) or 'none'}."
            )
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int | float)
            or not math.isfinite(limit)
            or limit <= 0
        ):
            raise InvalidInputError(f"{name} must be a positive number, got {limit!r}.")
