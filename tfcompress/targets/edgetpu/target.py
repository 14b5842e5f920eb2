"""``quantize(..., target="edgetpu")``: the recipe the compiler wants, and its verdict next to ours.

The Edge TPU runs full-integer models with every shape fixed, so the target turns the
``int8`` recipe into uint8 (or int8) inputs and outputs at a static batch of 1. After the
conversion the linter predicts what the compiler will map; where ``edgetpu_compiler`` is
installed (or given) it runs too, and where the two disagree the verdict lists each
difference and trusts the compiler, which is what the device will run.

Example:
    >>> result = tfcompress.quantize(
    ...     model, representative_data=x, target="edgetpu"
    ... )  # doctest: +SKIP
    >>> print(result.edgetpu)  # doctest: +SKIP
    Edge TPU linter: 9 of 9 ops predicted on the Edge TPU, 1 segment(s)
    edgetpu_compiler not installed
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfcompress.errors import InvalidInputError
from tfcompress.models.saving import write_bytes_atomic
from tfcompress.targets.edgetpu.compiler import (
    CompilerRun,
    compile_for_edgetpu,
    find_compiler,
)
from tfcompress.targets.edgetpu.report import EdgeTPUReport

TARGETS = ("edgetpu",)
IO_TYPES = ("uint8", "int8")
NOT_INSTALLED = "edgetpu_compiler not installed"


def check_target(target: str | None, *, compiler: object) -> None:
    """Refuse an unknown target, and a compiler given without the Edge TPU target.

    Raises:
        InvalidInputError: Unknown ``target``, or ``compiler`` without ``target="edgetpu"``.
        BackendUnavailableError: ``compiler`` is not an executable.
    """
    if target is not None and target not in TARGETS:
        raise InvalidInputError(
            f"unknown target {target!r}; quantize knows {', '.join(TARGETS)} (other devices "
            "take a recipe as it is: drop --target)."
        )
    if compiler is not None and target != "edgetpu":
        raise InvalidInputError("a compiler (--compiler) applies to --target edgetpu only.")
    if compiler is not None:
        find_compiler(compiler)  # a wrong path is refused before any conversion


def edgetpu_options(
    recipe: object, *, input_type: str | None, output_type: str | None, float_fallback: bool | None
) -> dict[str, Any]:
    """The recipe options the Edge TPU compiler needs, after refusing what it cannot run.

    Args:
        recipe: The recipe asked for (a name or a ``Recipe``).
        input_type: The input dtype asked for (None: uint8, what Coral's examples feed).
        output_type: The output dtype asked for (None: the input's).
        float_fallback: Whether ops without an integer kernel may stay float.

    Returns:
        Options for ``Recipe.with_options``: the I/O types and ``batch_size=1``.

    Raises:
        InvalidInputError: A recipe other than ``int8``, float I/O, float fallback, or a
            batch size other than 1.
    """
    name = getattr(recipe, "name", recipe)
    if name != "int8":
        raise InvalidInputError(
            f"the Edge TPU runs full-integer models only: use the int8 recipe, not {name!r}."
        )
    if float_fallback or getattr(recipe, "float_fallback", False):
        raise InvalidInputError(
            "float fallback leaves ops in float, which the Edge TPU cannot run: drop "
            "--float-fallback for --target edgetpu (the linter then names the op to replace)."
        )
    if getattr(recipe, "batch_size", None) not in (None, 1):
        raise InvalidInputError(
            f"the Edge TPU compiler needs a static batch of 1, not batch_size="
            f"{getattr(recipe, 'batch_size', None)}; drop it from the recipe."
        )
    chosen_input = input_type or _recipe_type(recipe, "input_type") or "uint8"
    chosen_output = output_type or _recipe_type(recipe, "output_type") or chosen_input
    for option, value in (("input_type", chosen_input), ("output_type", chosen_output)):
        if value not in IO_TYPES:
            raise InvalidInputError(
                f"{option}={value!r}: the Edge TPU takes {' or '.join(IO_TYPES)} inputs and "
                "outputs (uint8 by default)."
            )
    return {"input_type": chosen_input, "output_type": chosen_output, "batch_size": 1}


def _recipe_type(recipe: object, option: str) -> str | None:
    value = getattr(recipe, option, None)  # a Recipe's own choice, unless it is the float default
    return None if value in (None, "float32") else str(value)


@dataclass(frozen=True)
class EdgeTPUVerdict:
    """What the linter predicts for a model, and what the compiler made of it when it ran.

    Attributes:
        linter: The static prediction (:func:`tfcompress.edgetpu.check`).
        compiler: The compiler's run (parsed log and compiled bytes); None when it did not run.
        compiler_status: ``"compiled"`` or ``"edgetpu_compiler not installed"``.
        disagreements: Each point where the compiler's result differs from the prediction.

    Example:
        >>> verdict.trusted, verdict.disagreements  # doctest: +SKIP
        ('compiler', ('ops mapped: linter 12 of 14, compiler 10 of 14',))
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


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


def edgetpu_verdict(
    content: bytes,
    *,
    compiler: str | os.PathLike[str] | None = None,
    timeout_s: float | None = None,
) -> EdgeTPUVerdict:
    """Lint ``content``, compile it where a compiler is found, and compare the two.

    Args:
        content: A full-integer ``.tflite``.
        compiler: The compiler to run; None looks for ``edgetpu_compiler`` on PATH and, when
            there is none, says so in the verdict instead of failing.
        timeout_s: Seconds before the compiler is stopped (default
            ``TFCOMPRESS_COMPILER_TIMEOUT``, else 180).

    Returns:
        The verdict; ``compiler`` is None when no compiler was found.

    Raises:
        BackendUnavailableError: ``compiler`` was given and is not an executable.
        EdgeTPUCompilerError: The compiler failed, refused the model or ran past ``timeout_s``.

    Example:
        >>> print(edgetpu_verdict(result.model_content))  # doctest: +SKIP
    """
    from tfcompress.targets.edgetpu.linter import check

    report = check(content)
    executable = find_compiler(compiler)
    if executable is None:
        return EdgeTPUVerdict(report, None, NOT_INSTALLED)
    run = compile_for_edgetpu(content, compiler=executable, timeout_s=timeout_s)
    return EdgeTPUVerdict(report, run, "compiled", _disagreements(report, run))


def _disagreements(report: EdgeTPUReport, run: CompilerRun) -> tuple[str, ...]:
    log = run.log
    found: list[str] = []
    if log.ops_mapped is not None and (log.ops_mapped, log.ops_total) != (
        report.ops_mapped,
        report.ops_total,
    ):
        found.append(
            f"ops mapped: linter {report.ops_mapped} of {report.ops_total}, compiler "
            f"{log.ops_mapped} of {_count(log.ops_total)}"
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
