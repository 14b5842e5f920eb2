"""LiteRT ``CompiledModel`` backends: the supported Python route to a GPU (with CPU fallback)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from tfcompress._compat.litert import compiled_model_module, make_interpreter
from tfcompress.errors import (
    BackendUnavailableError,
    InvalidInputError,
    UnsupportedModelError,
)
from tfcompress.models.loading import TFLiteModel
from tfcompress.runtime.base import Runner, register_backend
from tfcompress.runtime.litert import dequantize, quantize

logger = logging.getLogger(__name__)


def _litert_compiled_model() -> tuple[Any, Any, Any, Any]:
    compiled = compiled_model_module()
    return (
        compiled.CompiledModel,
        compiled.HardwareAccelerator,
        compiled.Options,
        compiled.CpuOptions,
    )


class CompiledModelRunner(Runner):
    """Runs a ``.tflite`` through LiteRT's ``CompiledModel`` on the given accelerators.

    Batches run as repeated calls at the model's own batch size (LiteRT 2.3's CompiledModel
    cannot resize an input of a compiled model reliably).

    Args:
        model: The ``.tflite`` to run.
        accelerators: Names among ``"gpu"``, ``"npu"`` and ``"cpu"``; order is irrelevant.
        threads: CPU threads for the ops that run on the CPU.

    Raises:
        BackendUnavailableError: LiteRT cannot compile the model for the accelerators here.
        UnsupportedModelError: Not a ``.tflite``, or several inputs/outputs.

    Example:
        >>> with CompiledModelRunner(model, accelerators=("cpu",)) as runner:  # doctest: +SKIP
        ...     outputs = runner.predict(x)
    """

    backend = "litert-compiled"
    formats = (TFLiteModel,)

    def __init__(
        self,
        model: TFLiteModel,
        *,
        accelerators: tuple[str, ...] = ("gpu", "cpu"),
        threads: int = 1,
    ) -> None:
        if not isinstance(model, TFLiteModel):
            raise UnsupportedModelError(
                f"the {self.backend!r} backend runs .tflite models; convert the model first."
            )
        if threads < 1:
            raise InvalidInputError(f"threads must be at least 1, got {threads}.")
        accelerators = tuple(a.lower() for a in accelerators)
        compiled_model, accelerator, options, cpu_options = _litert_compiled_model()
        flags = 0
        for name in accelerators:
            if name.upper() not in {"CPU", "GPU", "NPU"}:
                raise InvalidInputError(f"unknown accelerator {name!r}; use cpu, gpu or npu.")
            flags |= accelerator[name.upper()]
        self.model, self.threads, self.accelerators = model, threads, tuple(accelerators)
        try:
            self._compiled = compiled_model.from_buffer(
                model.content,
                options=options(
                    hardware_accelerators=accelerator(flags),
                    cpu_options=cpu_options(num_threads=threads),
                ),
            )
        except RuntimeError as error:
            wanted = "|".join(a.upper() for a in accelerators)
            missing = "no GPU" if "gpu" in accelerators else f"no {wanted}"
            raise BackendUnavailableError(
                f"{missing}: LiteRT could not compile {model.name} for {wanted} "
                f"({' '.join(str(error).split())}); without a GPU use backend 'cpu'."
            ) from error
        self._signature = next(iter(self._compiled.get_signature_list()))
        inputs = self._compiled.get_input_tensor_details(self._signature)
        outputs = self._compiled.get_output_tensor_details(self._signature)
        if len(inputs) != 1 or len(outputs) != 1:
            raise UnsupportedModelError(
                f"{model.name} has {len(inputs)} inputs and {len(outputs)} outputs; tfcompress "
                "runs single-input, single-output models."
            )
        # CompiledModel reports dtypes and shapes, not quantization: read those once here.
        interpreter = make_interpreter(model.content, num_threads=1, use_xnnpack=False)
        self._input = interpreter.get_input_details()[0]
        self._output = interpreter.get_output_details()[0]
        self._in_shape = tuple(next(iter(inputs.values()))["shape"])
        self._out_shape = tuple(next(iter(outputs.values()))["shape"])
        self._in_buffers = self._compiled.create_input_buffers(0)
        self._out_buffers = self._compiled.create_output_buffers(0)

    @property
    def batch(self) -> int:
        """The model's own batch size (each run processes this many samples)."""
        return int(self._in_shape[0])

    @property
    def preferred_batch_size(self) -> int:
        """The model's own batch size."""
        return self.batch

    @property
    def fully_accelerated(self) -> bool:
        """True when every op runs on the accelerator (never for CPU only)."""
        return bool(self._compiled.is_fully_accelerated())

    def predict_batch(self, x: np.ndarray) -> np.ndarray:
        """Run ``x`` in chunks of the model's batch size (the last chunk zero-padded)."""
        chunks = []
        for start in range(0, len(x), self.batch):
            chunk = x[start : start + self.batch]
            self._write(chunk)
            self._run()
            chunks.append(self._read()[: len(chunk)])
        return np.concatenate(chunks)

    def bind(self, x: np.ndarray) -> Callable[[], object]:
        """Write ``x`` once and return the bare run when it fits one call."""
        if len(x) != self.batch:
            return super().bind(x)
        self._write(x)
        return self._run

    def details(self) -> dict[str, object]:
        """Accelerators requested and whether the whole model runs on them."""
        return {
            "threads": self.threads,
            "accelerators": "|".join(a.upper() for a in self.accelerators),
            "fully_accelerated": self.fully_accelerated,
        }

    def close(self) -> None:
        """Release the compiled model."""
        self._compiled.close()

    def _write(self, chunk: np.ndarray) -> None:
        missing = self.batch - len(chunk)
        if missing:
            chunk = np.concatenate([chunk, np.zeros((missing, *chunk.shape[1:]), chunk.dtype)])
        self._in_buffers[0].write(np.ascontiguousarray(quantize(chunk, self._input)))

    def _run(self) -> None:
        self._compiled.run_by_index(0, self._in_buffers, self._out_buffers)

    def _read(self) -> np.ndarray:
        count = int(np.prod(self._out_shape))
        raw = self._out_buffers[0].read(count, np.dtype(self._output["dtype"]))
        return dequantize(raw.reshape(self._out_shape), self._output)


