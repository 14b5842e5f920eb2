"""LiteRT interpreter backend (CPU, with or without XNNPACK)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from tfcompress._compat.litert import make_interpreter
from tfcompress.errors import InvalidDataError, UnsupportedModelError
from tfcompress.models.loading import TFLiteModel
from tfcompress.models.probe import probe_inputs, zeros_refused
from tfcompress.models.signature import model_signature
from tfcompress.runtime.base import (
    BackendFlag,
    Feed,
    Outputs,
    Runner,
    copying_calls,
    register_backend,
)


@register_backend("cpu")
class LiteRTRunner(Runner):
    """Runs a ``.tflite`` on the CPU through the LiteRT interpreter.

    Quantized inputs and outputs are converted with their scale and zero point, so callers
    feed float data to any variant. Inputs and outputs are named by the model's signature
    (``serving_default``), in the graph's order. A model that keeps state in variable
    tensors (a fused LSTM) starts each call of :meth:`predict_batch` from its initial state,
    as each call holds independent samples. Batches run in one invoke when the model's
    batch is free; a static-batch model runs calls of its own batch size (see
    :attr:`~tfcompress.runtime.base.Runner.layout`). Other dynamic dimensions (an audio
    length) take the size of the data fed. ``threads``: CPU threads for kernels and XNNPACK;
    ``use_xnnpack=False`` runs LiteRT's built-in kernels only.
    """

    runtime_name = "LiteRT"
    flags = (BackendFlag("use_xnnpack", "--no-xnnpack", "LiteRT built-in kernels only", False),)

    formats = (TFLiteModel,)
    pads_last_batch = True  # one input shape for every call: no resize, no re-allocation

    def __init__(self, model: TFLiteModel, *, threads: int = 1, use_xnnpack: bool = True) -> None:
        advice = "convert with tfcompress.quantize() or use backend='keras' for Keras models."
        self._accept(model, threads, advice)
        self.model = model
        self.threads = threads
        self.use_xnnpack = use_xnnpack
        self.signature = model_signature(model)
        try:
            self.interpreter = self._create_interpreter()
        except (RuntimeError, ValueError) as error:
            raise self._cannot_run(error) from error
        self._inputs = self.interpreter.get_input_details()
        self._outputs = self.interpreter.get_output_details()
        self._pairs = list(zip(self._inputs, self.signature.input_names, strict=True))
        # A fused LSTM/RNN keeps its state in variable tensors, which persist from one
        # invoke to the next: each call of independent samples starts from the initial state.
        self._stateful = _has_variable_tensors(model)
        # The load probe could not run it on zeros (an op refused them, which is not damage):
        # it runs here only after a child process has run it on the real inputs.
        self._unproven = zeros_refused(model.content, "tflite")
        self._shapes = {d["index"]: tuple(int(n) for n in d["shape"]) for d in self._inputs}
        self._allocated = False
        try:
            self.interpreter.allocate_tensors()
            self._allocated = True
        except (RuntimeError, ValueError) as error:
            # An unknown length stored as 1 can be too short for the model (a convolution
            # wider than 1): such a model is prepared when the data's shape is known.
            if not any(spec.is_dynamic for spec in self.signature.inputs):
                raise self._cannot_run(error) from error

    def _cannot_run(self, error: Exception) -> UnsupportedModelError:
        """A typed error for a model this interpreter cannot prepare or run.

        Bad parameters, a kernel without the types it was given, an unresolved custom op
        (named, with the backends that could run it).
        """
        reason = " ".join(str(error).split()) or type(error).__name__
        where = "with XNNPACK" if self.use_xnnpack else "without XNNPACK"
        return UnsupportedModelError(
            f"{self.model.name}: LiteRT ({self.backend} backend, {where}) cannot run the "
            f"model: {reason[:400]}. {custom_op_advice(self.model)}"
        )

    def _create_interpreter(self) -> Any:
        """Build the interpreter; subclasses (Edge TPU) add delegates here."""
        return make_interpreter(
            self.model.content, num_threads=self.threads, use_xnnpack=self.use_xnnpack
        )

    @property
    def input_details(self) -> dict[str, Any]:
        """The interpreter's details of the first input tensor."""
        return self._inputs[0]

    def bind_call(self, feed: Feed) -> Callable[[], object]:
        """Convert the inputs once; each timed call copies them in and invokes."""
        return self.bind_calls([feed])

    def bind_calls(self, feeds: list[Feed]) -> Callable[[], object]:
        """Convert every call's inputs once; each timed call copies them in and invokes.

        The interpreter holds one set of input tensors (see :func:`copying_calls`).
        """
        self._set_inputs(feeds[0])  # resized, allocated and probed once, at these shapes
        prepared = [[(d["index"], quantize(feed[n], d)) for d, n in self._pairs] for feed in feeds]
        return copying_calls(prepared, self.interpreter.set_tensor, self.interpreter.invoke)

    def details(self) -> dict[str, object]:
        """Threads, XNNPACK on/off and how many of the model's ops run inside delegates."""
        total, delegated = delegated_ops(self.interpreter)
        return {
            "threads": self.threads,
            "xnnpack": self.use_xnnpack,
            "ops": total,
            "delegated_ops": delegated,
        }

    def _set_inputs(self, feed: Feed) -> None:
        resized = False
        for detail, name in self._pairs:
            shape = tuple(int(n) for n in feed[name].shape)
            if shape != self._shapes[detail["index"]]:
                try:
                    self.interpreter.resize_tensor_input(detail["index"], list(shape), strict=True)
                except (RuntimeError, ValueError) as error:
                    raise InvalidDataError(
                        f"input {name!r} of {self.model.name} cannot take shape {shape}: "
                        f"{' '.join(str(error).split())[:200]}; feed its declared shape."
                    ) from error
                self._shapes[detail["index"]] = shape
                resized = True
        if resized or not self._allocated:
            try:
                self.interpreter.allocate_tensors()
            except (RuntimeError, ValueError) as error:
                raise self._cannot_run(error) from error
            self._allocated = True
        values = {d["index"]: (name, quantize(feed[name], d)) for d, name in self._pairs}
        if self._unproven is not None:
            probed = {f"t{i}": value for i, (_, value) in values.items()}
            probe_inputs(
                self.model.content, "tflite", probed, source=self.model.path or self.model.name
            )
            self._unproven = None
        for index, (name, value) in values.items():
            try:
                self.interpreter.set_tensor(index, value)
            except ValueError as error:  # LiteRT refusing the array: name the input
                raise InvalidDataError(
                    f"input {name!r} of {self.model.name}: LiteRT refused the array "
                    f"({' '.join(str(error).split())[:200]}); feed its declared shape."
                ) from error

    def predict_batch(self, feed: Feed) -> Outputs:
        """Run one call (model layout, float values) and return dequantized float outputs."""
        self._set_inputs(feed)
        if self._stateful:
            self.interpreter.reset_all_variables()
        try:
            self.interpreter.invoke()
        except RuntimeError as error:
            if _kernel_refusal(error):  # a custom op prepared lazily, a kernel without types
                raise self._cannot_run(error) from error
            # An op that refuses the values it got (an int8 DIV by zero): not the file.
            raise invoke_failed(
                self.model.name, f"LiteRT ({self.backend} backend)", error
            ) from error
        return {
            name: dequantize(self.interpreter.get_tensor(detail["index"]), detail)
            for detail, name in zip(self._outputs, self.signature.output_names, strict=True)
        }

    def close(self) -> None:
        """Drop the interpreter."""
        self.interpreter = None


