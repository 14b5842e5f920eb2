"""Microcontrollers: ``tfcompress.mcu.check(model)`` asks TensorFlow Lite for Microcontrollers.

Every op TFLM cannot run (by name and index, with what to do), the smallest tensor arena that
allocates (a host estimate, with TFLM's breakdown and a 10% margin), the flash the model
takes as a C array, and TFLM's outputs against LiteRT's reference kernels; every TFLM call
in a child process. :func:`export_c` writes the C array. See docs/mcu.md. Needs
``tflite-micro``: ``pip install 'tfcompress[mcu]'``.

Example:
    >>> import tfcompress.mcu
    >>> report = tfcompress.mcu.check("model_int8.tflite")  # doctest: +SKIP
    >>> report.compatible, report.arena.recommended, report.flash_bytes  # doctest: +SKIP
    (True, 34912, 236227)
"""

from __future__ import annotations

from tfcompress.targets.mcu import CArray, Finding, McuReport, check, export_c

__all__ = ["CArray", "Finding", "McuReport", "check", "export_c"]
