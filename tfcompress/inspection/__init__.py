"""What a model holds, for people: inputs and outputs, ops, weights by dtype, for every format.

It reads models through :mod:`tfcompress.models` (the one ``.tflite`` reader, the ONNX reader,
the Keras and SavedModel loaders) and writes tables; it never changes a model.

Example:
    >>> print(tfcompress.inspect_model("model_int8.tflite"))  # doctest: +SKIP
"""

from tfcompress.inspection.api import KerasInfo, ModelInfo, SavedModelInfo, inspect_model
from tfcompress.inspection.onnx import OnnxInfo
from tfcompress.inspection.tflite import TensorInfo, TFLiteInfo

__all__ = [
    "KerasInfo",
    "ModelInfo",
    "OnnxInfo",
    "SavedModelInfo",
    "TFLiteInfo",
    "TensorInfo",
    "inspect_model",
]