def _has_variable_tensors(model: TFLiteModel) -> bool:
    from tfcompress.models.tflite_file import read_tflite

    parsed = read_tflite(model.content, source=model.path or model.name)
    return any(t.is_variable for graph in parsed.subgraphs for t in graph.tensors)


def _kernel_refusal(error: BaseException) -> bool:
    """Whether an invoke failed on the model's ops (types, custom ops), not on the values."""
    text = str(error)
    return any(
        words in text for words in ("failed to prepare", "unresolved custom op", "only supports")
    )


def invoke_failed(model: str, runtime: str, error: BaseException) -> InvalidDataError:
    """The error of a model that loaded and was prepared but failed on the values it got.

    Such a failure is not damage: an op refused its inputs (int8 DIV by a value that is zero
    on silence, a gather index out of range, a loop bound).
    """
    reason = " ".join(str(error).split())[:300] or type(error).__name__
    return InvalidDataError(
        f"{model}: {runtime} ran the model but an op refused the values it got: {reason}; "
        "the file is fine: check that the data holds inputs this model accepts (e.g. no "
        f"all-zero input to a normalisation that divides by it){memory_hint(reason)}."
    )


def memory_hint(reason: str) -> str:
    """``, or FILL sized its output ... past the memory limit`` when the failed op could have.

    An op whose output size is a value of its inputs (FILL, BROADCAST_TO, TILE...) allocates
    what the data says; under the child's memory limit that fails as a plain invoke error.
    """
    sized = _SIZED_BY_VALUES.search(reason)
    if sized is None:
        return ""
    from tfcompress._limits import CALL_HEADROOM, CHILD_MEMORY

    limit = (
        f"of {CHILD_MEMORY.value() / 2**30:.3g} GiB"
        if CHILD_MEMORY.is_set()
        else f"(about {CALL_HEADROOM / 2**30:g} GiB over what the runtime holds, by default)"
    )
    return (
        f", or {sized.group(1)} sized its output from those values past the memory limit "
        f"{limit} (TFCOMPRESS_MEMORY_LIMIT raises it)"
    )


