"""Structural checks of a parsed ``.tflite``, run before any native runtime sees the bytes.

LiteRT's C++ verifier checks that the flatbuffer is well formed, not that what it says makes
sense: a NaN quantization scale, an operator input past the tensor list or a buffer that
ends beyond the file reach kernels that trust them (and crash the process, as a fuzz
campaign showed). Each check here names the tensor or operator and what is wrong with it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from tfcompress.errors import ModelLoadError
from tfcompress.models.tflite_file import Operator, SignatureDef, Subgraph, Tensor, TFLiteFile

# Valid zero points per storage type (int16 activations are symmetric: 0, but the schema
# allows any int16). Types not listed carry no zero-point constraint we can check.
_ZERO_POINT_RANGE = {
    "int8": (-128, 127),
    "uint8": (0, 255),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int4": (-8, 7),
    "uint4": (0, 15),
    "int2": (-2, 1),
}
# Bytes per element of the types whose constant data has a fixed size (strings, sub-byte
# and resource types are packed or variable and left out).
_ELEMENT_BYTES = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float64": 8,
    "int64": 8,
    "uint64": 8,
    "int32": 4,
    "uint32": 4,
    "int16": 2,
    "uint16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "complex64": 8,
    "complex128": 16,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}
_MAX_TENSOR_BYTES = 2**62  # beyond this a size overflows the runtime's 64-bit arithmetic
_SUFFIX = (
    "the .tflite file is truncated or corrupt (or crafted); re-export it from the source model"
)


def validate(model: TFLiteFile, *, source: object = "<bytes>") -> None:
    """Check that every index, shape, quantization parameter and buffer of ``model`` is sane.

    Raises:
        ModelLoadError: The first problem found (and how many more there are).
    """
    problems = _problems(model)
    first = next(problems, None)
    if first is not None:
        others = sum(1 for _ in problems)  # counted, not kept: a crafted file may have millions
        more = f" (and {others} more problem(s))" if others else ""
        raise ModelLoadError(f"{source}: {first}{more}; {_SUFFIX}.")


def _problems(model: TFLiteFile) -> Iterator[str]:
    if not model.subgraphs:
        yield "the model has no subgraph"
    elif not model.subgraphs[0].inputs:
        # Its ops would read tensors nothing writes; every command needs an input to feed.
        yield "its main subgraph lists no input tensors"
    for buffer in model.buffers:
        if buffer.offset + buffer.size > model.size_bytes:
            yield (
                f"buffer {buffer.index} spans bytes {buffer.offset}..{buffer.offset + buffer.size}"
                f" but the file has {model.size_bytes}"
            )
    for name, index in model.metadata:
        if not 0 <= index < len(model.buffers):
            yield f"metadata {_shown(name)} points to buffer {index} of {len(model.buffers)}"
    for signature in model.signature_defs:
        yield from _signature_problems(model, signature)
    for graph in model.subgraphs:
        where = f"subgraph {graph.index}"
        for role, indices in (("input", graph.inputs), ("output", graph.outputs)):
            for index in indices:
                if not 0 <= index < len(graph.tensors):
                    yield f"{where}: {role} tensor {index} is not one of its {len(graph.tensors)}"
                elif not graph.tensors[index].name_is_utf8:
                    # Other names are only labels; these the runtime's Python API decodes.
                    name = _shown(graph.tensors[index].name)
                    yield f"{where}: {role} tensor {index} has a name that is not UTF-8 ({name})"
        for op in graph.operators:
            yield from _operator_problems(model, graph, op)
        for tensor in graph.tensors:
            yield from _tensor_problems(model, tensor, f"{where}: tensor {_label(tensor)}")


def _signature_problems(model: TFLiteFile, signature: SignatureDef) -> Iterator[str]:
    where = f"signature {_shown(signature.key)}"
    if not signature.names_are_utf8:
        yield f"{where} has names that are not UTF-8"
    if not 0 <= signature.subgraph_index < len(model.subgraphs):
        yield f"{where} names subgraph {signature.subgraph_index} of {len(model.subgraphs)}"
        return
    count = len(model.subgraphs[signature.subgraph_index].tensors)
    for name, index in (*signature.inputs, *signature.outputs):
        if not 0 <= index < count:
            yield f"{where}: {_shown(name)} names tensor {index} of {count}"


def _operator_problems(model: TFLiteFile, graph: Subgraph, op: Operator) -> Iterator[str]:
    where = f"subgraph {graph.index}: operator {op.index} ({_shown(op.opcode)})"
    if not 0 <= op.opcode_index < len(model.operator_codes):
        yield (
            f"{where} uses opcode {op.opcode_index} but the model has {len(model.operator_codes)}"
        )
    count = len(graph.tensors)
    for role, indices in (
        ("input", op.inputs),
        ("output", op.outputs),
        ("intermediate", op.intermediates),
    ):
        for index in indices:
            if not -1 <= index < count:
                yield f"{where}: {role} tensor {index} is not one of the {count} tensors"
    if op.custom_options is not None and sum(op.custom_options) > model.size_bytes:
        offset, size = op.custom_options
        yield f"{where}: its options span bytes {offset}..{offset + size}, past the file's end"


def _tensor_problems(model: TFLiteFile, tensor: Tensor, where: str) -> Iterator[str]:
    if tensor.dtype.startswith("unknown"):
        yield f"{where} has an unknown type ({tensor.type_code})"
    if not 0 <= tensor.buffer < len(model.buffers):
        yield f"{where} uses buffer {tensor.buffer} but the model has {len(model.buffers)}"
    shape, signature = tensor.shape or (), tensor.shape_signature
    if any(d < 0 for d in shape):
        yield f"{where} has a negative dimension in its shape {list(shape)}"
        return
    if signature is not None and not _fits(signature, tensor.shape):
        yield f"{where} has shape signature {list(signature)} that does not fit shape {list(shape)}"
    width = _ELEMENT_BYTES.get(tensor.dtype, 1)
    if math.prod(shape) * width > _MAX_TENSOR_BYTES:
        yield f"{where} has shape {list(shape)}: more bytes than any machine can hold"
        return
    yield from _quantization_problems(tensor, where)
    yield from _constant_problems(model, tensor, where)


def _fits(signature: tuple[int, ...], shape: tuple[int, ...] | None) -> bool:
    """A signature holds the shape's dimensions, with -1 where the shape may change."""
    if any(d < -1 for d in signature):
        return False
    if shape is None:
        return True
    if len(signature) != len(shape):
        return False
    return all(s in (-1, d) for s, d in zip(signature, shape, strict=True))


