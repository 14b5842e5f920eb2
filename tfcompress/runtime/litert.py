"""LiteRT interpreter backend (CPU, with or without XNNPACK)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tfcompress._compat.litert import make_interpreter
from tfcompress.errors import InvalidInputError, UnsupportedModelError
from tfcompress.models.loading import TFLiteModel
from tfcompress.runtime.base import Runner, register_backend


@register_backend("cpu")
class LiteRTRunner(Runner):
    """Runs a ``.tflite`` on the CPU through the LiteRT interpreter.

    Quantized inputs and outputs are converted with their scale and zero point, so callers
    feed float data to any variant. Batches run in one invoke when the model's batch
    dimension is dynamic; otherwise in chunks of the fixed batch size.

    Args:
        model: The ``.tflite`` to run.
        threads: CPU threads for kernels and XNNPACK.
        use_xnnpack: False runs LiteRT's built-in kernels only.

    Example:
        >>> with LiteRTRunner(TFLiteModel(content), threads=1) as runner:  # doctest: +SKIP
        ...     probabilities = runner.predict(x_test)
    """

    formats = (TFLiteModel,)

    def __init__(self, model: TFLiteModel, *, threads: int = 1, use_xnnpack: bool = True) -> None:
        if threads < 1:
            raise InvalidInputError(f"threads must be at least 1, got {threads}.")
        if not isinstance(model, TFLiteModel):
            raise UnsupportedModelError(
                "the 'cpu' backend runs .tflite models; convert with tfcompress.quantize() or "
                "use backend='keras' for Keras models."
            )
        self.model = model
        self.threads = threads
        self.use_xnnpack = use_xnnpack
        try:
            self.interpreter = self._create_interpreter()
        except (RuntimeError, ValueError) as error:
            raise self._cannot_run(error) from error
        inputs, outputs = (
            self.interpreter.get_input_details(),
            self.interpreter.get_output_details(),
        )
        if len(inputs) != 1 or len(outputs) != 1:
            raise UnsupportedModelError(
                f"{model.name} has {len(inputs)} inputs and {len(outputs)} outputs; tfcompress "
                "runs single-input, single-output models."
            )
        self._input, self._output = inputs[0], outputs[0]
        signature = self._input.get("shape_signature", self._input["shape"])
        self.dynamic_batch = int(signature[0]) == -1
        self._batch = int(self._input["shape"][0])
        try:
            self.interpreter.allocate_tensors()
        except (RuntimeError, ValueError) as error:
            raise self._cannot_run(error) from error

    def _cannot_run(self, error: Exception) -> UnsupportedModelError:
        """A typed error for a model this interpreter cannot prepare or run.

        Bad parameters, a kernel without the types it was given, an unresolved custom op.
        """
        reason = " ".join(str(error).split()) or type(error).__name__
        where = "with XNNPACK" if self.use_xnnpack else "without XNNPACK"
        return UnsupportedModelError(
            f"{self.model.name}: LiteRT ({self.backend} backend, {where}) cannot run the "
            f"model: {reason[:400]}. A custom op needs the runtime or delegate that defines "
            "it; otherwise the file is corrupt or was made for another runtime: re-export it."
        )

    def _create_interpreter(self) -> Any:
        """Build the interpreter; subclasses (Edge TPU) add delegates here."""
        return make_interpreter(
            self.model.content, num_threads=self.threads, use_xnnpack=self.use_xnnpack
        )

    @property
    def preferred_batch_size(self) -> int:
        """64 for a dynamic batch dimension, else the model's fixed batch size."""
        return 64 if self.dynamic_batch else self._batch

    @property
    def input_details(self) -> dict[str, Any]:
        """The interpreter's input tensor details."""
        return self._input

    def predict_batch(self, x: np.ndarray) -> np.ndarray:
        """Run ``x`` (float samples) and return dequantized float outputs."""
        if self.dynamic_batch:
            return self._invoke(x)
        chunks = []
        for start in range(0, len(x), self._batch):
            chunk = x[start : start + self._batch]
            missing = self._batch - len(chunk)
            padded = np.concatenate([chunk, np.zeros((missing, *chunk.shape[1:]), chunk.dtype)])
            chunks.append(self._invoke(padded)[: len(chunk)])
        return np.concatenate(chunks)

    def predict(
        self, x: np.ndarray, *, batch_size: int | None = None, progress: bool = False
    ) -> np.ndarray:
        """Run all of ``x``; the last short batch is padded so the interpreter keeps its shape."""
        size = batch_size or self.preferred_batch_size
        tail = len(x) % size
        if not self.dynamic_batch or tail == 0 or len(x) < size:
            return super().predict(x, batch_size=size, progress=progress)
        padding = np.zeros((size - tail, *x.shape[1:]), x.dtype)
        padded = np.concatenate([x, padding])
        return super().predict(padded, batch_size=size, progress=progress)[: len(x)]

    def bind(self, x: np.ndarray) -> Callable[[], object]:
        """Set ``x`` as the input once and return ``Interpreter.invoke`` (what gets timed)."""
        if not self.dynamic_batch and len(x) != self._batch:
            return super().bind(x)  # fixed batch: chunks of the model's own batch size
        self._set_input(x)
        return self.interpreter.invoke

    def details(self) -> dict[str, object]:
        """Threads, XNNPACK on/off and how many of the model's ops run inside delegates."""
        total, delegated = delegated_ops(self.interpreter)
        return {
            "threads": self.threads,
            "xnnpack": self.use_xnnpack,
            "ops": total,
            "delegated_ops": delegated,
        }

    def _set_input(self, x: np.ndarray) -> None:
        index = self._input["index"]
        if len(x) != self._batch:
            self.interpreter.resize_tensor_input(index, [len(x), *x.shape[1:]], strict=True)
            self.interpreter.allocate_tensors()
            self._batch = len(x)
        self.interpreter.set_tensor(index, quantize(x, self._input))

    def _invoke(self, x: np.ndarray) -> np.ndarray:
        self._set_input(x)
        try:
            self.interpreter.invoke()
        except RuntimeError as error:  # a kernel that refuses its inputs' types at run time
            raise self._cannot_run(error) from error
        return dequantize(self.interpreter.get_tensor(self._output["index"]), self._output)

    def close(self) -> None:
        """Drop the interpreter."""
        self.interpreter = None


