"""One finding of the microcontroller check: what is wrong, where, and what to do.

Rules (``Finding.rule``), each a fact the report states:

* ``no_kernel``: TFLM has no kernel for an op (named, with every index that uses it);
* ``refused``: TFLM has the kernel but would not prepare or run the op (its own words);
* ``float_model`` / ``float_ops`` / ``int16``: the model does not compute in int8 throughout;
* ``crash`` / ``hang``: TFLM crashed (with its signal) or hung in its child process;
* ``no_arena``: no arena up to the largest tried allocated;
* ``arena_crash``: a too-small arena crashed TFLM instead of failing (the bisection counted
  it as too small and went on);
* ``arena_unstable``: the smallest arena did not allocate again in another process;
* ``io_type``: an input or output of a type TFLM cannot be given or give back (int4, string);
* ``too_large``: inputs and outputs declaring more than 64 MiB per invocation (nothing run);
* ``memory``: a TFLM call needed more than the child's memory limit;
* ``reference_failed``: LiteRT's reference kernels could not run the model, or refused an op
  TFLM ran unchecked (no comparison);
* ``mismatch``: TFLM's outputs differ from LiteRT's reference kernels by more than 1
  quantized unit on some sample;
* ``over_budget``: the arena or the flash is over the budget given.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

#: Rules that mean TFLM cannot run the model as it is.
BLOCKING = frozenset(
    {"no_kernel", "refused", "crash", "hang", "no_arena", "io_type", "too_large", "memory"}
)


@dataclass(frozen=True)
class Finding:
    """What the check found, with what to do about it.

    Attributes:
        rule: Its kind (see the module's list).
        op: The op's name (``TOPK_V2``), when it is about one.
        index: The first op's index in its subgraph.
        indices: Every op index it is about (an op used several times).
        signal: The signal of a crash (11 for SIGSEGV).

    Example:
        >>> Finding("no_kernel", "TFLM has no kernel for SIGN (op 3)", "...", "SIGN", 3).blocking
        True
    """

    rule: str
    message: str
    fix: str
    op: str | None = None
    index: int | None = None
    subgraph: int = 0
    indices: tuple[int, ...] = ()
    signal: int | None = None

    @property
    def blocking(self) -> bool:
        """Whether it keeps TFLM from running the model."""
        return self.rule in BLOCKING

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``indices`` holds ``index`` when no other was given)."""
        indices = list(self.indices or (() if self.index is None else (self.index,)))
        return {**asdict(self), "blocking": self.blocking, "indices": indices}

    def __str__(self) -> str:
        return f"{self.message}: {self.fix}"
