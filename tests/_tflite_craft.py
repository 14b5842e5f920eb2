"""Tiny ``.tflite`` files written from scratch, through LiteRT's schema object API.

For hostile-input tests that need a file no converter writes (a stride of 0, a WHILE whose
body is its own condition, an input of type INT4, hundreds of custom ops): milliseconds to
build, no TensorFlow.

Example:
    >>> content = build([tensor([1, 4], "INT8", scale=0.1)] * 2, [op("RELU", [0], [1])])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["build", "op", "options_past_the_end", "schema", "tensor"]


def schema() -> Any:
    from tfcompress._compat.litert import flatbuffer_utils

    return flatbuffer_utils().schema_fb


def tensor(
    shape: Sequence[int],
    dtype: str = "INT8",
    *,
    scale: float | None = None,
    zero: int = 0,
    data: np.ndarray | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """A tensor's description: shape, type name, quantization, constant data."""
    return {"shape": list(shape), "dtype": dtype, "scale": scale, "zero": zero, "data": data,
            "name": name}  # fmt: skip


def op(
    name: str,
    inputs: Sequence[int],
    outputs: Sequence[int],
    options: Any = None,
    *,
    custom: str | None = None,
) -> dict[str, Any]:
    """An operator's description: builtin name (or ``CUSTOM`` with ``custom``), tensors."""
    return {"name": name, "inputs": list(inputs), "outputs": list(outputs), "options": options,
            "custom": custom}  # fmt: skip


def _tensor_t(s: Any, index: int, spec: dict[str, Any], buffers: list[Any]) -> Any:
    t = s.TensorT()
    t.shape = np.array(spec["shape"], np.int32)
    t.type = getattr(s.TensorType, spec["dtype"])
    t.name = spec["name"] or f"t{index}"
    buffer = s.BufferT()
    if spec["data"] is not None:
        buffer.data = np.frombuffer(np.ascontiguousarray(spec["data"]).tobytes(), np.uint8)
    t.buffer = len(buffers)
    buffers.append(buffer)
    if spec["scale"] is not None:
        q = s.QuantizationParametersT()
        q.scale = np.array([spec["scale"]], np.float32)
        q.zeroPoint = np.array([spec["zero"]], np.int64)
        t.quantization = q
    return t


def build(
    tensors: Sequence[dict[str, Any]],
    ops: Sequence[dict[str, Any]],
    *,
    inputs: Sequence[int] = (0,),
    outputs: Sequence[int] | None = None,
    subgraphs: Sequence[tuple[Sequence[dict[str, Any]], Sequence[dict[str, Any]],
                              Sequence[int], Sequence[int]]] = (),
) -> bytes:  # fmt: skip
    """A ``.tflite`` of one main subgraph (``tensors``, ``ops``), plus more ``subgraphs``.

    ``outputs`` defaults to the last tensor. Each extra subgraph is ``(tensors, ops, inputs,
    outputs)``; op codes are shared and made in first-use order.
    """
    import flatbuffers

    s = schema()
    model = s.ModelT()
    model.version = 3
    model.description = "crafted"
    buffers: list[Any] = [s.BufferT()]
    codes: dict[tuple[str, str | None], int] = {}
    model.operatorCodes = []
    graphs = [(tensors, ops, inputs, [len(tensors) - 1] if outputs is None else outputs),
              *subgraphs]  # fmt: skip
    model.subgraphs = []
    for specs, operators, ins, outs in graphs:
        graph = s.SubGraphT()
        graph.tensors = [_tensor_t(s, i, spec, buffers) for i, spec in enumerate(specs)]
        graph.inputs = np.array(ins, np.int32)
        graph.outputs = np.array(outs, np.int32)
        graph.operators = []
        for spec in operators:
            key = (spec["name"], spec["custom"])
            if key not in codes:
                code = s.OperatorCodeT()
                code.builtinCode = getattr(s.BuiltinOperator, spec["name"])
                code.deprecatedBuiltinCode = min(code.builtinCode, 127)
                code.customCode = spec["custom"]
                code.version = 1
                codes[key] = len(model.operatorCodes)
                model.operatorCodes.append(code)
            o = s.OperatorT()
            o.opcodeIndex = codes[key]
            o.inputs = np.array(spec["inputs"], np.int32)
            o.outputs = np.array(spec["outputs"], np.int32)
            if spec["options"] is not None:
                o.builtinOptionsType = getattr(
                    s.BuiltinOptions, type(spec["options"]).__name__[:-1]
                )
                o.builtinOptions = spec["options"]
            graph.operators.append(o)
        model.subgraphs.append(graph)
    model.buffers = buffers
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def options_past_the_end(content: bytes, subgraph: int = 0, index: int = 0) -> bytes:
    """``content`` with one operator's builtin-options offset pointing past the file's end."""
    s = schema()
    model = s.Model.GetRootAs(bytearray(content), 0)
    operator = model.Subgraphs(subgraph).Operators(index)
    table = operator._tab
    field = table.Offset(12)  # Operator.builtin_options (field 4: vtable slot 4 + 2 * 4)
    assert field, "the operator has no builtin options to point elsewhere"
    at = table.Pos + field
    edited = bytearray(content)
    edited[at : at + 4] = (len(content) * 4).to_bytes(4, "little")
    return bytes(edited)
