"""What a load probe runs in its worker: load a model, prepare it, run it once.

Called by :mod:`tfcompress.models.probe` in a :class:`~tfcompress._child.Worker` as
``probe(kind, content, inputs)``. It loads the model with its native runtime, prepares it
(allocates its tensors) and runs it once, on zeros or on the inputs given (keyed
``t<index>`` by tensor index for a ``.tflite``, by input name for an ``.onnx``), and returns
the verdict::

    {"ok": True}
    {"ok": False, "stage": "load" | "prepare" | "run", "reason": "ValueError: ..."}

A crash of the runtime kills only the worker; the parent reads the signal. This module
imports only NumPy and the runtime (never TensorFlow, nor the rest of tfcompress): a fresh
worker that probes starts in about the time Python, NumPy and the runtime take to import.

Example:
    >>> probe("tflite", Path("model.tflite").read_bytes())  # doctest: +SKIP
    {'ok': True}
"""

from __future__ import annotations

from typing import Any

# onnxruntime type strings -> numpy dtype names: the zeros fed to an ONNX model here, and
# every ONNX input's dtype (tfcompress.models.onnx.ort_dtype).
ORT_DTYPES = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(int8)": "int8",
    "tensor(uint8)": "uint8",
    "tensor(int16)": "int16",
    "tensor(int32)": "int32",
    "tensor(int64)": "int64",
    "tensor(bool)": "bool",
}


class _StageError(Exception):
    """A runtime error, with the stage (``load`` or ``run``) it happened in."""

    def __init__(self, stage: str, error: BaseException) -> None:
        super().__init__(f"{type(error).__name__}: {' '.join(str(error).split())[:300]}")
        self.stage = stage


def probe_tflite(content: bytes, inputs: dict[str, Any] | None = None) -> None:
    """Create the interpreter (XNNPACK on, as the cpu backend runs), allocate, invoke once.

    Without ``inputs``, dynamic dimensions are set to 1 and zeros are fed at that shape;
    with them, each input (``t<index>``) is resized to its array and set to it.
    """
    import numpy as np

    from tfcompress._compat.litert import make_interpreter

    try:
        interpreter = make_interpreter(content, num_threads=1, use_xnnpack=True)
    except Exception as error:  # the runtime's own refusal is the verdict, whatever its type
        raise _StageError("load", error) from error
    try:
        interpreter.allocate_tensors()  # with the file's own shapes, as the cpu backend does
        resized = False
        for detail in interpreter.get_input_details():
            signature = detail.get("shape_signature", detail["shape"])
            given = None if inputs is None else inputs.get(f"t{detail['index']}")
            if given is not None and tuple(given.shape) != tuple(detail["shape"]):
                interpreter.resize_tensor_input(detail["index"], list(given.shape), strict=False)
                resized = True
            elif given is None and any(int(d) < 0 for d in signature):
                shape = [max(int(d), 1) for d in signature]
                interpreter.resize_tensor_input(detail["index"], shape, strict=False)
                resized = True
        if resized:
            interpreter.allocate_tensors()
    except Exception as error:  # idem: reported to the parent, which decides
        raise _StageError("prepare", error) from error
    try:
        for detail in interpreter.get_input_details():
            dtype = np.dtype(detail["dtype"])
            given = None if inputs is None else inputs.get(f"t{detail['index']}")
            if given is not None:
                interpreter.set_tensor(detail["index"], given.astype(dtype, copy=False))
            elif dtype.kind in "biuf":  # strings and resources have no zeros to feed
                interpreter.set_tensor(detail["index"], np.zeros(detail["shape"], dtype))
        interpreter.invoke()
    except Exception as error:  # idem
        # LiteRT prepares some nodes (custom ops) lazily, inside the first invoke.
        lazy = "failed to prepare" in str(error) or "unresolved custom op" in str(error)
        raise _StageError("prepare" if lazy else "run", error) from error


def probe_onnx(content: bytes, inputs: dict[str, Any] | None = None) -> None:
    """Create an ONNX Runtime CPU session, then run it once on zeros or on ``inputs``."""
    import numpy as np
    import onnxruntime as ort

    try:
        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        options.log_severity_level = 3
        session = ort.InferenceSession(
            content, sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as error:  # the runtime's own refusal is the verdict, whatever its type
        raise _StageError("load", error) from error
    try:
        feeds = {}
        for item in session.get_inputs():
            if inputs is not None and item.name in inputs:
                feeds[item.name] = inputs[item.name]
                continue
            if item.type not in ORT_DTYPES:
                return  # a sequence or map input: loading it was the test
            shape = [d if isinstance(d, int) and d > 0 else 1 for d in item.shape]
            feeds[item.name] = np.zeros(shape, ORT_DTYPES[item.type])
        session.run(None, feeds)
    except Exception as error:  # idem: reported to the parent, which decides
        raise _StageError("run", error) from error


def probe(kind: str, content: bytes, inputs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Load, prepare and run ``content`` once with the runtime of ``kind``; the verdict.

    Args:
        kind: ``"tflite"`` or ``"onnx"``.
        content: The model's bytes.
        inputs: The arrays to run it on (None: zeros, dynamic dimensions set to 1).
    """
    probes = {"tflite": probe_tflite, "onnx": probe_onnx}
    try:
        probes[kind](content, inputs)
    except _StageError as error:
        return {"ok": False, "stage": error.stage, "reason": str(error)}
    return {"ok": True}
