"""``tflm``: TensorFlow Lite for Microcontrollers' interpreter, run on this host.

For accuracy through TFLM on the user's data (``tfcompress benchmark --backends tflm``, a gate
on ``tflm``): the same integers a board computes with TFLM's reference kernels. Its latency
is host time of reference kernels, one sample per invoke: not a device figure (every row's
``backend_details`` says so). The harness runs ``.tflite`` runners in a worker process, so a
TFLM crash there is an error row, never the caller's death.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from tfcompress.errors import (
    BackendUnavailableError,
    MissingDependencyError,
    SettingUnavailableError,
    UnsupportedModelError,
)
from tfcompress.models.loading import TFLiteModel
from tfcompress.models.signature import ModelSignature, model_signature
from tfcompress.runtime.base import Feed, Outputs, Runner, copying_calls, register_backend
from tfcompress.runtime.litert import dequantize, quantize

#: What every row of this backend says about its latency.
NOT_A_DEVICE_FIGURE = "host time of TFLM's reference kernels, not a device latency"
_FIRST_ARENA = 64 * 1024
_MAX_ARENA = 256 * 2**20


@register_backend("tflm")
class TFLMRunner(Runner):
    """Runs a ``.tflite`` with TFLite Micro's host interpreter (reference kernels, 1 thread).

    Inputs are quantized with each input's scale and zero point and outputs dequantized, so
    it takes float data like every backend. TFLM plans fixed shapes: each call runs the
    model's own batch (1 for a converted Keras model). ``threads`` must be 1 (TFLM has no
    threads); ``arena_size`` is the tensor arena in bytes (default: ten times the model, at
    least 64 KiB, grown while TFLM cannot allocate).
    """

    runtime_name = "TFLite Micro"
    formats = (TFLiteModel,)
    pads_last_batch = True

    def __init__(
        self, model: TFLiteModel, *, threads: int = 1, arena_size: int | None = None
    ) -> None:
        if not isinstance(model, TFLiteModel):
            raise UnsupportedModelError(
                "the 'tflm' backend runs .tflite models; convert with `tfcompress quantize "
                "--target mcu` first."
            )
        if threads != 1:
            raise SettingUnavailableError(
                f"the 'tflm' backend runs on one thread (TFLite Micro has no threads); got "
                f"threads={threads}: use 1."
            )
        from tfcompress._compat.tflm import tflm_runtime

        try:
            runtime = tflm_runtime()
        except MissingDependencyError as missing:
            raise BackendUnavailableError(str(missing)) from missing
        self.model, self.threads = model, threads
        self.signature = model_signature(model)
        self.arena_size, self.interpreter = _allocate(runtime, model, arena_size)
        count_in, count_out = len(self.signature.inputs), len(self.signature.outputs)
        self._inputs = [self.interpreter.get_input_details(i) for i in range(count_in)]
        self._outputs = [self.interpreter.get_output_details(i) for i in range(count_out)]

    def layout_signature(self) -> ModelSignature:
        """The signature at TFLM's fixed shapes (the batch it was converted with)."""

        def fixed(specs: Any, details: list[dict[str, Any]]) -> tuple[Any, ...]:
            return tuple(
                replace(s, shape=tuple(int(n) for n in d["shape"]))
                for s, d in zip(specs, details, strict=True)
            )

        return ModelSignature(
            fixed(self.signature.inputs, self._inputs), fixed(self.signature.outputs, self._outputs)
        )

    def predict_batch(self, feed: Feed) -> Outputs:
        """Run one call (the model's fixed batch) and return dequantized float outputs."""
        self._set_inputs(feed)
        self.interpreter.invoke()
        return {
            name: dequantize(np.asarray(self.interpreter.get_output(i)), _scaled(detail))
            for i, (name, detail) in enumerate(
                zip(self.signature.output_names, self._outputs, strict=True)
            )
        }

    def bind_call(self, feed: Feed) -> Callable[[], object]:
        """Convert the inputs once; each timed call copies them in and invokes."""
        return self.bind_calls([feed])

    def bind_calls(self, feeds: list[Feed]) -> Callable[[], object]:
        """Convert every call's inputs once; each timed call copies them in and invokes.

        TFLM's interpreter holds one set of input tensors (see :func:`copying_calls`).
        """
        prepared = [list(enumerate(self._converted(feed))) for feed in feeds]
        set_input = self.interpreter.set_input
        return copying_calls(
            prepared, lambda i, value: set_input(value, i), self.interpreter.invoke
        )

    def details(self) -> dict[str, object]:
        """The arena, the kernels, and what the latency is (not a device figure)."""
        return {
            "threads": 1,
            "arena_bytes": self.arena_size,
            "kernels": "TFLM reference (host)",
            "latency_is": NOT_A_DEVICE_FIGURE,
        }

    def _set_inputs(self, feed: Feed) -> None:
        for i, value in enumerate(self._converted(feed)):
            self.interpreter.set_input(value, i)

    def _converted(self, feed: Feed) -> list[np.ndarray]:
        """Each input in the model's type and shape, in input order."""
        return [
            quantize(np.asarray(feed[name]), _scaled(detail)).reshape(tuple(detail["shape"]))
            for name, detail in zip(self.signature.input_names, self._inputs, strict=True)
        ]

    def close(self) -> None:
        """Drop the interpreter (and its arena)."""
        self.interpreter = None


def _allocate(runtime: Any, model: TFLiteModel, arena_size: int | None) -> tuple[int, Any]:
    """``(arena size, interpreter)``: the size given, or one that allocates."""
    size = arena_size or max(_FIRST_ARENA, 10 * model.size_bytes)
    while True:
        try:
            return size, runtime.Interpreter.from_bytes(model.content, arena_size=int(size))
        except RuntimeError as error:
            if arena_size is not None or size >= _MAX_ARENA:
                raise UnsupportedModelError(
                    f"{model.name}: TFLite Micro cannot load the model in an arena of "
                    f"{size:,} B ({' '.join(str(error).split())[:200]}); `tfcompress mcu "
                    f"{model.path or 'MODEL.tflite'}` names the ops it lacks and the arena it "
                    "needs."
                ) from error
            size *= 4


def _scaled(detail: dict[str, Any]) -> dict[str, Any]:
    """A TFLM tensor's details as LiteRT gives them: its first (scale, zero point), or (0, 0)."""
    scales, zeros = (detail["quantization_parameters"][k] for k in ("scales", "zero_points"))
    first = (float(scales[0]), int(zeros[0])) if len(scales) else (0.0, 0)
    return {"dtype": detail["dtype"], "quantization": first}
