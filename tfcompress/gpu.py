"""LiteRT's GPU: ``tfcompress.gpu.check(model)`` says whether a ``.tflite`` runs whole on it.

Offline, from LiteRT's own rules (ML Drift's op list, tensor types, op-version caps and
per-op checks, read from google-ai-edge/LiteRT at a recorded commit): whole, falls back (the
ops left to the CPU) or refused (a tensor sized at run time), each cause named by its Keras
layer with a change that works, and float16 overflow risks. Where LiteRT finds a GPU, the
file is also compiled there (LiteRT's verdict) and run against the CPU (the largest absolute
difference of each output). See docs/gpu.md.

Example:
    >>> import tfcompress.gpu
    >>> report = tfcompress.gpu.check("model_float16.tflite")  # doctest: +SKIP
    >>> report.support.verdict, report.support.fix()  # doctest: +SKIP
    ('whole', None)
"""

from __future__ import annotations

from tfcompress.targets.gpu.check import GpuReport, Numerics, check

__all__ = ["GpuReport", "Numerics", "check"]
