"""Measure what pruning and clustering left in the exported ``.tflite``, not in Keras.

The converter may fold, transpose or requantize kernels, so the claims (sparsity, M:N
structure, unique values) are checked on the weight buffers of the file itself.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from tfcompress.models.tflite_file import Tensor, TFLiteFile, read_tflite

# Ops whose second input is a kernel, stored with the input channels on the last axis.
_KERNEL_OPS = {"CONV_2D": "conv", "DEPTHWISE_CONV_2D": "depthwise", "FULLY_CONNECTED": "dense"}
_DTYPES = {
    "float32": np.float32,
    "float16": np.float16,
    "int8": np.int8,
    "uint8": np.uint8,
    "int16": np.int16,
}


@dataclass(frozen=True)
class WeightSparsity:
    """One kernel of the exported ``.tflite``.

    Attributes:
        tensor: The kernel tensor's name in the ``.tflite``.
        layer: The Keras layer it came from (best match on names; empty when unknown).
        op: ``conv``, ``depthwise`` or ``dense``.
        dtype: Storage type (``float32``, ``float16``, ``int8``...).
        shape: Shape as stored (output channels first, input channels last).
        sparsity: Share of stored values that are exactly zero.
        unique_values: Most distinct stored values in one output channel (clustering leaves at
            most N per channel; per-channel int8 scales make the whole tensor hold more).
        m_by_n_ok: For a structure check, whether every group of ``n`` consecutive weights
            along the input-channel axis holds at least ``m`` zeros; None when not checked.
    """

    tensor: str
    layer: str
    op: str
    dtype: str
    shape: tuple[int, ...]
    sparsity: float
    unique_values: int
    m_by_n_ok: bool | None = None

    @property
    def size(self) -> int:
        """Number of weights."""
        return int(np.prod(self.shape))

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports."""
        return {**asdict(self), "shape": list(self.shape), "sparsity": round(self.sparsity, 4)}


def gzip_size(content: bytes) -> int:
    """Bytes after gzip level 9 (what a compressed download or OTA update would carry)."""
    return len(gzip.compress(content, compresslevel=9, mtime=0))


def kernel_arrays(content: bytes) -> list[tuple[str, str, str, np.ndarray]]:
    """Every conv/depthwise/dense kernel stored in a ``.tflite``.

    Kernels fed through a DEQUANTIZE op (float16 weights) are read at their storage type.
    """
    model = read_tflite(content)
    found: list[tuple[str, str, str, np.ndarray]] = []
    for graph in model.subgraphs:
        producers = {out: op for op in graph.operators for out in op.outputs}
        for op in graph.operators:
            if op.opcode not in _KERNEL_OPS or len(op.inputs) < 2 or op.inputs[1] < 0:
                continue
            index = op.inputs[1]
            producer = producers.get(index)
            if producer is not None and producer.opcode == "DEQUANTIZE":
                index = producer.inputs[0]
            tensor = graph.tensors[index]
            values = _tensor_values(model, tensor)
            if values is not None:
                found.append((tensor.name, _KERNEL_OPS[op.opcode], str(values.dtype), values))
    return found


def measure(
    content: bytes, *, layer_names: Iterable[str] = (), m_by_n: tuple[int, int] | None = None
) -> list[WeightSparsity]:
    """Sparsity, unique values and (optionally) M:N structure of each kernel in ``content``.

    Args:
        content: A ``.tflite`` flatbuffer.
        layer_names: Keras layer names to attribute kernels to (longest name found in the
            tensor name wins).
        m_by_n: ``(m, n)``: check that every ``n`` consecutive input-channel weights hold at
            least ``m`` zeros.

    Returns:
        One row per kernel.
    """
    names = sorted(set(layer_names), key=len, reverse=True)
    rows = []
    for tensor, op, dtype, values in kernel_arrays(content):
        layer = next((n for n in names if _mentions(tensor, n)), "")
        rows.append(
            WeightSparsity(
                tensor=tensor,
                layer=layer,
                op=op,
                dtype=dtype,
                shape=tuple(int(d) for d in values.shape),
                sparsity=float(np.mean(values == 0)) if values.size else 0.0,
                unique_values=_unique_per_channel(values),
                m_by_n_ok=None if m_by_n is None else has_m_by_n(values, m_by_n),
            )
        )
    return rows


def has_m_by_n(values: np.ndarray, m_by_n: tuple[int, int]) -> bool:
    """Whether every ``n`` consecutive weights on the last axis hold at least ``m`` zeros."""
    m, n = m_by_n
    if values.shape[-1] % n:
        return False
    groups = values.reshape(-1, n)
    return bool(np.all(np.sum(groups == 0, axis=1) >= m))


def _unique_per_channel(values: np.ndarray) -> int:
    if values.size == 0:
        return 0
    channels = values.reshape(values.shape[0], -1) if values.ndim > 1 else values[np.newaxis]
    return max(int(np.unique(row).size) for row in channels)


def _mentions(tensor: str, layer: str) -> bool:
    parts = [part for chunk in tensor.split(";") for part in chunk.split("/")]
    return layer in parts or any(
        part in {f"quant_{layer}", f"prune_low_magnitude_{layer}"} for part in parts
    )


def _tensor_values(model: TFLiteFile, tensor: Tensor) -> np.ndarray | None:
    dtype = _DTYPES.get(tensor.dtype)
    if dtype is None or tensor.shape is None or not model.is_constant(tensor) or tensor.sparse:
        return None
    data = model.buffer_data(tensor.buffer)
    return np.frombuffer(data, dtype=dtype).reshape(tensor.shape).copy()
