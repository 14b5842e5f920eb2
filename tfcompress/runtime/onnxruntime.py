"""ONNX Runtime backend: CPU, plus the CUDA execution provider when this machine has one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tfcompress._compat.onnx import onnxruntime_module, ort_errors
from tfcompress.errors import (
    BackendUnavailableError,
    InvalidDataError,
    UnsupportedModelError,
)
from tfcompress.models.onnx import OnnxModel, ort_dtype
from tfcompress.models.probe import probe_inputs, zeros_refused
from tfcompress.models.signature import ModelSignature, TensorSpec
from tfcompress.runtime.base import Feed, Outputs, Runner, register_backend

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"


def default_providers(available: Sequence[str]) -> list[str]:
    """CUDA first when ONNX Runtime offers it, CPU always (it runs what CUDA cannot)."""
    return [CUDA, CPU] if CUDA in available else [CPU]


@register_backend("onnxruntime")
class OnnxRuntimeRunner(Runner):
    """Runs an ``.onnx`` with ONNX Runtime (graph optimizations on, sequential execution).

    ``threads``: intra-op threads (inter-op is 1: the graph runs op after op); ``providers``:
    execution providers in priority order (default CUDA, when present, then CPU).

    Raises:
        MissingDependencyError: onnxruntime is not installed.
        BackendUnavailableError: A requested provider is not available here.
        UnsupportedModelError: Not an ONNX model, or several inputs/outputs.
    """

    runtime_name = "ONNX Runtime"

    formats = (OnnxModel,)
    runs = ".onnx"

    def __init__(
        self,
        model: OnnxModel,
        *,
        threads: int = 1,
        providers: Sequence[str] | None = None,
    ) -> None:
        self._accept(model, threads, "export Keras models with tfcompress.export_onnx().")
        ort = onnxruntime_module()
        available = ort.get_available_providers()
        chosen = list(providers) if providers else default_providers(available)
        missing = [p for p in chosen if p not in available]
        if missing:
            raise BackendUnavailableError(
                f"{', '.join(missing)} not available in this onnxruntime (has "
                f"{', '.join(available)}); install onnxruntime-gpu for CUDA."
            )
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        self.model, self.threads = model, threads
        self._errors = ort_errors()
        try:
            self.session = ort.InferenceSession(model.content, options, providers=chosen)
        except self._errors as error:
            reason = str(error).strip().splitlines()[0]
            raise UnsupportedModelError(
                f"{model.name}: ONNX Runtime cannot load the model ({reason})."
            ) from error
        inputs, outputs = self.session.get_inputs(), self.session.get_outputs()
        self.signature = ModelSignature(
            tuple(_spec(i) for i in inputs), tuple(_spec(o) for o in outputs)
        )
        self._dtypes = {i.name: np.dtype(ort_dtype(i.type)) for i in inputs}
        # The load probe could not run it on zeros (an op refused them, which is not damage):
        # it runs here only after a child process has run it on the real inputs.
        self._unproven = zeros_refused(model.content, "onnx")

    @property
    def providers(self) -> list[str]:
        """The execution providers the session actually uses."""
        return list(self.session.get_providers())

    def predict_batch(self, feed: Feed) -> Outputs:
        """Run one call (model layout) and return the float outputs by name."""
        return self._run(self._cast(feed))

    def bind_call(self, feed: Feed) -> Callable[[], object]:
        """Build the input feed once and return the bare ``session.run``."""
        cast = self._cast(feed)
        return lambda: self._session_run(cast)  # a try block costs nothing when nothing fails

    def details(self) -> dict[str, object]:
        """Threads and the execution providers in use."""
        return {"threads": self.threads, "providers": ",".join(self.providers)}

    def close(self) -> None:
        """Drop the session."""
        self.session = None

    def _cast(self, feed: Feed) -> Feed:
        return {
            name: np.ascontiguousarray(array, dtype=self._dtypes[name])
            for name, array in feed.items()
        }

    def _session_run(self, feed: Feed) -> list[Any]:
        if self._unproven is not None:
            probe_inputs(
                self.model.content, "onnx", feed, source=self.model.path or self.model.name
            )
            self._unproven = None
        try:
            return self.session.run(None, feed)
        except self._errors as error:
            named = _named_inputs(self.signature.input_names, error)
            if named:
                raise _refused(self.model.name, named[0], error) from error
            raise self._cannot_run(error) from error

    def _run(self, feed: Feed) -> Outputs:
        results = self._session_run(feed)
        names = self.signature.output_names
        return {
            name: np.asarray(value, dtype=np.float32)
            for name, value in zip(names, results, strict=True)
        }

    def _cannot_run(self, error: BaseException) -> UnsupportedModelError:
        """ONNX Runtime's refusal to run the model on a feed, as a typed error.

        A shape it cannot take or an allocation it cannot make becomes the row's error in a
        benchmark, and one line with exit 2 in a gate.
        """
        reason = " ".join(str(error).split())[:300] or type(error).__name__
        return UnsupportedModelError(
            f"{self.model.name}: ONNX Runtime cannot run the model on these inputs ({reason}); "
            "the model is malformed or needs other input shapes."
        )


def _named_inputs(inputs: tuple[str, ...], error: BaseException) -> list[str]:
    """The inputs ONNX Runtime's message names: then the data, not the model, is at fault."""
    reason = str(error)
    return [name for name in inputs if f"input: {name}" in reason or f"'{name}'" in reason]


def _refused(model: str, name: str, error: BaseException) -> InvalidDataError:
    """ONNX Runtime's refusal of one named input, as a data error."""
    # Without ONNX Runtime's "[ONNXRuntimeError] : 2 :" prefix.
    reason = " ".join(str(error).split()).split("] ", 1)[-1][:300] or type(error).__name__
    return InvalidDataError(
        f"{model}: ONNX Runtime refused input {name!r}: {reason}; feed the shape and values "
        "the model's signature declares (tfcompress inspect shows it)."
    )


def _spec(node: Any) -> TensorSpec:
    shape = tuple(d if isinstance(d, int) and d > 0 else None for d in (node.shape or []))
    return TensorSpec(shape, ort_dtype(node.type), node.name)
