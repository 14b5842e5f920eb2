"""What a model holds, for people: inputs and outputs, ops, weights by dtype, for every format.

It reads models through :mod:`tfcompress.models` (the one ``.tflite`` reader, the ONNX reader,
the Keras and SavedModel loaders) and writes tables; it never changes a model
(:func:`inspect_model`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfcompress._lazy import lazy_exports

__all__ = [
    "KerasInfo",
    "ModelInfo",
    "OnnxInfo",
    "SavedModelInfo",
    "TFLiteInfo",
    "TensorInfo",
    "inspect_model",
]
__getattr__, __dir__ = lazy_exports(__name__)

if TYPE_CHECKING:
    from tfcompress.inspection.api import KerasInfo, ModelInfo, SavedModelInfo, inspect_model
    from tfcompress.inspection.onnx import OnnxInfo
    from tfcompress.inspection.tflite import TensorInfo, TFLiteInfo
