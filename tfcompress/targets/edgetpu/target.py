"""``quantize(..., target="edgetpu")``: the recipe the compiler wants, and its verdict next to ours.

The Edge TPU runs full-integer models with every shape fixed, so the target (registered here,
see :mod:`tfcompress.targets.base`) makes the ``int8`` recipe integer-only, with uint8 (or int8)
inputs and outputs at a static batch of 1. After the conversion the linter predicts what the
compiler will map; where ``edgetpu_compiler`` is installed (or given) it runs too, and where
the two disagree the verdict lists each difference and trusts the compiler, which is what the
device will run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfcompress._files import write_bytes_atomic, write_text_atomic
from tfcompress.errors import InvalidInputError
from tfcompress.targets.base import (
    BudgetField,
    RecipeRules,
    Target,
    TargetOption,
    register_target,
)
from tfcompress.targets.edgetpu.compiler import (
    CompilerRun,
    compile_for_edgetpu,
    find_compiler,
)
from tfcompress.targets.edgetpu.report import EdgeTPUReport

NOT_INSTALLED = "edgetpu_compiler not installed"


@dataclass(frozen=True)
class EdgeTPUVerdict:
    """What the linter predicts for a model, and what the compiler made of it when it ran.

    Attributes:
        linter: The static prediction (:func:`tfcompress.edgetpu.check`).
        compiler: The compiler's run (parsed log and compiled bytes); None when it did not run.
        compiler_status: ``"compiled"`` or ``"edgetpu_compiler not installed"``.
        disagreements: Each point where the compiler's result differs from the prediction.
    """

    linter: EdgeTPUReport
    compiler: CompilerRun | None
    compiler_status: str
    disagreements: tuple[str, ...] = ()

    @property
    def trusted(self) -> str:
        """Whose numbers stand: the compiler's when it ran, else the linter's."""
        return "linter" if self.compiler is None else "compiler"

    @property
    def compatible(self) -> bool:
        """Every op on the Edge TPU, by the trusted source."""
        if self.compiler is not None:
            return self.compiler.log.fully_mapped
        return self.linter.compatible

    def save_compiled(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Write the compiled ``*_edgetpu.tflite`` atomically.

        Raises:
            InvalidInputError: The compiler did not run.
            OutputExistsError: ``path`` exists and ``overwrite`` is False.
        """
        if self.compiler is None:
            raise InvalidInputError(f"no compiled model: {self.compiler_status}.")
        return write_bytes_atomic(path, self.compiler.compiled, overwrite=overwrite)

    def save_beside(
        self, out: str | os.PathLike[str], *, overwrite: bool = False
    ) -> dict[str, Any]:
        """Write what the compiler made next to ``out``: ``OUT_edgetpu.tflite`` and its log.

        The log sits beside the compiled model as edgetpu_compiler leaves it: the ``edgetpu``
        benchmark backend reads it to count the ops inside the custom op. Returns
        ``{"compiled_output": path or None}`` for the CLI's JSON.
        """
        if self.compiler is None:
            return {"compiled_output": None}
        compiled = self.save_compiled(compiled_path(out), overwrite=overwrite)
        write_text_atomic(compiled.with_suffix(".log"), self.compiler.log.text, overwrite=overwrite)
        return {"compiled_output": str(compiled)}

    def to_dict(self) -> dict[str, Any]:
        """JSON form: the linter's report, the compiler's parsed log, and who is trusted."""
        return {
            "compatible": self.compatible,
            "trusted": self.trusted,
            "compiler_status": self.compiler_status,
            "disagreements": list(self.disagreements),
            "linter": self.linter.to_dict(),
            "compiler": None if self.compiler is None else self.compiler.to_dict(),
        }

    def __str__(self) -> str:
        lint = self.linter
        lines = [
            f"Edge TPU linter: {lint.ops_mapped} of {lint.ops_total} ops predicted on the Edge "
            f"TPU, {lint.segments_predicted} segment(s)",
            self.compiler_status if self.compiler is None else str(self.compiler.log),
        ]
        if self.disagreements:
            lines.append("the linter and the compiler disagree; trusting the compiler:")
            lines.extend(f"  {line}" for line in self.disagreements)
        return "\n".join(lines)


def compiled_path(out: str | os.PathLike[str]) -> Path:
    """``OUT_edgetpu.tflite`` for ``--out OUT.tflite``: where the compiled model goes."""
    path = Path(out)
    return path.with_name(f"{path.stem}_edgetpu{path.suffix or '.tflite'}")


def edgetpu_verdict(
    content: bytes,
    *,
    compiler: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
) -> EdgeTPUVerdict:
    """Lint ``content``, compile it where a compiler is found, and compare the two.

    ``compiler`` None looks for ``edgetpu_compiler`` on PATH and, when there is none, says so
    in the verdict instead of failing; ``timeout`` as :func:`compile_for_edgetpu` takes it.

    Raises:
        BackendUnavailableError: ``compiler`` was given and is not an executable.
        EdgeTPUCompilerError: The compiler failed, refused the model or ran past ``timeout``.
    """
    from tfcompress.targets.edgetpu.linter import check

    report = check(content)
    executable = find_compiler(compiler)
    if executable is None:
        return EdgeTPUVerdict(report, None, NOT_INSTALLED)
    run = compile_for_edgetpu(content, compiler=executable, timeout=timeout)
    return EdgeTPUVerdict(report, run, "compiled", _disagreements(report, run))


