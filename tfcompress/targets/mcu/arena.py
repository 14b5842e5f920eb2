"""The tensor arena: the smallest that allocates, found by bisection, and what TFLM records.

:func:`smallest_arena` bisects in child processes: the answer ``N`` allocates and ``N - 1``
does not; a probe that crashes (a too-small arena can segfault TFLM) counts as too small and
the bisection goes on in a fresh child. It is a host estimate (docs/mcu.md, "The arena is a
host estimate"), hence :data:`MARGIN`: the recommended arena is the smallest plus 10%,
rounded up to 16 bytes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from tfcompress.targets.mcu.probe import Budget, Failure, in_child

#: The safety margin over the host's smallest arena (see the module's docstring).
MARGIN = 0.10
#: TFLM aligns its arena to 16 bytes; recommended sizes are multiples of it.
ALIGNMENT = 16
#: The largest arena tried before giving up (no microcontroller has more RAM).
MAX_ARENA = 256 * 2**20
_MAX_RESUMES = 8

_TOTAL = re.compile(r"Arena allocation (total|head|tail) (\d+) bytes")
_SECTION = re.compile(
    r"'([^']+)' used (\d+) bytes with alignment overhead \(requested (\d+) bytes for (\d+) "
)


@dataclass(frozen=True)
class Allocations:
    """TFLM's own account of an arena (``RecordingMicroAllocator``, ``print_allocations``).

    Attributes:
        head: The non-persistent part (activations, scratch: planned, reused).
        tail: The persistent part (tensor structs, op data, quantization parameters).
        sections: ``(what, bytes used, bytes requested, allocations)`` per kind.
    """

    total: int
    head: int | None
    tail: int | None
    sections: tuple[tuple[str, int, int, int], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "total_bytes": self.total,
            "head_bytes": self.head,
            "tail_bytes": self.tail,
            "sections": [
                {"what": w, "used_bytes": u, "requested_bytes": r, "allocations": n}
                for w, u, r, n in self.sections
            ],
        }


def parse_allocations(log: str) -> Allocations | None:
    """TFLM's ``print_allocations`` lines read into numbers (None when it printed none)."""
    totals = {kind: int(value) for kind, value in _TOTAL.findall(log)}
    if "total" not in totals:
        return None
    sections = tuple(
        (what, int(used), int(asked), int(count))
        for what, used, asked, count in _SECTION.findall(log)
    )
    return Allocations(totals["total"], totals.get("head"), totals.get("tail"), sections)


def recommended(smallest: int, margin: float = MARGIN) -> int:
    """The arena to declare: ``smallest`` plus ``margin``, rounded up to 16 bytes.

    Example:
        >>> recommended(31736)
        34912
    """
    return int(math.ceil(smallest * (1.0 + margin) / ALIGNMENT) * ALIGNMENT)


@dataclass(frozen=True)
class Bisection:
    """How a bisection ended: the bracket, the probes, the crashes on the way.

    Attributes:
        low: The largest size that failed (``high - 1`` when it converged).
        probes: Sizes tried (in every child, crashed ones included).
        crashes: ``(arena bytes, signal)`` of each probe that crashed TFLM.
        failure: Why it stopped early (a crash before any probe, a time-out), else None.
    """

    low: int
    high: int
    probes: int
    crashes: tuple[tuple[int, int | None], ...] = ()
    failure: Failure | None = None

    @property
    def converged(self) -> bool:
        """Whether ``high`` is the smallest size (``high - 1`` failed)."""
        return self.high - self.low == 1


def smallest_arena(
    content: bytes, high: int, *, name: str, timeout: float | Budget | None = None
) -> Bisection:
    """Bisect the smallest arena in ``(0, high]``; ``high`` must be known to allocate.

    Every probe runs in a child; a crash counts as a failure at that size and the search
    goes on in a fresh child, at most 8 times.
    """
    low, probes = 0, 0
    crashes: list[tuple[int, int | None]] = []
    for _ in range(_MAX_RESUMES + 1):
        outcome = in_child(
            "smallest_arena",
            content,
            low,
            high,
            what=f"bisecting the tensor arena of {name} in TFLM",
            timeout=timeout,
            progress=True,
        )
        steps = [line.split() for line in outcome.progress.splitlines() if line.strip()]
        if outcome.failure is None:
            answer = outcome.value
            return Bisection(
                answer["low"], answer["high"], probes + answer["probes"], tuple(crashes)
            )
        probes += len(steps)
        if not steps or outcome.failure.kind != "crash":
            return Bisection(low, high, probes, tuple(crashes), outcome.failure)
        _, high_text, trying = steps[-1]
        crashes.append((int(trying), outcome.failure.signal))
        low, high = int(trying), int(high_text)
    return Bisection(low, high, probes, tuple(crashes))


@dataclass(frozen=True)
class Arena:
    """The tensor arena a model needs under TFLM, as measured on this host.

    Attributes:
        smallest: The smallest arena that allocated, in bytes (None: none was found).
        failed: The size just below it, which did not allocate (``smallest - 1``).
        recommended: What to declare on the board: ``smallest`` plus :data:`MARGIN`,
            rounded up to 16 bytes.
        recorded: TFLM's own breakdown at ``smallest`` (None where it printed none).
        crashes: ``(arena bytes, signal)`` of probes that crashed TFLM instead of failing.
        tried_up_to: The largest size tried when none allocated.
    """

    smallest: int | None
    failed: int | None
    recommended: int | None
    recorded: Allocations | None = None
    probes: int = 0
    crashes: tuple[tuple[int, int | None], ...] = ()
    tried_up_to: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form, with the margin and what the estimate means."""
        return {
            "smallest_bytes": self.smallest,
            "failed_bytes": self.failed,
            "recommended_bytes": self.recommended,
            "margin": MARGIN,
            "host_estimate": True,
            "note": HOST_NOTE,
            "tflm_recorded": None if self.recorded is None else self.recorded.to_dict(),
            "probes": self.probes,
            "crashes": [{"arena_bytes": a, "signal": s} for a, s in self.crashes],
            "tried_up_to_bytes": self.tried_up_to,
        }


#: What the arena numbers are, in one sentence (reports and docs say it with them).
HOST_NOTE = (
    "host estimate: TFLM's reference kernels on a 64-bit host; a 32-bit board's bookkeeping "
    "is smaller, its optimized kernels may need scratch the reference kernels do not: "
    f"declare the recommended size (+{MARGIN:.0%}) and confirm on the board"
)
