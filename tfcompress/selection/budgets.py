"""Budgets: what a selected model must fit (size, latency on a named backend, accuracy)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from tfcompress.errors import InvalidInputError

BACKENDS = ("cpu", "gpu", "edgetpu")


@dataclass(frozen=True)
class Budgets:
    """Limits a candidate must meet; None means "no limit".

    Latency is the median (p50) of one int8 ``.tflite`` inference at batch 1, measured by
    :func:`tfcompress.benchmark` on ``latency_backend`` with ``threads`` threads, on the
    worker that ran the candidate.

    Attributes:
        max_size_bytes: Largest int8 ``.tflite`` file, in bytes.
        max_latency_ms: Largest median latency, in milliseconds.
        latency_backend: Backend latency (and int8 accuracy) is measured on.
        threads: CPU threads of that backend.
        min_accuracy: Smallest int8 accuracy on the validation data, in [0, 1].

    Example:
        >>> Budgets(max_size_bytes=300_000, max_latency_ms=5.0, min_accuracy=0.9).threads
        1
    """

    max_size_bytes: int | None = None
    max_latency_ms: float | None = None
    latency_backend: str = "cpu"
    threads: int = 1
    min_accuracy: float | None = None

    def __post_init__(self) -> None:
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
                f"latency <= {self.max_latency_ms:g} ms ({self.latency_backend}, "
                f"{self.threads} thread{'s' if self.threads != 1 else ''})"
            )
        if self.min_accuracy is not None:
            parts.append(f"accuracy >= {self.min_accuracy:.2%}")
        return ", ".join(parts) or "no budgets"


def check_budgets(budgets: Budgets) -> None:
    """Refuse budgets no model can meet or that make no sense.

    Raises:
        InvalidInputError: A negative or zero limit, an accuracy outside [0, 1], an unknown
            backend or a thread count below 1.
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
    if budgets.latency_backend not in BACKENDS:
        raise InvalidInputError(
            f"latency_backend {budgets.latency_backend!r} does not run .tflite; choose from "
            f"{BACKENDS}."
        )
    threads = budgets.threads
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise InvalidInputError(f"threads must be a whole number >= 1, got {threads!r}.")
