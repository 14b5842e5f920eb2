"""Inspect a ``.tflite``: inputs/outputs as stored, ops (custom ones named), weights by dtype.

Everything is read by the one ``.tflite`` reader (:mod:`tfcompress.models.tflite_file`);
input and output names are the signature's (:func:`~tfcompress.models.signature.tflite_io_tensors`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from tfcompress.inspection.common import WeightGroup, group_weights, io_dict, ops_report, share
from tfcompress.models.feeding import FeedLayout
from tfcompress.models.loading import TFLiteModel
from tfcompress.models.signature import Shape, TensorSpec, format_shape, tflite_io_tensors
from tfcompress.models.tflite_file import Tensor, TFLiteFile, read_tflite

_CUSTOM_PREFIX = "CUSTOM:"
NO_CODE = "(no code)"
# Which input of an op is its bias (an int32 constant once the model is quantized).
_BIAS_INPUT = {
    "CONV_2D": 2,
    "CONV_3D": 2,
    "DEPTHWISE_CONV_2D": 2,
    "FULLY_CONNECTED": 2,
    "TRANSPOSE_CONV": 3,
}


@dataclass(frozen=True)
class TensorInfo:
    """One input or output of a ``.tflite``, as the file stores it.

    Attributes:
        name: The signature's name (``serving_default``'s key), else the tensor's.
        dtype: The stored dtype (``int8``/``uint8`` for quantized I/O, else ``float32``...).
        shape: Batch dimension first; None for a dynamic dimension.
        scale: Per-tensor quantization scale (0.0 when not quantized per tensor).
        tensor: The tensor's own name in the graph (``serving_default_image:0``).

    Example:
        >>> TensorInfo("image", "int8", (None, 8, 8, 1), 0.0039, -128).describe()
        '(N, 8, 8, 1) int8 q=(0.0039, -128)'
    """

    name: str
    dtype: str
    shape: Shape
    scale: float
    zero_point: int
    tensor: str = ""

    def describe(self) -> str:
        """``(N, 8, 8, 1) int8 q=(0.0039, -128)`` (no ``q=`` when not quantized per tensor).

        Like :meth:`TensorSpec.describe`, the name is left to the caller (:attr:`name`).
        """
        quant = f" q=({self.scale:.6g}, {self.zero_point})" if self.scale else ""
        return f"{format_shape(self.shape)} {self.dtype}{quant}"

    def to_dict(self) -> dict[str, Any]:
        """Plain data: ``{"name", "dtype", "shape", "scale", "zero_point", "tensor"}``."""
        return {**asdict(self), "shape": list(self.shape)}


@dataclass(frozen=True)
class TFLiteInfo:
    """Structure and size breakdown of a ``.tflite``.

    Attributes:
        op_histogram: Op name -> count, most used first; a custom op is ``CUSTOM: <code>``
            (``CUSTOM: (no code)`` when its code is empty).
        custom_ops: The custom codes the model uses, in order of first use.
    """

    name: str
    size_bytes: int
    weight_bytes: int
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    op_histogram: dict[str, int]
    tensor_count: int
    subgraph_count: int
    weights_by_dtype: tuple[WeightGroup, ...] = ()
    custom_ops: tuple[str, ...] = ()
    #: How the signature is fed (batch dimensions, scalars, a static batch): set by
    #: :func:`~tfcompress.inspection.inspect_model`.
    layout: FeedLayout | None = field(default=None, compare=False)

    @property
    def graph_bytes(self) -> int:
        """Everything that is not a constant buffer: ops, tensors, metadata."""
        return self.size_bytes - self.weight_bytes

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``: inputs and outputs are lists of objects."""
        return {
            "format": "tflite",
            "name": self.name,
            "size_bytes": self.size_bytes,
            "weight_bytes": self.weight_bytes,
            "graph_bytes": self.graph_bytes,
            **io_dict(self),
            "op_histogram": dict(self.op_histogram),
            "custom_ops": list(self.custom_ops),
            "tensor_count": self.tensor_count,
            "subgraph_count": self.subgraph_count,
        }

    def __str__(self) -> str:
        head = (
            f"{self.name}: {self.size_bytes:,} bytes (weights {self.weight_bytes:,} = "
            f"{share(self.weight_bytes, self.size_bytes)}, graph {self.graph_bytes:,}); "
            f"{self.tensor_count} tensors, {sum(self.op_histogram.values())} ops in "
            f"{self.subgraph_count} subgraph(s)"
        )
        custom = {code: op_label(code) for code in self.custom_ops}
        note = (
            "custom ops: not TFLite builtins: the model runs only with the runtime or delegate "
            "that defines them"
        )
        return ops_report(self, head, custom, note)


