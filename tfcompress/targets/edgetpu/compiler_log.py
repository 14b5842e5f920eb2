r"""Read what ``edgetpu_compiler`` printed: its summary, its operator table, its errors.

The compiler is closed source and ships only from Coral's apt repository, so its console
output is the only record of what it did. :func:`parse_compiler_log` turns that text into a
frozen :class:`CompilerLog`. It reads the formats seen in public Coral issues: compilers 2.x
to 16.0 (the summary with the three memory lines), older or trimmed logs without them, the
``Operator Count Status`` table that ``-s`` prints, and the failures (an op version the
compiler predates, ``Internal compiler error. Aborting!``, ``Compilation failed: ...``).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

MAPPED_STATUS = "Mapped to Edge TPU"
"""The status text of an operator row the compiler put on the Edge TPU."""

_UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(B|KiB|MiB|GiB)\s*$")

_VERSION = re.compile(r"^Edge TPU Compiler version (\S+)")
_SUCCESS = re.compile(r"^Model compiled successfully in (\d+) ms")
_FIELDS: dict[str, re.Pattern[str]] = {
    "input_model": re.compile(r"^Input model: (.+?)\s*$"),
    "output_model": re.compile(r"^Output model: (.+?)\s*$"),
    "input_size": re.compile(r"^Input size: (.+?)\s*$"),
    "output_size": re.compile(r"^Output size: (.+?)\s*$"),
    "on_chip": re.compile(r"^On-chip memory used for caching model parameters: (.+?)\s*$"),
    "on_chip_left": re.compile(
        r"^On-chip memory remaining for caching model parameters: (.+?)\s*$"
    ),
    "off_chip": re.compile(
        r"^Off-chip memory used for streaming uncached model parameters: (.+?)\s*$"
    ),
    "subgraphs": re.compile(r"^Number of Edge TPU subgraphs: (\d+)"),
    "ops_total": re.compile(r"^Total number of operations: (\d+)"),
    "ops_on_tpu": re.compile(r"^Number of operations that will run on Edge TPU: (\d+)"),
    "ops_on_cpu": re.compile(r"^Number of operations that will run on CPU: (\d+)"),
    "operation_log": re.compile(r"^Operation log: (.+?)\s*$"),
}
_NOT_ALL = "not all operations are supported by"
_TABLE_HEADER = re.compile(r"^Operator\s+Count\s+Status\s*$")
_ROW = re.compile(r"^(\S+)\s+(\d+)\s{2,}(\S.*?)\s*$")
_OP_VERSION = re.compile(r"Didn't find op for builtin opcode '([A-Z0-9_]+)' version '(\d+)'")
_INTERNAL = "Internal compiler error. Aborting!"
# ERROR lines that follow the real cause rather than state it.
_ECHO_ERRORS = ("Registration failed.", "Restored original execution plan")


@dataclass(frozen=True)
class OperatorStatus:
    """One row of the compiler's ``Operator Count Status`` table.

    Attributes:
        operator: The op as the compiler names it (``CONV_2D``, ``CUSTOM``...).
        status: The compiler's own words (``Mapped to Edge TPU``, ``More than one subgraph
            is not supported``, ``Operation is working on an unsupported data type``...).
    """

    operator: str
    count: int
    status: str

    @property
    def mapped(self) -> bool:
        """True when these ops run on the Edge TPU."""
        return self.status == MAPPED_STATUS


@dataclass(frozen=True)
class CompilerLog:
    """What one ``edgetpu_compiler`` run reported, field by field.

    A field the log does not print is None (older compilers print no memory lines; a run
    without ``-s`` prints no operator table; a failed run prints no summary).

    The summary lines become the fields of the same names (paths as printed, sizes in bytes:
    the log rounds them to 2 decimals of KiB/MiB; ``subgraphs`` 0: nothing on the TPU).

    Attributes:
        succeeded: The log says ``Model compiled successfully`` and states no error.
        error: The compiler's own line naming the failure (the first ``ERROR:`` cause,
            ``Compilation failed: ...``, ``Internal compiler error. Aborting!``, ``Invalid
            model: ...``), or None.
        unsupported_op_version: ``("CONV_2D", 6)`` when the compiler refused an op version
            it predates ("Didn't find op for builtin opcode ..."), else None.
        ops_on_tpu_stated: ``Number of operations that will run on Edge TPU``, as printed
            (the compiler prints it only when some op stays on the CPU).
        operators: The ``Operator Count Status`` rows, in the compiler's order.
    """

    text: str
    compiler_version: str | None
    succeeded: bool
    error: str | None
    unsupported_op_version: tuple[str, int] | None
    compile_ms: int | None
    input_model: str | None
    output_model: str | None
    input_size_bytes: int | None
    output_size_bytes: int | None
    on_chip_memory_bytes: int | None
    on_chip_remaining_bytes: int | None
    off_chip_memory_bytes: int | None
    subgraphs: int | None
    ops_total: int | None
    ops_on_tpu_stated: int | None
    ops_on_cpu_stated: int | None
    operators: tuple[OperatorStatus, ...]

    @property
    def ops_mapped(self) -> int | None:
        """Ops that run on the Edge TPU.

        The stated count when printed; else 0 for zero Edge TPU subgraphs; else, for a
        successful run that does not say "not all operations are supported", every op (the
        compiler stays silent when all map); else the sum of the table's mapped rows.
        """
        if self.ops_on_tpu_stated is not None:
            return self.ops_on_tpu_stated
        if not self.succeeded:
            return None
        if self.subgraphs == 0:
            return 0
        if _NOT_ALL not in self.text and self.ops_total is not None:
            return self.ops_total
        if self.operators:
            return sum(row.count for row in self.operators if row.mapped)
        return None

    @property
    def ops_on_cpu(self) -> int | None:
        """Ops left on the CPU (stated, else total minus mapped)."""
        if self.ops_on_cpu_stated is not None:
            return self.ops_on_cpu_stated
        mapped = self.ops_mapped
        if mapped is None or self.ops_total is None:
            return None
        return self.ops_total - mapped

    @property
    def fully_mapped(self) -> bool:
        """True when the run succeeded and every op runs on the Edge TPU."""
        return self.succeeded and self.ops_total is not None and self.ops_mapped == self.ops_total

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every parsed field but the raw text and the stated counts.

        ``ops_mapped`` and ``ops_on_cpu`` are the derived counts; ``operators`` a list of
        ``{operator, count, status}``.
        """
        stated = ("text", "ops_on_tpu_stated", "ops_on_cpu_stated")
        data = {key: value for key, value in asdict(self).items() if key not in stated}
        op_version = self.unsupported_op_version
        if op_version is not None:
            data["unsupported_op_version"] = {"op": op_version[0], "version": op_version[1]}
        counts = {"ops_mapped": self.ops_mapped, "ops_on_cpu": self.ops_on_cpu}
        return {**data, **counts, "operators": list(data["operators"])}

    def __str__(self) -> str:
        version = self.compiler_version or "unknown version"
        if not self.succeeded:
            return f"edgetpu_compiler {version}: failed: {self.error or 'no summary in the log'}"
        lines = [
            f"edgetpu_compiler {version}: {self.ops_mapped} of {self.ops_total} ops on the "
            f"Edge TPU, {self.subgraphs} Edge TPU subgraph(s)"
        ]
        if self.on_chip_memory_bytes is not None:
            lines.append(
                f"parameters: {self.on_chip_memory_bytes} B on-chip, "
                f"{self.off_chip_memory_bytes} B off-chip"
            )
        lines.extend(f"  {r.operator:<24} {r.count:>5}  {r.status}" for r in self.operators)
        return "\n".join(lines)