# Ops whose output shape is a value of their inputs: an allocation the data decides.
_SIZED_BY_VALUES = re.compile(r"\((FILL|BROADCAST_TO|TILE|RANGE|RESHAPE|PAD|PADV2)\)")


def custom_op_advice(model: TFLiteModel) -> str:
    """What to do when a runtime cannot prepare ``model``: name its custom ops, if any."""
    from tfcompress.models.tflite_file import read_tflite

    custom = sorted({code or "(no code)" for code in read_tflite(model.content).custom_ops})
    if not custom:
        # It passed the structural checks at load: not damage, a kernel that refuses it.
        return (
            "Its structure is valid: the op named above has no kernel here for what the file "
            "asks (made for another LiteRT, or a quantizer's output LiteRT cannot run: make it "
            "again with that op kept float)."
        )
    ops = ", ".join(custom)
    edgetpu = any("edgetpu" in code for code in custom)
    where = (
        "the 'edgetpu' backend (a Coral device and libedgetpu)"
        if edgetpu
        else "a LiteRT build or delegate that registers them (e.g. the MediaPipe runtime for "
        "its ops), or the 'cpu' backend if they are among LiteRT's built-in custom ops"
    )
    return f"It uses custom op(s) {ops}, which only {where} can run."


def delegated_ops(interpreter: Any) -> tuple[int, int]:
    """``(ops, delegated)``: an allocated interpreter's ops, and those a delegate runs."""
    nodes = interpreter._get_ops_details()  # the public API has no per-node view
    own = [n for n in nodes if n["op_name"] != "DELEGATE"]
    return len(own), sum(len(ops) for ops in delegated_partitions(interpreter))


def delegated_partitions(interpreter: Any) -> list[set[int]]:
    """The model's ops each delegate node runs, one set of op indices per ``DELEGATE`` node.

    A delegate replaces a partition of the graph with one ``DELEGATE`` node appended after
    the model's own nodes; the ops of a partition are those between its input and output
    tensors. An op in no set runs on LiteRT's built-in kernels.
    """
    nodes = interpreter._get_ops_details()  # the public API has no per-node view
    own = [n for n in nodes if n["op_name"] != "DELEGATE"]
    producer = {int(t): n["index"] for n in own for t in n["outputs"]}
    partitions: list[set[int]] = []
    for node in nodes:
        if node["op_name"] != "DELEGATE":
            continue
        boundary = {int(t) for t in node["inputs"]}
        stack = [int(t) for t in node["outputs"]]
        delegated: set[int] = set()
        while stack:
            op = producer.get(stack.pop())
            if op is None or op in delegated:
                continue
            delegated.add(op)
            stack.extend(int(t) for t in nodes[op]["inputs"] if int(t) not in boundary)
        partitions.append(delegated)
    return partitions


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