def _quantization_problems(tensor: Tensor, where: str) -> Iterator[str]:
    params = tensor.quantization
    if params is None or not (params.scales or params.zero_points):
        return
    bad = [s for s in params.scales if not (math.isfinite(s) and s > 0)]
    if bad:
        yield f"{where} has quantization scale {bad[0]!r}; scales must be finite and positive"
    if len(params.scales) != len(params.zero_points):
        yield (
            f"{where} has {len(params.scales)} quantization scale(s) but "
            f"{len(params.zero_points)} zero point(s)"
        )
    low, high = _ZERO_POINT_RANGE.get(tensor.dtype, (-(2**63), 2**63 - 1))
    outside = [z for z in params.zero_points if not low <= z <= high]
    if outside:
        yield f"{where} ({tensor.dtype}) has zero point {outside[0]}, outside {low}..{high}"
    dimension, rank = params.quantized_dimension, len(tensor.shape or ())
    if dimension < 0 or (len(params.scales) > 1 and tensor.shape is not None and dimension >= rank):
        yield f"{where} is quantized along dimension {dimension} but has rank {rank}"
    elif len(params.scales) > 1 and tensor.shape is not None:
        channels = tensor.shape[dimension]
        if channels != len(params.scales):
            yield (
                f"{where} has {len(params.scales)} per-channel scales for {channels} channels "
                f"along dimension {dimension}"
            )


def _constant_problems(model: TFLiteFile, tensor: Tensor, where: str) -> Iterator[str]:
    width = _ELEMENT_BYTES.get(tensor.dtype)
    if width is None or tensor.sparse or tensor.shape is None or not model.is_constant(tensor):
        return  # packed, variable-size or compressed data, or no known shape to compare with
    if tensor.shape_signature is not None and -1 in tensor.shape_signature:
        return
    expected = math.prod(tensor.shape) * width
    held = model.buffers[tensor.buffer].size
    if held != expected:
        yield (
            f"{where} holds {held} bytes of constant data but its shape {list(tensor.shape)} "
            f"of {tensor.dtype} needs {expected}"
        )


def _label(tensor: Tensor) -> str:
    return f"{tensor.index} ({_shown(tensor.name)})" if tensor.name else str(tensor.index)


def _shown(text: str, limit: int = 60) -> str:
    """Quote a name from the file for a one-line message: printable, and not too long."""
    clean = "".join(c if c.isprintable() else "?" for c in text)
    return repr(clean if len(clean) <= limit else clean[:limit] + "...")