def delegated_ops(interpreter: Any) -> tuple[int, int]:
    """Count the model's ops, and those that run inside delegate kernels (XNNPACK, Edge TPU...).

    A delegate replaces a partition of the graph with one ``DELEGATE`` node appended after
    the model's own nodes; the ops of a partition are those between its input and output
    tensors.

    Args:
        interpreter: An allocated LiteRT interpreter.

    Returns:
        ``(ops, delegated)``: the model's op count and how many of them a delegate runs.
    """
    nodes = interpreter._get_ops_details()  # the public API has no per-node view
    own = [n for n in nodes if n["op_name"] != "DELEGATE"]
    producer = {int(t): n["index"] for n in own for t in n["outputs"]}
    delegated: set[int] = set()
    for node in nodes:
        if node["op_name"] != "DELEGATE":
            continue
        boundary = {int(t) for t in node["inputs"]}
        stack = [int(t) for t in node["outputs"]]
        while stack:
            op = producer.get(stack.pop())
            if op is None or op in delegated:
                continue
            delegated.add(op)
            stack.extend(int(t) for t in nodes[op]["inputs"] if int(t) not in boundary)
    return len(own), len(delegated)


def quantize(x: np.ndarray, detail: dict[str, Any]) -> np.ndarray:
    """Map float data to a tensor's dtype with its (scale, zero point); pass-through if float.

    Example:
        >>> quantize(np.array([0.5]), {"dtype": np.int8, "quantization": (0.5, -1)})
        array([0], dtype=int8)
    """
    dtype = np.dtype(detail["dtype"])
    scale, zero_point = detail["quantization"]
    if dtype.kind == "f" or scale == 0:
        return np.asarray(x, dtype=dtype)
    info = np.iinfo(dtype)
    return np.clip(np.round(x / scale + zero_point), info.min, info.max).astype(dtype)


def dequantize(q: np.ndarray, detail: dict[str, Any]) -> np.ndarray:
    """Map a quantized tensor back to float32 with its (scale, zero point)."""
    scale, zero_point = detail["quantization"]
    if q.dtype.kind == "f" or scale == 0:
        return q.astype(np.float32, copy=False)
    return ((q.astype(np.float32) - zero_point) * scale).astype(np.float32)
