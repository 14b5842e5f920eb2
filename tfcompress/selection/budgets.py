"""Budgets: what a selected model must fit (size, latency on a named target, accuracy)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from tfcompress._config_fields import check_fields, checked_fields, integer, number, option
from tfcompress.errors import InvalidInputError
from tfcompress.targets.base import get_target, list_targets

_BELOW_0, _ABOVE_1 = math.nextafter(0.0, -1.0), math.nextafter(1.0, 2.0)  # [0, 1], closed


@dataclass(frozen=True)
class Budgets:
    """Limits a candidate must meet; None means "no limit".

    Latency is the median (p50) of one int8 ``.tflite`` inference at batch 1, measured by
    :func:`tfcompress.benchmark` on the latency backend of ``target`` with ``threads``
    threads, on the worker that ran the candidate.

    Attributes:
        max_size, max_latency, threads, min_accuracy: Options, each declared with its unit
            and help by :func:`~tfcompress._config_fields.option` below.
        target: The target latency (and int8 accuracy) is measured for, on its latency
            backend (:func:`tfcompress.targets.base.list_targets`; ``select --target``).
        target_limits: Upper limits on what that target measures of each candidate's int8
            file (its budget fields: ``{"max_edgetpu_segments": 1}`` for the Edge TPU,
            ``{"max_arena": 65536}`` for TFLite Micro, in bytes as ``mcu --max-arena``).

    Example:
        >>> Budgets(max_size=300_000, max_latency=5.0, min_accuracy=0.9).threads
        1
    """

    max_size: int | None = option(
        None,
        unit="B",
        parse="parse_size",
        metavar="SIZE",
        help="largest int8 .tflite, e.g. 500KB",
        check=integer(1, expected="a positive whole number of bytes", optional=True),
    )
    max_latency: float | None = option(
        None,
        unit="ms",
        parse="latency_ms",
        metavar="TIME",
        help="largest p50 latency of one int8 inference on the target's backend, e.g. 5ms",
        check=number(0, math.inf, "a positive number of milliseconds", optional=True),
    )
    target: str = "cpu"
    threads: int = option(
        1,
        help="CPU threads of the target's latency backend",
        check=integer(1, expected="a whole number >= 1"),
    )
    min_accuracy: float | None = option(
        None,
        parse="fraction",
        help="smallest int8 accuracy on --eval, e.g. 0.95 or 95%",
        check=number(_BELOW_0, _ABOVE_1, "a fraction in [0, 1] (0.95 for 95%)", optional=True),
    )
    target_limits: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_fields(self)
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
        return cls(**checked_fields(cls, data, what="budgets", taker="Budgets"))

    def __str__(self) -> str:
        parts = []
        if self.max_size is not None:
            parts.append(f"size <= {self.max_size:,} B")
        if self.max_latency is not None:
            parts.append(
                f"latency <= {self.max_latency:g} ms ({self.target}, "
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
    """Refuse budgets that do not fit their target (each field checks its own value).

    Raises:
        InvalidInputError: An unknown target, a limit of another target's, or a latency
            budget for a target whose host time is no device figure.
    """
    target = get_target(budgets.target)  # UnknownNameError lists them
    _check_target_limits(budgets.target, budgets.target_limits)
    if budgets.max_latency is not None and not target.judges_latency:
        flags = ", ".join(f.flag for f in target.budget_fields)
        raise InvalidInputError(
            f"max_latency (--max-latency) would judge by {target.latency_backend}'s time on "
            f"this host, which is no device figure for {target.display_name}: budget "
            f"{flags or 'the size'} instead (the host time is still shown)."
        )


def _check_target_limits(target: str, limits: Mapping[str, Any]) -> None:
    known = {f.name: f for f in get_target(target).budget_fields}
    for name, limit in limits.items():
        owners = [(t, f) for t in list_targets() for f in get_target(t).budget_fields]
        owner = next(((t, f.flag) for t, f in owners if f.name == name), None)
        if name not in known and owner is not None:  # in the CLI's words: "budget --max-arena"
            raise InvalidInputError(
                f"budget {name} ({owner[1]}) applies to target {owner[0]!r} (--target "
                f"{owner[0]}), not {target!r}."
            )
        if name not in known:
            raise InvalidInputError(
                f"unknown budget {name!r}; {target!r} takes {sorted(known) or 'none'}."
            )
        number(0, math.inf, "a positive number")(name, limit)