def parse_size(text: str) -> int | None:
    """Bytes of a size as the compiler prints it (``6.00MiB``, ``41.75KiB``, ``0.00B``)."""
    match = _SIZE.match(text)
    return None if match is None else round(float(match.group(1)) * _UNITS[match.group(2)])


def parse_compiler_log(text: str) -> CompilerLog:
    """Parse the console output of one ``edgetpu_compiler`` run.

    When a log holds several summaries (``-d`` tries several segments), the last value of
    each summary line wins and the operator table is the last one printed. ``text``: stdout
    and stderr of the compiler, together, as printed; fields the log does not print are None.

    Example:
        >>> log = parse_compiler_log(open("model_edgetpu.txt").read())  # doctest: +SKIP
        >>> log.ops_mapped, log.ops_total  # doctest: +SKIP
        (83, 93)
    """
    lines = text.splitlines()
    found: dict[str, str] = {}
    version: str | None = None
    compile_ms: int | None = None
    operators: list[OperatorStatus] = []
    in_table = False
    for raw in lines:
        line = raw.strip()
        if in_table:
            row = _ROW.match(line)
            if row is not None:
                operators.append(OperatorStatus(row.group(1), int(row.group(2)), row.group(3)))
                continue
            if line and not set(line) <= {"-", "="}:
                in_table = False
        if _TABLE_HEADER.match(line):
            in_table = True
            operators = []
            continue
        if (match := _VERSION.match(line)) is not None:
            version = match.group(1)
        elif (match := _SUCCESS.match(line)) is not None:
            compile_ms = int(match.group(1))
        for key, pattern in _FIELDS.items():
            if (match := pattern.match(line)) is not None:
                found[key] = match.group(1)
    error = _error_line(lines)
    op_version = _OP_VERSION.search(text)
    return CompilerLog(
        text=text,
        compiler_version=version,
        succeeded=compile_ms is not None and error is None,
        error=error,
        unsupported_op_version=(
            None if op_version is None else (op_version.group(1), int(op_version.group(2)))
        ),
        compile_ms=compile_ms,
        input_model=found.get("input_model"),
        output_model=found.get("output_model"),
        input_size_bytes=_size(found, "input_size"),
        output_size_bytes=_size(found, "output_size"),
        on_chip_memory_bytes=_size(found, "on_chip"),
        on_chip_remaining_bytes=_size(found, "on_chip_left"),
        off_chip_memory_bytes=_size(found, "off_chip"),
        subgraphs=_int(found, "subgraphs"),
        ops_total=_int(found, "ops_total"),
        ops_on_tpu_stated=_int(found, "ops_on_tpu"),
        ops_on_cpu_stated=_int(found, "ops_on_cpu"),
        operators=tuple(operators),
    )


def _size(found: dict[str, str], key: str) -> int | None:
    return parse_size(found[key]) if key in found else None


def _int(found: dict[str, str], key: str) -> int | None:
    return int(found[key]) if key in found else None


# The lines that state why a run failed, most telling first.
_FAILURE_LINES = (
    lambda line: line.startswith("ERROR:") and not any(echo in line for echo in _ECHO_ERRORS),
    lambda line: line.startswith("Compilation failed:"),
    lambda line: line.startswith((_INTERNAL, "Compilation failed!")),
    lambda line: line.startswith("Invalid model:") or line == "Model could not be parsed",
)


def _error_line(lines: list[str]) -> str | None:
    """The compiler's own words for why the run failed, or None when it did not say."""
    stripped = [line.strip() for line in lines]
    return next((line for rule in _FAILURE_LINES for line in stripped if rule(line)), None)
