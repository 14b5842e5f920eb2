"""Size bounds of candidates not made yet, computed from files the search already has.

The search must know, before it spends a conversion and a gate on a candidate, whether the
candidate can still beat the best passing artifact or the float32 file
(:mod:`tfcompress.compression.search`). Two candidates have sizes that follow from files
made earlier in the same search, read with the one ``.tflite`` reader
(:func:`tfcompress.models.tflite_file.read_tflite`):

* **selective-k** (the int8 file with k ops kept float): the plain int8 file, with each kept
  op's constant inputs (weights, bias) stored as in the float32 file instead of as in the
  int8 file, and without their quantization parameters (a scale and a zero point, 12 bytes,
  per channel), less a little flatbuffer slack (16 bytes per tensor) and 1% of the int8 file
  (the selective file is made by another converter path, whose layout differs by a few
  hundred bytes): ``raw``. The selective file holds those float weights plus
  DEQUANTIZE/QUANTIZE ops. ``gzip`` is the int8 file's gzip bytes, less the kept ops' int8
  weight bytes (at least what they compressed to), plus the gzip bytes of their float32
  weights, less the same margin.
* **float16**: the float32 file with every float32 constant stored at half its bytes
  (``raw``), and its gzip bytes with the gzip bytes of those constants replaced by the gzip
  bytes of their float16 values (``gzip``).

``raw`` is a lower bound. ``gzip`` is a lower *estimate*: DEFLATE compresses the weights of
one layer against those of another only when they repeat, which trained weights do not;
``tests/test_troublemaker_models.py`` checks both stay below the sizes the search then measures.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from tfcompress.models.tflite_file import Operator, Subgraph, Tensor, TFLiteFile, read_tflite
from tfcompress.training.sparsity import gzip_size

SLACK_PER_TENSOR = 16  # flatbuffer alignment and offsets a rewritten tensor may save
#: The selective file is made by another path (calibrate-only + the MLIR quantizer), whose
#: layout differs from the plain int8 file's by a few hundred bytes (measured up to 0.5%).
LAYOUT_MARGIN = 0.01
QUANTIZATION_BYTES = 12  # one float32 scale and one int64 zero point per channel


@dataclass(frozen=True)
class SizeBound:
    """How small a candidate can be, before it is made.

    Attributes:
        raw: Its file cannot have fewer bytes.
        gzip: Its gzip bytes are estimated to be at least this (see the module).
        how: One line saying what the numbers were computed from.
    """

    raw: int
    gzip: int
    how: str


def selective_bound(int8: bytes, float32: bytes, nodes: Iterable[str]) -> SizeBound:
    """The size of the ``int8`` file once the ops writing ``nodes`` are kept float.

    ``int8`` and ``float32`` are the plain files of the model (same conversion path, same
    names); ``nodes`` output tensor names (``Recipe.float_nodes``). A node found in neither
    file adds nothing (the bound stays a bound).
    """
    quantized, reference = read_tflite(int8), read_tflite(float32)
    extra_raw = extra_gzip = 0
    found = 0
    for node in nodes:
        q_op, f_op = _producer(quantized, node), _producer(reference, node)
        if q_op is None or f_op is None:
            continue
        found += 1
        q_graph, f_graph = quantized.subgraphs[q_op[0]], reference.subgraphs[f_op[0]]
        q_consts = _constants(quantized, q_graph, q_op[1])
        f_consts = _constants(reference, f_graph, f_op[1])
        float_bytes = b"".join(bytes(reference.buffer_data(t.buffer)) for t in f_consts)
        int8_bytes = sum(quantized.buffers[t.buffer].size for t in q_consts)
        params = sum(
            QUANTIZATION_BYTES * len(t.quantization.scales)
            for t in (*q_consts, *(q_graph.tensors[i] for i in q_op[1].outputs))
            if t.quantization is not None
        )
        slack = SLACK_PER_TENSOR * (len(q_consts) + 2)
        extra_raw += len(float_bytes) - int8_bytes - params - slack
        extra_gzip += gzip_size(float_bytes) - int8_bytes - params - slack
    margin = round(LAYOUT_MARGIN * len(int8))
    return SizeBound(
        raw=max(len(int8) + extra_raw, len(int8)) - margin,
        gzip=max(gzip_size(int8) + extra_gzip - margin, 0),
        how=f"int8 {len(int8):,} B with the float32 weights of {found} kept op(s)",
    )


def float16_bound(float32: bytes) -> SizeBound:
    """The size of the float16 file of the model whose float32 file is ``float32``."""
    parsed = read_tflite(float32)
    chunks: list[bytes] = []
    seen: set[int] = set()
    for graph in parsed.subgraphs:
        for tensor in graph.tensors:
            if tensor.buffer in seen or tensor.dtype != "float32":
                continue
            if not parsed.is_constant(tensor):
                continue
            seen.add(tensor.buffer)
            chunks.append(bytes(parsed.buffer_data(tensor.buffer)))
    weights = b"".join(chunks)
    halves = np.frombuffer(weights[: len(weights) // 4 * 4], "<f4").astype("<f2").tobytes()
    return SizeBound(
        raw=len(float32) - (len(weights) - len(halves)),
        gzip=max(gzip_size(float32) - gzip_size(weights) + gzip_size(halves), 0),
        how=f"float32 {len(float32):,} B with its {len(weights):,} B of weights at half size",
    )


def _producer(model: TFLiteFile, name: str) -> tuple[int, Operator] | None:
    for index, graph in enumerate(model.subgraphs):
        for op in graph.operators:
            names = (graph.tensors[i].name for i in op.outputs if 0 <= i < len(graph.tensors))
            if name in names:
                return index, op
    return None


def _constants(model: TFLiteFile, graph: Subgraph, op: Operator) -> list[Tensor]:
    return [
        graph.tensors[i]
        for i in op.inputs
        if 0 <= i < len(graph.tensors) and model.is_constant(graph.tensors[i])
    ]
