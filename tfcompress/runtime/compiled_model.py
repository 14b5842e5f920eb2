"""LiteRT ``CompiledModel`` backends: the supported Python route to a GPU (with CPU fallback)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from tfcompress._compat.litert import compiled_model_module, make_interpreter
from tfcompress.errors import (
    InvalidInputError,
    UnsupportedModelError,
)
from tfcompress.models.loading import TFLiteModel
from tfcompress.models.signature import ModelSignature, model_signature
from tfcompress.models.tflite_file import read_tflite
from tfcompress.runtime.base import Feed, Outputs, Runner, register_backend
from tfcompress.runtime.gpu_diagnosis import delegate_cpu_ops, diagnose, native_log
from tfcompress.runtime.litert import custom_op_advice, dequantize, quantize


class CompiledModelRunner(Runner):
    """Runs a ``.tflite`` through LiteRT's ``CompiledModel`` on the given accelerators.

    Every call runs the shapes the model was compiled with (LiteRT 2.3's CompiledModel
    cannot resize an input of a compiled model reliably): the runner's layout has the
    file's stored batch as a static batch, and batches run as calls of that size.

    ``accelerators``: names among ``"gpu"``, ``"npu"`` and ``"cpu"`` (in any order);
    ``threads``: CPU threads for the ops that run on the CPU.

    Raises:
        BackendUnavailableError: LiteRT found no GPU device here ("no GPU"), or could not
            compile for a reason it did not name (its words in the message).
        UnsupportedModelError: Not a ``.tflite``, custom ops, a GPU that refused the model
            (the ops at fault and the fix, see :mod:`tfcompress.runtime.gpu_diagnosis`), or a
            CPU-only compilation that failed on this model (the message says what failed).
    """

    runtime_name = "LiteRT"
    backend = "litert-compiled"
    formats = (TFLiteModel,)

    def __init__(
        self,
        model: TFLiteModel,
        *,
        accelerators: tuple[str, ...] = ("gpu", "cpu"),
        threads: int = 1,
    ) -> None:
        self._accept(model, threads, "convert the model first.")
        accelerators = tuple(a.lower() for a in accelerators)
        litert = compiled_model_module()
        accelerator = litert.HardwareAccelerator
        flags = 0
        for name in accelerators:
            if name.upper() not in {"CPU", "GPU", "NPU"}:
                raise InvalidInputError(f"unknown accelerator {name!r}; use cpu, gpu or npu.")
            flags |= accelerator[name.upper()]
        self.model, self.threads, self.accelerators = model, threads, tuple(accelerators)
        try:
            with native_log() as log:  # LiteRT says why only there (gpu_diagnosis)
                self._compiled = litert.CompiledModel.from_buffer(
                    model.content,
                    options=litert.Options(
                        hardware_accelerators=accelerator(flags),
                        cpu_options=litert.CpuOptions(num_threads=threads),
                    ),
                )
        except RuntimeError as error:
            if read_tflite(model.content).custom_ops:
                raise UnsupportedModelError(
                    f"{model.name}: LiteRT ({self.backend} backend) cannot prepare the model "
                    f"({' '.join(str(error).split())[:300]}). {custom_op_advice(model)}"
                ) from error
            reason = " ".join(str(error).split())[:300]
            wanted = "|".join(a.upper() for a in accelerators)
            if "gpu" not in accelerators:
                # The CPU is here: the compilation failed on this model, say what failed.
                raise UnsupportedModelError(
                    f"{model.name}: LiteRT's CompiledModel could not compile the model for "
                    f"{wanted} ({reason}); the 'cpu' backend (LiteRT's Interpreter) may run it."
                ) from error
            raise diagnose(model.name, model.content, error, log, wanted) from error
        # The delegate lists the ops it leaves to the CPU when it takes only part of a model.
        self.cpu_ops = tuple(delegate_cpu_ops(log.text)) if "gpu" in accelerators else ()
        self.signature = model_signature(model)
        key = next(iter(self._compiled.get_signature_list()))
        listed = self._compiled.get_signature_by_index(0)
        compiled_inputs = self._compiled.get_input_tensor_details(key)
        compiled_outputs = self._compiled.get_output_tensor_details(key)
        # CompiledModel reports dtypes and shapes, not quantization: read those once from an
        # interpreter, whose details follow the graph's order, as the signature's names do.
        interpreter = make_interpreter(model.content, num_threads=1, use_xnnpack=False)
        ours_in = _by_tensor(interpreter.get_input_details(), self.signature.input_names)
        ours_out = _by_tensor(interpreter.get_output_details(), self.signature.output_names)
        # (our name, quantization details, shape) in the compiled signature's buffer order.
        self._in = [_slot(compiled_inputs[n], ours_in) for n in listed["inputs"]]
        self._out = [_slot(compiled_outputs[n], ours_out) for n in listed["outputs"]]
        self._in_buffers = self._compiled.create_input_buffers(0)
        self._out_buffers = self._compiled.create_output_buffers(0)

    def layout_signature(self) -> ModelSignature:
        """The signature at the compiled shapes: every call runs the shapes it was built for."""
        shapes = {name: shape for name, _, shape in (*self._in, *self._out)}
        return ModelSignature(
            tuple(replace(s, shape=shapes.get(s.name, s.shape)) for s in self.signature.inputs),
            tuple(replace(s, shape=shapes.get(s.name, s.shape)) for s in self.signature.outputs),
        )

    @property
    def fully_accelerated(self) -> bool:
        """True when every op runs on the accelerator (never for CPU only)."""
        return bool(self._compiled.is_fully_accelerated())

    def predict_batch(self, feed: Feed) -> Outputs:
        """Run one call at the compiled shapes (model layout) and return the float outputs."""
        self._write(feed)
        self._run()
        return self._read()

    def bind_call(self, feed: Feed) -> Callable[[], object]:
        """Write the inputs once and return the bare run."""
        self._write(feed)
        return self._run

    def bind_calls(self, feeds: list[Feed]) -> Callable[[], object]:
        """Write each call's inputs once, into buffers of its own; return the bare runs.

        A batch of several calls is timed as a single call is: no copy in the timed loop.
        The extra buffers live as long as the returned call.
        """
        self._write(feeds[0])
        sets = [self._in_buffers]
        for feed in feeds[1:]:
            buffers = self._compiled.create_input_buffers(0)
            self._write(feed, buffers)
            sets.append(buffers)
        run, outputs = self._compiled.run_by_index, self._out_buffers
        return lambda: [run(0, buffers, outputs) for buffers in sets]

    def details(self) -> dict[str, object]:
        """Accelerators requested, whether the whole model runs on them, and what does not.

        ``cpu_ops``: with a GPU, the ops that run on the CPU instead: as LiteRT's delegate
        listed them, or, when it listed none for a model it did not take whole, as the static
        check (:mod:`tfcompress.runtime.gpu_support`) finds them (``cpu_ops_source`` says
        which).
        """
        details: dict[str, object] = {
            "threads": self.threads,
            "accelerators": "|".join(a.upper() for a in self.accelerators),
            "fully_accelerated": self.fully_accelerated,
        }
        if "gpu" not in self.accelerators or details["fully_accelerated"]:
            return details
        if self.cpu_ops:
            return {**details, "cpu_ops": list(self.cpu_ops), "cpu_ops_source": "LiteRT"}
        from tfcompress.runtime.gpu_support import gpu_support

        found = [str(op) for op in gpu_support(self.model.content).cpu_ops]
        return {**details, "cpu_ops": found, "cpu_ops_source": "static check"}

    def close(self) -> None:
        """Release the compiled model."""
        self._compiled.close()

    def _write(self, feed: Feed, buffers: list[Any] | None = None) -> None:
        for buffer, (name, detail, _) in zip(buffers or self._in_buffers, self._in, strict=True):
            buffer.write(np.ascontiguousarray(quantize(feed[name], detail)))

    def _run(self) -> None:
        self._compiled.run_by_index(0, self._in_buffers, self._out_buffers)

    def _read(self) -> Outputs:
        outputs = {}
        for buffer, (name, detail, shape) in zip(self._out_buffers, self._out, strict=True):
            raw = buffer.read(int(np.prod(shape)), np.dtype(detail["dtype"]))
            outputs[name] = dequantize(raw.reshape(shape), detail)
        return {name: outputs[name] for name in self.signature.output_names}


def _by_tensor(details: list[dict[str, Any]], names: tuple[str, ...]) -> dict[int, Any]:
    """Interpreter details keyed by tensor index, each with the signature name it has here."""
    return {int(d["index"]): (name, d) for d, name in zip(details, names, strict=True)}


def _slot(compiled: dict[str, Any], ours: dict[int, Any]) -> tuple[str, dict[str, Any], tuple]:
    name, detail = ours[int(compiled["index"])]
    return name, detail, tuple(int(n) for n in compiled["shape"])


@register_backend("gpu")
class GpuRunner(CompiledModelRunner):
    """LiteRT ``CompiledModel`` with ``HardwareAccelerator.GPU | CPU``.

    Ops the GPU supports run there; the others fall back to the CPU (``threads`` of it).
    :meth:`details` tells whether the model was fully accelerated. float32 or float16 models
    suit GPUs best. BackendUnavailableError: no GPU (or no WebGPU/OpenCL driver) here.
    """

    def __init__(self, model: TFLiteModel, *, threads: int = 1) -> None:
        super().__init__(model, accelerators=("gpu", "cpu"), threads=threads)


@register_backend("cpu-compiled")
class CompiledCpuRunner(CompiledModelRunner):
    """LiteRT ``CompiledModel`` on ``HardwareAccelerator.CPU`` only.

    This is the runtime path of LiteRT's own benchmark tool
    (``python -m ai_edge_litert.tools.benchmark_litert_model``), and the newer alternative to
    the ``cpu`` backend's ``Interpreter``; both use XNNPACK kernels.
    """

    def __init__(self, model: TFLiteModel, *, threads: int = 1) -> None:
        super().__init__(model, accelerators=("cpu",), threads=threads)
