"""Microcontrollers as a deployment target: TensorFlow Lite for Microcontrollers (TFLM).

:func:`check` answers on the host what TinyML engineers otherwise learn on the board: a
kernel for every op, the tensor arena to declare, the flash the model takes, and whether TFLM
computes what LiteRT's reference kernels compute; :func:`export_c` writes the C array firmware
compiles in; the registered ``mcu`` target (:mod:`.target`) makes ``quantize`` and
``compress`` produce full int8 judged by :func:`check` (docs/mcu.md). Every TFLM call runs in
a child process (:mod:`.probe`). Needs ``tflite-micro``: ``pip install 'tfcompress[mcu]'``.

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
