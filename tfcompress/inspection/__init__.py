"""What a model holds, for people: inputs and outputs, ops, weights by dtype, for every format.

It reads models through :mod:`tfcompress.models` (the one ``.tflite`` reader, the ONNX reader,
the Keras and SavedModel loaders) and writes tables; it never changes a model.

Example:
    >>> print(tfcompress.inspect_model("model_int8.tflite"))  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfcompress._lazy import lazy_exports

# public name -> the module that defines it, imported on first use (PEP 562).
_LAZY = {
    "KerasInfo": "tfcompress.inspection.api",
    "ModelInfo": "tfcompress.inspection.api",
    "SavedModelInfo": "tfcompress.inspection.api",
    "inspect_model": "tfcompress.inspection.api",
    "OnnxInfo": "tfcompress.inspection.onnx",
    "TensorInfo": "tfcompress.inspection.tflite",
    "TFLiteInfo": "tfcompress.inspection.tflite",
}
__all__ = [
    "KerasInfo",
    "ModelInfo",
    "OnnxInfo",
    "SavedModelInfo",
    "TFLiteInfo",
    "TensorInfo",
    "inspect_model",
]
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

if TYPE_CHECKING:
    from tfcompress.inspection.api import KerasInfo, ModelInfo, SavedModelInfo, inspect_model
    from tfcompress.inspection.onnx import OnnxInfo
    from tfcompress.inspection.tflite import TensorInfo, TFLiteInfo
