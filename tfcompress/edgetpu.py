"""Edge TPU: ``tfcompress.edgetpu.check(model)`` predicts what edgetpu_compiler 16 maps.

Works with no Edge TPU software installed: it reads the ``.tflite`` only. See
docs/edgetpu.md for the rules, how to read the report and the op-version problem.

Example:
    >>> import tfcompress.edgetpu
    >>> report = tfcompress.edgetpu.check("model_int8.tflite")  # doctest: +SKIP
    >>> report.compatible, report.to_dict()["macs_mapped_fraction"]  # doctest: +SKIP
    (True, 1.0)
"""

from __future__ import annotations

from tfcompress.targets.edgetpu import EdgeTPUReport, Effect, Finding, OpPrediction, check

__all__ = ["EdgeTPUReport", "Effect", "Finding", "OpPrediction", "check"]