def _disagreements(report: EdgeTPUReport, run: CompilerRun) -> tuple[str, ...]:
    log, found = run.log, []
    if log.ops_mapped is not None and (log.ops_mapped, log.ops_total) != (
        report.ops_mapped,
        report.ops_total,
    ):
        total = "?" if log.ops_total is None else log.ops_total
        found.append(
            f"ops mapped: linter {report.ops_mapped} of {report.ops_total}, compiler "
            f"{log.ops_mapped} of {total}"
        )
    if log.subgraphs is not None and log.subgraphs != report.segments_predicted:
        found.append(
            f"Edge TPU segments: linter {report.segments_predicted}, compiler {log.subgraphs}"
        )
    if log.fully_mapped != report.compatible:
        verdict = "every op mapped" if log.fully_mapped else "not every op mapped"
        found.append(
            f"compatible: linter {'yes' if report.compatible else 'no'}, compiler {verdict}"
        )
    return tuple(found)


def _op_name(op: Any) -> str | None:
    """The linter's first unmapped op as plain data (its type and index)."""
    if op is None:
        return None
    kind = getattr(op, "type", None)
    index = getattr(op, "index", None)
    return f"{kind} (op {index})" if kind is not None else str(op)


def _segments(content: bytes) -> float:
    from tfcompress.targets.edgetpu.linter import check

    return float(check(content).segments_predicted)


@register_target
class EdgeTPUTarget(Target):
    """The Coral Edge TPU: full-integer int8, uint8 (or int8) I/O, batch 1.

    Its check lints the file and runs ``edgetpu_compiler`` where one is found.
    """

    name = "edgetpu"
    summary = "Coral Edge TPU: full int8, uint8 I/O, batch 1; linter + edgetpu_compiler"
    display_name = "the Edge TPU"
    rules = RecipeRules(
        recipes=("int8",),
        integer_only=True,
        io_types=("uint8", "int8"),
        default_io_type="uint8",
        static_batch=1,
    )
    latency_backend = "edgetpu"
    gate_backend = "cpu"  # the integer model gives the same outputs on the CPU
    options = (
        TargetOption(
            name="compiler",
            flag="--compiler",
            help="the edgetpu_compiler to run (default: the one on PATH, if any)",
            metavar="PATH",
        ),
    )
    budget_fields = (
        BudgetField(
            name="max_edgetpu_segments",
            flag="--max-edgetpu-segments",
            label="Edge TPU segments",
            help="most Edge TPU segments the linter may predict for a candidate's int8 file "
            "(1: the whole model on the Edge TPU)",
            measure=_segments,
        ),
    )

    def check(self, content: bytes, **options: Any) -> EdgeTPUVerdict:
        """The linter's prediction, and the compiler's verdict where it runs."""
        return edgetpu_verdict(content, **options)

    def validate(self, **options: Any) -> None:
        """A ``compiler`` that is not an executable is refused before any conversion."""
        if options.get("compiler") is not None:
            find_compiler(options["compiler"])

    def side_outputs(
        self, out: str | os.PathLike[str], *, compiler: str | os.PathLike[str] | None = None
    ) -> tuple[Path, ...]:
        """``OUT_edgetpu.tflite`` and its log (see ``save_beside``), when a compiler runs."""
        if find_compiler(compiler) is None:
            return ()
        compiled = compiled_path(out)
        return compiled, compiled.with_suffix(".log")

    def summarize(self, verdict: Any) -> dict[str, Any] | None:
        """The linter's numbers a compress attempt keeps (of a verdict or a bare report)."""
        if verdict is None:
            return None
        report = getattr(verdict, "linter", verdict)
        return {
            "compatible": bool(report.compatible),
            "ops_mapped": int(report.ops_mapped),
            "ops_total": int(report.ops_total),
            "segments_predicted": int(report.segments_predicted),
            "first_unmapped_op": _op_name(report.first_unmapped_op),
        }

    def refusal(self, summary: Mapping[str, Any], float_nodes: tuple[str, ...]) -> str | None:
        """Only fully-integer artifacts qualify.

        A selective-float one is kept in the report with its predicted split so the price of
        its float layers is visible.
        """
        split = (
            f"the Edge TPU would run {summary['ops_mapped']} of {summary['ops_total']} ops in "
            f"{summary['segments_predicted']} segment(s)"
        )
        if float_nodes:
            only = "only fully-integer artifacts qualify"
            return f"keeps {len(float_nodes)} node(s) float: {split}; {only}"
        if summary["ops_mapped"] == 0:
            return f"no op maps to the Edge TPU: {split}"
        return None

    def rank(self, attempt: Any) -> int:
        """0 for an artifact the linter predicts in one Edge TPU segment, 1 otherwise."""
        summary = getattr(attempt, "target_verdict", None) or {}
        return 0 if summary.get("segments_predicted") == 1 and summary.get("compatible") else 1
