"""Microcontrollers as a deployment target: TensorFlow Lite for Microcontrollers (TFLM).

:func:`check` answers, on the host, what TinyML engineers otherwise learn on the board: does
TFLM have a kernel for every op, how big a tensor arena must the firmware declare (the
smallest that allocates, bisected, with TFLM's own breakdown and a stated margin), how much
flash the model takes as a C array, and does TFLM compute what LiteRT's reference kernels
compute. :func:`export_c` writes the model as the C array firmware compiles in. The
registered ``mcu`` target (:mod:`.target`) makes ``quantize`` and ``compress`` produce full
int8 with int8 input and output and judge every artifact with :func:`check`.

Every TFLM call runs in a child process (:mod:`.probe`): a crash or a hang is a finding with
its signal, never the caller's death. Needs ``tflite-micro``: ``pip install 'tfcompress[mcu]'``.

Example:
    >>> from tfcompress.targets.mcu import check
    >>> print(check("mnist_int8.tflite"))  # doctest: +SKIP
"""

from __future__ import annotations

# Eager on purpose: ``check`` and ``export_c`` are also the names of submodules, and the
# functions must win. None of these modules imports numpy or TFLM at module level.
from tfcompress.targets.mcu.check import check
from tfcompress.targets.mcu.export_c import CArray, export_c
from tfcompress.targets.mcu.findings import Finding
from tfcompress.targets.mcu.report import McuReport

__all__ = ["CArray", "Finding", "McuReport", "check", "export_c"]
