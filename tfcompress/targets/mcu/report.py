"""McuReport: what TFLM makes of a model, as data (``to_dict``) and for people (``str``)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from tfcompress.targets.mcu.arena import HOST_NOTE, MARGIN, Arena
from tfcompress.targets.mcu.exactness import Exactness
from tfcompress.targets.mcu.export_c import ARRAY_OVERHEAD_BYTES
from tfcompress.targets.mcu.findings import Finding
from tfcompress.targets.mcu.resolver import OpCall, op_calls


@dataclass(frozen=True)
class Budget:
    """A limit the user set (``--max-arena``, ``--max-flash``) and how the model did.

    Attributes:
        value: Bytes measured (the recommended arena, with its margin; the flash), None when
            it could not be measured.
    """

    name: str
    limit: int
    value: int | None

    @property
    def met(self) -> bool:
        """Whether the value is known and within the limit."""
        return self.value is not None and self.value <= self.limit

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"name": self.name, "limit_bytes": self.limit, "value_bytes": self.value,
                "met": self.met}  # fmt: skip

    def __str__(self) -> str:
        shown = "unknown" if self.value is None else f"{self.value:,} B"
        verdict = "within" if self.met else "over" if self.value is not None else "not shown within"
        return f"{self.name} {shown} {verdict} the budget of {self.limit:,} B"


@dataclass(frozen=True)
class McuReport:
    """TFLite Micro's verdict on one ``.tflite``, measured on this host.

    Attributes:
        source: The model's path (``<bytes>`` for bytes).
        flash_bytes: Its flash as a C array (model + :data:`ARRAY_OVERHEAD_BYTES`).
        precision: ``int8``, ``float32``, ``mixed`` or ``int16x8``.
        ops: Every op's name, in the main subgraph's order.
        findings: What was found, each with what to do (ops TFLM lacks, by name and index).
        arena: The tensor arena (None when TFLM could not load the model).
        exactness: TFLM against LiteRT's reference kernels (None when it could not run).
    """

    source: str
    model_bytes: int
    flash_bytes: int
    precision: str
    ops: tuple[str, ...]
    findings: tuple[Finding, ...]
    arena: Arena | None
    exactness: Exactness | None
    tflm_version: str | None
    seconds: float
    budgets: tuple[Budget, ...] = field(default=())

    @property
    def compatible(self) -> bool:
        """TFLM runs the whole model: a kernel for every op, an arena that allocates."""
        return (
            not any(f.blocking for f in self.findings)
            and self.arena is not None
            and self.arena.smallest is not None
        )

    @property
    def full_int8(self) -> bool:
        """Every op computes in int8 (int8 input and output included)."""
        return self.precision == "int8"

    @property
    def unsupported(self) -> tuple[Finding, ...]:
        """The ops TFLM has no kernel for (or refused), each by name and index."""
        return tuple(f for f in self.findings if f.rule in {"no_kernel", "refused"})

    @property
    def resolver(self) -> tuple[OpCall, ...]:
        """The ops to register with ``MicroMutableOpResolver``, each with its ``Add`` method.

        The main subgraph's distinct ops (``export-c``'s ``OUT_ops.h`` adds those of any
        other subgraph, a WHILE's body); a method of None: TFLM's resolver has none.
        """
        return op_calls(self.ops)

    @property
    def within_budgets(self) -> bool:
        """Every budget given is met (True without budgets)."""
        return all(b.met for b in self.budgets)

    def with_budgets(
        self, *, max_arena: int | None = None, max_flash: int | None = None
    ) -> McuReport:
        """This report with budgets checked: the recommended arena and the flash."""
        budgets = []
        if max_arena is not None:
            value = None if self.arena is None else self.arena.recommended
            budgets.append(Budget("arena", int(max_arena), value))
        if max_flash is not None:
            budgets.append(Budget("flash", int(max_flash), self.flash_bytes))
        findings = [f for f in self.findings if f.rule != "over_budget"]
        findings += [
            Finding(
                "over_budget",
                str(b),
                "make the model smaller (fewer or narrower layers, a lower input resolution) "
                "or choose a board with more " + ("RAM" if b.name == "arena" else "flash")
                if b.value is not None
                else "fix the findings above so TFLM can run the model, then check again",
            )
            for b in budgets
            if not b.met
        ]
        return replace(self, budgets=tuple(budgets), findings=tuple(findings))

    def summary(self) -> dict[str, Any]:
        """The numbers a compress attempt keeps (plain data)."""
        arena = self.arena
        return {
            "compatible": self.compatible,
            "full_int8": self.full_int8,
            "arena_bytes": None if arena is None else arena.smallest,
            "arena_recommended_bytes": None if arena is None else arena.recommended,
            "flash_bytes": self.flash_bytes,
            "bit_exact": None if self.exactness is None else self.exactness.bit_exact,
            "unsupported_ops": sorted({f.op for f in self.unsupported if f.op}),
        }

    def save_beside(self, out: Any, *, overwrite: bool = False) -> dict[str, Any]:
        """Nothing to write beside an artifact: the report lives in the JSON."""
        return {}

    def to_dict(self) -> dict[str, Any]:
        """JSON form: every field (nested ones as their JSON) and what follows from them."""
        nested = {"arena": self.arena, "exactness": self.exactness}
        lists = {"findings": self.findings, "budgets": self.budgets}
        calls = self.resolver
        return {
            **{f.name: getattr(self, f.name) for f in fields(self)},
            **{key: None if value is None else value.to_dict() for key, value in nested.items()},
            **{key: [item.to_dict() for item in items] for key, items in lists.items()},
            "ops": list(self.ops),
            "seconds": round(self.seconds, 3),
            "compatible": self.compatible,
            "full_int8": self.full_int8,
            "flash_overhead_bytes": ARRAY_OVERHEAD_BYTES,
            "resolver": {
                "size": len(calls),
                "methods": [c.method for c in calls if c.method],
                "without_method": [c.op for c in calls if not c.method],
            },
            "unsupported_ops": [f.to_dict() for f in self.unsupported],
            "within_budgets": self.within_budgets,
        }

    def __str__(self) -> str:
        verdict = "runs on TFLite Micro" if self.compatible else "does not run on TFLite Micro"
        lines = [
            f"{self.source}: {verdict} ({len(self.ops)} ops, {self.precision}; "
            f"tflite-micro {self.tflm_version or '?'})"
        ]
        arena = self.arena
        if arena is not None and arena.smallest is not None:
            recorded = ""
            if arena.recorded is not None:
                parts = [f"TFLM recorded {arena.recorded.total:,} B"]
                if arena.recorded.head is not None and arena.recorded.tail is not None:
                    parts.append(
                        f"{arena.recorded.head:,} planned tensors + {arena.recorded.tail:,} "
                        "persistent"
                    )
                recorded = f" ({', '.join(parts)})"
            lines.append(
                f"tensor arena: {arena.smallest:,} B smallest that allocates{recorded}; "
                f"declare {arena.recommended:,} B (+{MARGIN:.0%} margin)"
            )
            lines.append(f"  {HOST_NOTE}")
        elif arena is not None and arena.tried_up_to is not None:
            lines.append(f"tensor arena: none up to {arena.tried_up_to:,} B allocated")
        lines.append(
            f"flash: {self.flash_bytes:,} B (model {self.model_bytes:,} B + C array "
            f"overhead <= {ARRAY_OVERHEAD_BYTES} B; TFLM's code comes on top)"
        )
        calls = self.resolver
        adds = ", ".join(f"{c.method}()" if c.method else f"{c.op} (no Add method)" for c in calls)
        lines.append(f"ops to register: tflite::MicroMutableOpResolver<{len(calls)}> with {adds}")
        if self.exactness is not None:
            lines.append(f"outputs: {self.exactness}")
        lines.extend(f"budget: {budget}" for budget in self.budgets)
        if self.findings:
            lines.append("findings:")
            lines.extend(f"  - {finding}" for finding in self.findings)
        lines.append(f"checked in {self.seconds:.1f} s")
        return "\n".join(lines)
