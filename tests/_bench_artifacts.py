"""Artifacts shared by the benchmark/runtime/report tests: built once per test process."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path


@functools.cache
def build(trained_cnn, int8_result, mnist_split) -> dict[str, Path]:
    """float32/int8 .tflite, float32/int8 .onnx, .keras, a corrupt file and an unpreparable one.

    Keyed on the session fixtures' objects, so every test module gets the same files.
    """
    from ai_edge_litert import schema_py_generated as schema

    from tfcompress._compat.litert import flatbuffer_utils
    from tfcompress.targets.onnx import export_onnx, quantize_onnx_static

    root = Path(tempfile.mkdtemp(prefix="tfcompress-bench-"))
    files = {
        "float32": root / "cnn_float32.tflite",
        "int8": root / "cnn_int8.tflite",
        "onnx": root / "cnn_float32.onnx",
        "onnx_int8": root / "cnn_int8.onnx",
        "keras": root / "cnn.keras",
        "corrupt": root / "corrupt.tflite",
        "unresolved": root / "unresolved_op.tflite",
    }
    files["float32"].write_bytes(int8_result.reference_content)
    files["int8"].write_bytes(int8_result.model_content)
    trained_cnn.save(files["keras"])
    onnx_model = export_onnx(trained_cnn, files["onnx"])
    quantize_onnx_static(onnx_model, mnist_split.train.x[:200], files["onnx_int8"])
    files["corrupt"].write_bytes(int8_result.reference_content[:4096])  # truncated
    # A model that loads but cannot be prepared: its last op becomes an unknown custom op,
    # as an Edge TPU-compiled model is on a machine without the Edge TPU runtime.
    utils = flatbuffer_utils()
    flatbuffer = utils.read_model_from_bytearray(bytearray(int8_result.reference_content))
    last = flatbuffer.subgraphs[0].operators[-1]
    code = flatbuffer.operatorCodes[last.opcodeIndex]
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.CUSTOM
    code.customCode = "NotARealOp"
    files["unresolved"].write_bytes(bytes(utils.convert_object_to_bytearray(flatbuffer)))
    return files


def runnable_backends(path: Path, backends: tuple[str, ...]) -> list[str]:
    """The backends among ``backends`` that accept the artifact at ``path`` and run here.

    Tests count the rows they expect from this, so that a machine with a GPU or an Edge TPU
    (more rows measured) passes the same assertions as one without.
    """
    from tfcompress.errors import BackendUnavailableError
    from tfcompress.models import load_model
    from tfcompress.runtime import create_runner
    from tfcompress.runtime.base import backend_class

    model = load_model(path)
    runnable = []
    for backend in backends:
        if not backend_class(backend).accepts(model):
            continue
        try:
            runner = create_runner(model, backend=backend)
        except BackendUnavailableError:
            continue
        runner.close()
        runnable.append(backend)
    return runnable
