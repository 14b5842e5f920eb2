"""ONNX as a deployment target: verified export (tf2onnx) and ONNX Runtime quantization.

* :mod:`.export`: :func:`export_onnx`, Keras -> ONNX with the Keras tensor names, refused
  when tf2onnx leaves ops it cannot convert;
* :mod:`.verify`: the check every export passes (max abs difference to Keras per output);
* :mod:`.ort_quantize`: ONNX Runtime's static int8 (QDQ, streamed calibration), dynamic
  int8 and float16, on in-memory models.

``tfcompress.quantize(model, format="onnx", ...)``
(:mod:`tfcompress.quantization.onnx_ptq`) drives them.
"""

from tfcompress.targets.onnx.export import DEFAULT_OPSET, OPSETS, OnnxExport, export_onnx
from tfcompress.targets.onnx.ort_quantize import (
    CALIBRATION_BATCH,
    CALIBRATION_CHUNK,
    CALIBRATION_METHODS,
    quantize_onnx_static,
)
from tfcompress.targets.onnx.verify import DEFAULT_ATOL, OnnxVerification

__all__ = [
    "CALIBRATION_BATCH",
    "CALIBRATION_CHUNK",
    "CALIBRATION_METHODS",
    "DEFAULT_ATOL",
    "DEFAULT_OPSET",
    "OPSETS",
    "OnnxExport",
    "OnnxVerification",
    "export_onnx",
    "quantize_onnx_static",
]