def op_label(custom_code: str) -> str:
    """The histogram's name of a custom op: ``CUSTOM: <code>``, ``CUSTOM: (no code)``."""
    return f"CUSTOM: {custom_code}"


def inspect_tflite(model: TFLiteModel) -> TFLiteInfo:
    """Describe a ``.tflite``: signature inputs/outputs as stored, ops, weights by dtype.

    Raises:
        ModelLoadError: The flatbuffer is corrupt or fails the structural checks.
    """
    source = model.path or model.name
    parsed = read_tflite(model.content, source=source)
    parsed.validate(source=source)
    ops: Counter[str] = Counter()
    custom: dict[str, None] = {}  # insertion-ordered set
    for graph in parsed.subgraphs:
        for op in graph.operators:
            if op.opcode.startswith(_CUSTOM_PREFIX):
                code = op.opcode.removeprefix(_CUSTOM_PREFIX) or NO_CODE
                custom[code] = None
                ops[op_label(code)] += 1
            else:
                ops[op.opcode] += 1
    inputs, outputs = tflite_io_tensors(model)
    return TFLiteInfo(
        name=model.name,
        size_bytes=model.size_bytes,
        weight_bytes=parsed.weight_bytes,
        inputs=tuple(_tensor_info(spec, tensor) for spec, tensor in inputs),
        outputs=tuple(_tensor_info(spec, tensor) for spec, tensor in outputs),
        op_histogram=dict(ops.most_common()),
        tensor_count=sum(len(graph.tensors) for graph in parsed.subgraphs),
        subgraph_count=len(parsed.subgraphs),
        weights_by_dtype=_weights(parsed),
        custom_ops=tuple(custom),
    )


def _tensor_info(spec: TensorSpec, tensor: Tensor) -> TensorInfo:
    # Like the interpreter's details: a (scale, zero point) only for per-tensor quantization.
    params = tensor.quantization
    per_tensor = params is not None and len(params.scales) == 1 and len(params.zero_points) == 1
    return TensorInfo(
        name=spec.name,
        dtype=tensor.dtype,
        shape=spec.shape,
        scale=params.scales[0] if per_tensor else 0.0,  # type: ignore[union-attr]
        zero_point=params.zero_points[0] if per_tensor else 0,  # type: ignore[union-attr]
        tensor=tensor.name,
    )


def _weights(parsed: TFLiteFile) -> tuple[WeightGroup, ...]:
    entries = []
    seen: set[int] = set()  # a buffer shared by several tensors counts once
    for graph in parsed.subgraphs:
        biases = {
            op.inputs[_BIAS_INPUT[op.opcode]]
            for op in graph.operators
            if op.opcode in _BIAS_INPUT and len(op.inputs) > _BIAS_INPUT[op.opcode]
        }
        for tensor in graph.tensors:
            if not parsed.is_constant(tensor):
                continue
            size = 0 if tensor.buffer in seen else parsed.buffers[tensor.buffer].size
            seen.add(tensor.buffer)
            entries.append((tensor.dtype, size, tensor.index in biases))
    return group_weights(entries)
