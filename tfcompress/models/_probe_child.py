"""Probe child: let a native runtime load and run an untrusted model, in its own process.

Run by :mod:`tfcompress.models.probe` as ``python -P _probe_child.py KIND`` with the model's
bytes on stdin (``KIND`` is ``tflite`` or ``onnx``), or as ``... KIND --inputs`` with an
8-byte little-endian length, the model's bytes, then an ``.npz`` of the inputs to run it on
(keyed ``t<index>`` by tensor index for a ``.tflite``, by input name for an ``.onnx``). It
loads the model, prepares it (allocates its tensors) and runs it once, on zeros or on the
inputs given, then writes one JSON verdict line to the stdout it was started with::

    {"ok": true}
    {"ok": false, "stage": "load" | "prepare" | "run", "reason": "ValueError: ..."}

A crash of the runtime kills only this process; the parent reads the signal from the exit
status. The file is run as a script (not ``-m``) so that importing it never imports the
tfcompress package: the child needs only numpy and the runtime, never TensorFlow.

Example:
    >>> # python -P tfcompress/models/_probe_child.py tflite < model.tflite  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any

# onnxruntime type strings -> numpy dtype names, for the zeros fed to an ONNX model.
_ORT_DTYPES = {
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


def _interpreter_class() -> Any:
    """LiteRT's Interpreter, falling back like tfcompress._compat.litert does."""
    import importlib

    for name in ("ai_edge_litert.interpreter", "tflite_runtime.interpreter"):
        try:
            return importlib.import_module(name).Interpreter
        except ImportError:
            continue
    import tensorflow as tf  # the last resort, as in the parent

    return tf.lite.Interpreter


def probe_tflite(content: bytes, inputs: dict[str, Any] | None = None) -> None:
    """Create the interpreter (XNNPACK on, as the cpu backend runs), allocate, invoke once.

    Without ``inputs``, dynamic dimensions are set to 1 and zeros are fed at that shape;
    with them, each input (``t<index>``) is resized to its array and set to it.
    """
    import numpy as np

    try:
        interpreter = _interpreter_class()(model_content=content, num_threads=1)
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
            if item.type not in _ORT_DTYPES:
                return  # a sequence or map input: loading it was the test
            shape = [d if isinstance(d, int) and d > 0 else 1 for d in item.shape]
            feeds[item.name] = np.zeros(shape, _ORT_DTYPES[item.type])
        session.run(None, feeds)
    except Exception as error:  # idem: reported to the parent, which decides
        raise _StageError("run", error) from error


def _read_request(stream: Any, with_inputs: bool) -> tuple[bytes, dict[str, Any] | None]:
    """The model's bytes, and the inputs to run it on (None: zeros)."""
    if not with_inputs:
        return stream.read(), None
    import io

    import numpy as np

    length = int.from_bytes(stream.read(8), "little")
    content = stream.read(length)
    with np.load(io.BytesIO(stream.read()), allow_pickle=False) as archive:
        return content, {name: archive[name] for name in archive.files}


def _prepare_child(parent: int) -> None:
    """Leave no core file, and die with ``parent`` (Linux).

    A copy of ``no_core_files`` and ``die_with_parent`` of :mod:`tfcompress._lifetime`: this
    script never imports the tfcompress package (see the module's docstring), so it cannot
    import that module.
    """
    if sys.platform == "win32":  # Windows has no core files (nor the resource module)
        return
    import resource

    # A crash must not leave a core file of an untrusted model in the user's folder.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # What it may allocate (tfcompress._limits.CHILD_MEMORY, computed by the parent): a FILL
    # sized by the real inputs ends at the limit instead of taking the machine's memory.
    memory = os.environ.get("TFCOMPRESS_PROBE_MEMORY_BYTES", "")
    if memory.isdigit():
        kind = getattr(resource, "RLIMIT_DATA", resource.RLIMIT_AS)
        with contextlib.suppress(ValueError, OSError):  # a hard limit below ours: keep it
            resource.setrlimit(kind, (int(memory), int(memory)))
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:  # prctl(PR_SET_PDEATHSIG, SIGKILL): the kernel kills us when the parent dies
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # no prctl in this libc: the parent's clean-up only
        return
    if os.getppid() != parent:  # it died before we asked
        os._exit(1)


def main(argv: list[str]) -> int:
    """Probe the model on stdin with the runtime named by ``argv[1]``; print the verdict."""
    _prepare_child(os.getppid())
    # Native code may print to stdout: keep the real stdout for the verdict alone.
    verdict_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    probes = {"tflite": probe_tflite, "onnx": probe_onnx}
    with_inputs = argv[2:] == ["--inputs"]
    if len(argv) not in (2, 3) or argv[1] not in probes or (len(argv) == 3 and not with_inputs):
        print(f"usage: _probe_child.py {'|'.join(probes)} [--inputs] < MODEL", file=sys.stderr)
        return 2
    content, inputs = _read_request(sys.stdin.buffer, with_inputs)
    try:
        probes[argv[1]](content, inputs)
        verdict: dict[str, Any] = {"ok": True}
    except _StageError as error:
        verdict = {"ok": False, "stage": error.stage, "reason": str(error)}
    verdict_out.write(json.dumps(verdict) + "\n")
    verdict_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