@register_backend("gpu")
class GpuRunner(CompiledModelRunner):
    """LiteRT ``CompiledModel`` with ``HardwareAccelerator.GPU | CPU``.

    Ops the GPU supports run there; the others fall back to the CPU. :meth:`details` tells
    whether the model was fully accelerated.

    Args:
        model: The ``.tflite`` to run (float32 or float16 models suit GPUs best).
        threads: CPU threads for the ops that fall back to the CPU.

    Raises:
        BackendUnavailableError: No GPU (or no WebGPU/OpenCL driver) here.

    Example:
        >>> with GpuRunner(model) as runner:  # doctest: +SKIP
        ...     runner.details()["fully_accelerated"]
        True
    """

    def __init__(self, model: TFLiteModel, *, threads: int = 1) -> None:
        super().__init__(model, accelerators=("gpu", "cpu"), threads=threads)


@register_backend("cpu-compiled")
class CompiledCpuRunner(CompiledModelRunner):
    """LiteRT ``CompiledModel`` on ``HardwareAccelerator.CPU`` only.

    This is the runtime path of LiteRT's own benchmark tool
    (``python -m ai_edge_litert.tools.benchmark_litert_model``), and the newer alternative to
    the ``cpu`` backend's ``Interpreter``; both use XNNPACK kernels.

    Args:
        model: The ``.tflite`` to run.
        threads: CPU threads.

    Example:
        >>> with CompiledCpuRunner(model, threads=1) as runner:  # doctest: +SKIP
        ...     outputs = runner.predict(x)
    """

    def __init__(self, model: TFLiteModel, *, threads: int = 1) -> None:
        super().__init__(model, accelerators=("cpu",), threads=threads)
