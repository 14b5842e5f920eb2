"""What a user should know about a quantized ``.tflite``, read from the file itself.

Every note is computed from the written flatbuffer (through the one reader), whichever
engine wrote it:

- **float islands**: ops that compute in float between DEQUANTIZE and QUANTIZE inside an
  integer model; each crossing converts a tensor twice and splits an accelerator's graph;
- **float I/O**: an integer model whose inputs or outputs stay float32 (it quantizes on
  entry and dequantizes on exit; integer-only targets need integer I/O);
- **XNNPACK**: ops with 16-bit activations run on LiteRT's reference kernels, because
  XNNPACK (LiteRT's default CPU delegate) has no 16-bit activation kernels.
"""

from __future__ import annotations

from collections import Counter

from tfcompress.models.tflite_file import TFLiteFile, read_tflite
from tfcompress.quantization.float_ops import FLOAT_DTYPES, describe_float_ops

_INTEGER_ACTIVATIONS = frozenset({"int8", "uint8", "int16"})


def float_islands(parsed: TFLiteFile) -> list[list[str]]:
    """Runs of float ops fed by DEQUANTIZE of an integer activation, in graph order."""
    graph = parsed.subgraphs[0]
    tensors = graph.tensors
    producer = {i: op for op in graph.operators for i in op.outputs}

    def float_activation(index: int) -> bool:
        tensor = tensors[index] if 0 <= index < len(tensors) else None
        return (
            tensor is not None and tensor.dtype in FLOAT_DTYPES and not parsed.is_constant(tensor)
        )

    island_of: dict[int, int] = {}
    islands: list[list[str]] = []
    for op in graph.operators:
        if op.opcode in ("QUANTIZE", "DEQUANTIZE") or not any(
            float_activation(i) for i in op.outputs
        ):
            continue
        sources = [producer.get(i) for i in op.inputs if float_activation(i)]
        fed_by_integer = any(
            p is not None
            and p.opcode == "DEQUANTIZE"
            and tensors[p.inputs[0]].dtype in _INTEGER_ACTIVATIONS
            and not parsed.is_constant(tensors[p.inputs[0]])
            for p in sources
        )
        joined = {island_of[p.index] for p in sources if p is not None and p.index in island_of}
        if joined:
            number = min(joined)
        elif fed_by_integer:
            number = len(islands)
            islands.append([])
        else:
            continue
        island_of[op.index] = number
        islands[number].append(op.opcode)
    return [island for island in islands if island]


def artifact_notes(content: bytes) -> tuple[str, ...]:
    """The notes of one quantized ``.tflite``, one sentence per finding (none for a float model)."""
    parsed = read_tflite(content)
    graph = parsed.subgraphs[0]
    tensors = graph.tensors
    activations = [t for t in tensors if not parsed.is_constant(t)]
    integer = {t.dtype for t in activations if t.dtype in _INTEGER_ACTIVATIONS}
    notes: list[str] = []
    if not integer:
        return ()
    islands = float_islands(parsed)
    if islands:
        ops = describe_float_ops([op for island in islands for op in island])
        notes.append(
            f"{len(islands)} float island(s): {ops} compute in float between DEQUANTIZE and "
            "QUANTIZE (each crossing converts a tensor twice and splits an accelerator's graph)"
        )
    float_io = [
        kind
        for kind, indices in (("input", graph.inputs), ("output", graph.outputs))
        if any(tensors[i].dtype in FLOAT_DTYPES for i in indices)
    ]
    if float_io:
        notes.append(
            f"float32 {' and '.join(float_io)}: the model quantizes on entry and dequantizes on "
            "exit; integer-only targets (Edge TPU, microcontrollers) need integer I/O "
            "(--input-type int8)"
        )
    producer = {i: op for op in graph.operators for i in op.outputs}
    wide = Counter(
        producer[t.index].opcode
        for t in activations
        if t.dtype == "int16" and t.index in producer and producer[t.index].opcode != "QUANTIZE"
    )
    if wide:
        notes.append(
            f"{sum(wide.values())} op(s) with int16 activations ("
            f"{describe_float_ops(list(wide.elements()))}) run on LiteRT's reference kernels: "
            "XNNPACK has no 16-bit activation kernels"
        )
    return tuple(notes)
