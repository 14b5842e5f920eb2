"""Make a shipped float ``.tflite`` fit for LiteRT Quantizer, or refuse it with the reason.

Files in the wild are not what today's converter writes. LiteRT Quantizer reads a model
naively, so before it sees one, this module rewrites what it would misread:

- **Old op codes**: files from before the 8-bit op-code limit was lifted store the op in
  ``deprecated_builtin_code`` only (``builtin_code`` reads 0, ADD). LiteRT takes the larger
  of the two, as :mod:`tfcompress.models.tflite_file` does; LiteRT Quantizer reads
  ``builtin_code`` alone, so every op would look like ADD and weights would be quantized as
  activations. Both fields are set to the real code.
- **No signature**: LiteRT Quantizer calibrates and validates through a signature. One
  (``serving_default``) is added from the subgraph's inputs and outputs, named after their
  tensors, as LiteRT's own interpreter names an unsigned model's tensors.
- **float16 weights behind DEQUANTIZE**: the converter's ``float16`` recipe stores weights
  as float16 and dequantizes them at load. Each such constant is widened to a float32
  constant and its DEQUANTIZE removed, so the ops see float weights they can quantize.
- **Duplicate or empty tensor names**: LiteRT Quantizer keys everything by tensor name;
  such names get a unique suffix.

Refused, each in one line: a model that is already quantized, and a model with several
subgraphs (control flow), which LiteRT Quantizer does not quantize. Custom ops are passed
through float (see :mod:`tfcompress.quantization.engines.litert_quantizer`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tfcompress.errors import UnsupportedModelError
from tfcompress.models.quantized import quantized_refusal, tflite_precision
from tfcompress.models.tflite_file import TFLiteFile, read_tflite

SIGNATURE_KEY = "serving_default"
_PLACEHOLDER_FOR_GREATER_OP_CODES = 127  # the deprecated field's "look in builtin_code"


@dataclass(frozen=True)
class PreparedModel:
    """The float ``.tflite`` LiteRT Quantizer is given, and what was changed to make it.

    ``content`` is the input's own bytes when nothing needed changing; ``changes`` one line
    per rewrite, for the result's notes; ``custom_ops`` are passed through float.
    """

    content: bytes
    signature_key: str
    changes: tuple[str, ...]
    custom_ops: tuple[str, ...]


def prepare_float_tflite(content: bytes, *, source: object = "<bytes>") -> PreparedModel:
    """Rewrite what LiteRT Quantizer would misread in a float ``.tflite`` (past its load checks).

    Raises:
        UnsupportedModelError: Already quantized, or several subgraphs.
    """
    parsed = read_tflite(content, source=source)
    _refuse(parsed, source)
    old_codes = [c.name for c in parsed.operator_codes if c.from_deprecated_field]
    float16 = _float16_dequantizes(parsed)
    names = [t.name for t in parsed.subgraphs[0].tensors]
    renames = _unique_names(names)
    needs_signature = not any(s.subgraph_index == 0 for s in parsed.signature_defs)
    key = next((s.key for s in parsed.signature_defs if s.subgraph_index == 0), SIGNATURE_KEY)
    if not (old_codes or float16 or renames or needs_signature):
        return PreparedModel(content, key, (), parsed.custom_ops)

    from tfcompress._compat.litert import flatbuffer_utils

    utils = flatbuffer_utils()
    model = utils.read_model_from_bytearray(bytearray(content))
    changes = []
    if old_codes:
        for code in model.operatorCodes:
            real = max(int(code.builtinCode), int(code.deprecatedBuiltinCode))
            code.builtinCode = real
            code.deprecatedBuiltinCode = min(real, _PLACEHOLDER_FOR_GREATER_OP_CODES)
        changes.append(
            "read op codes from the old deprecated_builtin_code field, as LiteRT does "
            f"({', '.join(sorted(set(old_codes)))})"
        )
    graph = model.subgraphs[0]
    for index, name in renames.items():
        graph.tensors[index].name = name.encode("utf-8")
    if renames:
        changes.append(f"renamed {len(renames)} tensor(s) whose names were empty or repeated")
    if float16:
        widened = _widen_float16(model, float16)
        changes.append(
            f"widened {widened} float16 weight(s) to float32 and removed their DEQUANTIZE ops"
        )
    if needs_signature:
        changes.append(_add_signature(model))
    rewritten = bytes(utils.convert_object_to_bytearray(model))
    read_tflite(rewritten, source=source).validate(source=source)
    return PreparedModel(rewritten, key, tuple(changes), parsed.custom_ops)


def _refuse(parsed: TFLiteFile, source: object) -> None:
    if not parsed.subgraphs:
        raise UnsupportedModelError(f"{source}: the .tflite has no subgraph to quantize.")
    if len(parsed.subgraphs) > 1:
        raise UnsupportedModelError(
            f"{source} has {len(parsed.subgraphs)} subgraphs (control flow such as WHILE or "
            "IF); LiteRT Quantizer quantizes single-graph models only: quantize the source "
            "model with --engine converter, or export it without control flow."
        )
    precision = tflite_precision(parsed.content)
    if precision is not None:
        raise UnsupportedModelError(quantized_refusal(str(source), precision, tflite=True))


def _float16_dequantizes(parsed: TFLiteFile) -> list[int]:
    """Indices of the DEQUANTIZE ops that widen a constant float16 tensor to float32."""
    graph = parsed.subgraphs[0]
    found = []
    for op in graph.operators:
        if op.opcode != "DEQUANTIZE" or len(op.inputs) != 1 or len(op.outputs) != 1:
            continue
        source, target = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        if (
            source.dtype == "float16"
            and target.dtype == "float32"
            and parsed.is_constant(source)
            and op.outputs[0] not in graph.outputs
        ):
            found.append(op.index)
    return found


def _widen_float16(model: Any, ops: list[int]) -> int:
    graph = model.subgraphs[0]
    schema = _schema()
    removed = set(ops)
    for index in ops:
        op = graph.operators[index]
        source, target = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        data = np.asarray(model.buffers[source.buffer].data, np.uint8).tobytes()
        widened = np.frombuffer(data, "<f2").astype("<f4")
        buffer = schema.BufferT()
        buffer.data = np.frombuffer(widened.tobytes(), np.uint8)
        model.buffers.append(buffer)
        target.buffer = len(model.buffers) - 1
    kept_ops = [op for k, op in enumerate(graph.operators) if k not in removed]
    used = {i for op in kept_ops for i in op.inputs}
    dropped = {graph.operators[k].inputs[0] for k in ops} - used
    for index in dropped:  # the float16 copy is gone with its DEQUANTIZE
        model.buffers[graph.tensors[index].buffer].data = None
    graph.operators = kept_ops
    _drop_tensors(model, dropped)
    return len(ops)


def _drop_tensors(model: Any, dropped: set[int]) -> None:
    """Remove tensors no op reads any more, renumbering every reference to the others.

    An orphan tensor without data would be a variable the interpreter allocates and
    LiteRT Quantizer's calibrator tries to read.
    """
    graph = model.subgraphs[0]
    new_index, kept = {}, []
    for old, tensor in enumerate(graph.tensors):
        if old not in dropped:
            new_index[old] = len(kept)
            kept.append(tensor)
    graph.tensors = kept

    def remap(indices: Any) -> list[int]:
        return [new_index[int(i)] if int(i) >= 0 else int(i) for i in indices]

    for op in graph.operators:
        op.inputs = remap(op.inputs)
        op.outputs = remap(op.outputs)
        if op.intermediates is not None and len(op.intermediates):
            op.intermediates = remap(op.intermediates)
    graph.inputs, graph.outputs = remap(graph.inputs), remap(graph.outputs)
    for signature in model.signatureDefs or []:
        if signature.subgraphIndex == 0:
            for entry in [*(signature.inputs or []), *(signature.outputs or [])]:
                entry.tensorIndex = new_index[int(entry.tensorIndex)]


def _unique_names(names: list[str]) -> dict[int, str]:
    """New names for the tensors whose name is empty or already taken."""
    seen: set[str] = set()
    renames = {}
    for index, name in enumerate(names):
        if name and name not in seen:
            seen.add(name)
            continue
        fresh = f"{name or 'tensor'}_{index}"
        while fresh in seen or fresh in names:
            fresh += "_"
        seen.add(fresh)
        renames[index] = fresh
    return renames


def _add_signature(model: Any) -> str:
    schema = _schema()
    graph = model.subgraphs[0]

    def tensor_map(index: int) -> Any:
        entry = schema.TensorMapT()
        entry.name = graph.tensors[index].name
        entry.tensorIndex = int(index)
        return entry

    signature = schema.SignatureDefT()
    signature.signatureKey = SIGNATURE_KEY.encode("utf-8")
    signature.subgraphIndex = 0
    signature.inputs = [tensor_map(i) for i in graph.inputs]
    signature.outputs = [tensor_map(i) for i in graph.outputs]
    model.signatureDefs = [*(model.signatureDefs or []), signature]
    return (
        f"added signature {SIGNATURE_KEY} from the graph's {len(graph.inputs)} input(s) and "
        f"{len(graph.outputs)} output(s) (LiteRT Quantizer needs one)"
    )


def _schema() -> Any:
    from tfcompress._compat.litert import flatbuffer_utils

    return flatbuffer_utils().schema_fb
