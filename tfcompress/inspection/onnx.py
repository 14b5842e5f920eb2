"""Inspect an ``.onnx``: opsets, IR version, producer, node histogram, initializers by dtype.

Read with the ``onnx`` package (no ONNX Runtime): ``pip install 'tfcompress[onnx]'``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tfcompress.errors import MissingDependencyError
from tfcompress.inspection.common import (
    WeightGroup,
    group_weights,
    io_dict,
    ops_report,
    printable,
    share,
)
from tfcompress.models import onnx as onnx_file
from tfcompress.models.feeding import FeedLayout
from tfcompress.models.onnx import OnnxModel, onnx_graphs
from tfcompress.models.signature import TensorSpec, model_signature

_DEFAULT_DOMAINS = ("", "ai.onnx")
# Which input of a node is its bias.
_BIAS_INPUT = {"Conv": 2, "ConvTranspose": 2, "Gemm": 2, "QLinearConv": 8}


@dataclass(frozen=True)
class OnnxInfo:
    """What an ``.onnx`` holds.

    Attributes:
        opsets: ``(domain, version)`` pairs the model imports; ``ai.onnx`` is the default.
        producer: The exporter that wrote it and its version (``tf2onnx 1.17.0``).
        node_count: Nodes of the graph and of its subgraphs (``If``/``Loop`` bodies).
        op_histogram: Op type -> count, most used first; ops of another domain than
            ``ai.onnx`` are ``domain:OpType``.
        custom_ops: Those ``domain:OpType`` ops: they need a runtime that implements them.
        weights_by_dtype: Initializers grouped by dtype (bytes = elements x item size).
    """

    name: str
    size_bytes: int
    ir_version: int
    producer: str
    opsets: tuple[tuple[str, int], ...]
    node_count: int
    op_histogram: dict[str, int]
    custom_ops: tuple[str, ...]
    weights_by_dtype: tuple[WeightGroup, ...]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    #: How the signature is fed (batch dimensions, scalars, a static batch): set by
    #: :func:`~tfcompress.inspection.inspect_model`.
    layout: FeedLayout | None = field(default=None, compare=False)

    @property
    def weight_bytes(self) -> int:
        """Bytes of all initializers."""
        return sum(group.bytes for group in self.weights_by_dtype)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``: inputs and outputs are lists of objects."""
        return {
            "format": "onnx",
            "name": self.name,
            "size_bytes": self.size_bytes,
            "ir_version": self.ir_version,
            "producer": self.producer,
            "opsets": [{"domain": d, "version": v} for d, v in self.opsets],
            "node_count": self.node_count,
            "weight_bytes": self.weight_bytes,
            **io_dict(self),
            "op_histogram": dict(self.op_histogram),
            "custom_ops": list(self.custom_ops),
        }

    def __str__(self) -> str:
        opsets = ", ".join(f"{printable(d)} {v}" for d, v in self.opsets) or "none"
        head = (
            f"{self.name}: {self.size_bytes:,} bytes (weights {self.weight_bytes:,} = "
            f"{share(self.weight_bytes, self.size_bytes)}); ONNX IR {self.ir_version}, "
            f"opset {opsets}; producer {printable(self.producer) or 'unknown'}; "
            f"{self.node_count} nodes"
        )
        note = (
            "ops outside ai.onnx: they run only on a runtime that implements their domain "
            "(ONNX Runtime implements com.microsoft)"
        )
        return ops_report(self, head, {op: op for op in self.custom_ops}, note)


def inspect_onnx(model: OnnxModel) -> OnnxInfo:
    """Describe an ONNX model from its ``ModelProto``.

    Raises:
        MissingDependencyError: The ``onnx`` package is not installed.
        ModelLoadError: The bytes do not parse as an ONNX model.
    """
    proto = onnx_file.parse(model)
    if proto is None:
        raise MissingDependencyError(
            f"{model.name}: inspecting an ONNX model needs the onnx package; "
            "pip install 'tfcompress[onnx]'."
        )
    import onnx

    ops: Counter[str] = Counter()
    entries = []
    for graph in onnx_graphs(proto.graph):
        biases = set()
        for node in graph.node:
            default = node.domain in _DEFAULT_DOMAINS
            ops[str(node.op_type) if default else f"{node.domain}:{node.op_type}"] += 1
            position = _BIAS_INPUT.get(node.op_type) if default else None
            if position is not None and len(node.input) > position:
                biases.add(node.input[position])
        entries += [(*_initializer_size(onnx, t), t.name in biases) for t in graph.initializer]
        for node, tensor in constant_tensors(graph):  # weights some exporters keep as nodes
            entries.append((*_initializer_size(onnx, tensor), node.output[0] in biases))
    histogram = dict(ops.most_common())
    signature = model_signature(model)
    producer = " ".join(p for p in (proto.producer_name, proto.producer_version) if p)
    return OnnxInfo(
        name=model.name,
        size_bytes=model.size_bytes,
        ir_version=int(proto.ir_version),
        producer=producer,
        opsets=tuple(
            (opset.domain or "ai.onnx", int(opset.version)) for opset in proto.opset_import
        ),
        node_count=sum(histogram.values()),
        op_histogram=histogram,
        custom_ops=tuple(op for op in histogram if ":" in op),
        weights_by_dtype=group_weights(entries),
        inputs=signature.inputs,
        outputs=signature.outputs,
    )


def constant_tensors(graph: Any) -> Iterator[tuple[Any, Any]]:
    """The ``Constant`` nodes of ``graph`` (not its subgraphs), each with the tensor it holds.

    Paddle2ONNX and some PyTorch exports store weights as ``Constant`` nodes rather than
    initializers (PaddleOCR's recogniser: 10.8 MB of them): they are the model's weights
    all the same.
    """
    for node in graph.node:
        if node.op_type != "Constant" or node.domain not in _DEFAULT_DOMAINS or not node.output:
            continue
        for attribute in node.attribute:
            if attribute.name == "value" and attribute.HasField("t"):
                yield node, attribute.t


def _initializer_size(onnx: Any, tensor: Any) -> tuple[str, int]:
    """``(dtype, bytes)`` of an initializer: elements x item size (external data included)."""
    if tensor.data_type == onnx.TensorProto.STRING:
        return "string", sum(len(s) for s in tensor.string_data)
    try:
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
    except (KeyError, ValueError, TypeError):
        return f"onnx_type({tensor.data_type})", len(tensor.raw_data)
    # Python ints: a crafted shape cannot overflow, and nothing is allocated.
    return dtype.name, math.prod(max(int(d), 0) for d in tensor.dims) * dtype.itemsize
