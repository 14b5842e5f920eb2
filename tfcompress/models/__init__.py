"""Model I/O: recognise, load and (atomically) save every format tfcompress accepts."""

from tfcompress._files import check_output_path, write_bytes_atomic, write_text_atomic
from tfcompress.models.formats import ModelFormat, sniff_format
from tfcompress.models.loading import (
    SavedModelDir,
    TFLiteModel,
    load_model,
    model_name,
    resolve_model,
)
from tfcompress.models.onnx import OnnxModel
from tfcompress.models.signature import (
    ModelSignature,
    TensorSpec,
    format_shape,
    input_spec,
    model_signature,
)

__all__ = [
    "ModelSignature",
    "ModelFormat",
    "OnnxModel",
    "SavedModelDir",
    "TFLiteModel",
    "TensorSpec",
    "check_output_path",
    "format_shape",
    "input_spec",
    "load_model",
    "model_name",
    "model_signature",
    "resolve_model",
    "sniff_format",
    "write_bytes_atomic",
    "write_text_atomic",
]
