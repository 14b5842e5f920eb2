"""The Edge TPU as a deployment target: what edgetpu_compiler 16 maps, checked statically.

:func:`check` lints a ``.tflite`` with no Edge TPU software installed: Coral's model
requirements and op table (:mod:`.ops`, as data with its sources), the op versions the last
compiler refuses (:mod:`.versions`, with the evidence), and the predicted split between the
Edge TPU and the CPU. Where Coral's compiler is installed, :func:`compile_for_edgetpu` runs
it and :func:`parse_compiler_log` reads its verdict.

Example:
    >>> from tfcompress.targets.edgetpu import check
    >>> print(check("model_int8.tflite"))  # doctest: +SKIP
"""

from __future__ import annotations

from tfcompress.targets.edgetpu.compiler import (
    CompilerRun,
    EdgeTPUCompilerError,
    compile_for_edgetpu,
    find_compiler,
)
from tfcompress.targets.edgetpu.compiler_log import CompilerLog, OperatorStatus, parse_compiler_log
from tfcompress.targets.edgetpu.findings import Effect, Finding
from tfcompress.targets.edgetpu.linter import check
from tfcompress.targets.edgetpu.report import EdgeTPUReport, OpPrediction

__all__ = [
    "CompilerLog",
    "CompilerRun",
    "EdgeTPUCompilerError",
    "EdgeTPUReport",
    "Effect",
    "Finding",
    "OpPrediction",
    "OperatorStatus",
    "check",
    "compile_for_edgetpu",
    "find_compiler",
    "parse_compiler_log",
]
