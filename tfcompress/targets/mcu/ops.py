"""Which ops TFLM runs: its own op resolver answers, every op code in one pass.

TFLM looks every operator's kernel up before it prepares any, in operator order, and stops
at the first it lacks, printing ``Didn't find op for builtin opcode 'SIGN'`` (a custom op:
``Failed to get registration from op code CUSTOM``). To name every op it cannot run, not
only the first, each distinct op code of the model is looked up on its own, in one child
process, in a two-op model made there (:func:`tfcompress.targets.mcu._tflm.kernels`): one
pass over the codes, never a reload of the model per missing op.

Also read here, from the file alone: which ops compute in float or with int16 activations
(a microcontroller deployment wants full int8: CMSIS-NN and ESP-NN accelerate int8 only).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tfcompress.targets.mcu.findings import Finding

_MISSING = (
    re.compile(r"Didn't find op for builtin opcode '([A-Z0-9_]+)'"),
    re.compile(r"Failed to get registration from op code ([A-Z0-9_]+)"),
)
_REFUSED = re.compile(r"Node (\S+) \(number (\d+)\) failed to (prepare|invoke)")
# LiteRT's words for the same: ``Node number 0 (CONV_2D) failed to prepare``.
_LITERT_REFUSED = re.compile(r"Node number (\d+) \((\S+)\) failed to (prepare|invoke)")
# TFLM's words when the arena is too small (any of its allocators).
_SHORT = (
    "Failed to resize buffer",
    "Failed to allocate tail memory",
    "Failed to allocate temp memory",
    "Failed to allocate memory",
    "bytes required",
)
_QUANTIZED = {"int8", "uint8", "int16"}
#: How to get a full-int8 file: from the model the .tflite came from (a .tflite itself goes
#: through LiteRT Quantizer, which cannot apply the converter's settings TFLM needs).
REQUANTIZE = (
    "quantize the Keras model or SavedModel this .tflite came from, `tfcompress quantize "
    "MODEL.keras --target mcu --data CALIB.npz` (int8 input and output, no float fallback)"
)


# What to do about ops TFLM has no kernel for, where there is something better to say than
# the general advice (keys: TFLite builtin names).
_ADVICE = {
    "TOPK_V2": "take the top k in firmware from the model's scores (for k=1, ARG_MAX runs)",
    "NON_MAX_SUPPRESSION_V4": "use the TFLite_Detection_PostProcess custom op, which TFLM "
    "ships, or suppress boxes in firmware",
    "NON_MAX_SUPPRESSION_V5": "use the TFLite_Detection_PostProcess custom op, which TFLM "
    "ships, or suppress boxes in firmware",
    "WHERE": "its output size depends on the data, and TFLM plans every tensor ahead: "
    "compute it in firmware",
    "UNIQUE": "its output size depends on the data, and TFLM plans every tensor ahead: "
    "compute it in firmware",
    "RANGE": "its output size depends on the data: make the range a constant",
    "SIGN": "replace x -> sign(x) by a comparison the model already has (GREATER/LESS with "
    "SELECT_V2), or apply it in firmware",
    "ATAN2": "compute it in firmware on the model's outputs",
    "RANDOM_UNIFORM": "random ops belong to training: export the inference graph",
    "RANDOM_STANDARD_NORMAL": "random ops belong to training: export the inference graph",
    "MULTINOMIAL": "sample in firmware from the model's probabilities",
}
_GENERAL_FIX = (
    "replace the layer that makes it with ops TFLM runs, move it out of the model into "
    "firmware, or register your own kernel in the firmware's op resolver"
)


@dataclass(frozen=True)
class OpRef:
    """One operator of the model: where it is and what it is.

    Attributes:
        subgraph: Its subgraph (0 is the main one).
        index: Its index in that subgraph (what TFLM and Netron call it).
        name: Its builtin name (``CONV_2D``), ``CUSTOM:<code>`` for a custom op.
    """

    subgraph: int
    index: int
    opcode_index: int
    name: str


def op_refs(parsed: Any) -> list[OpRef]:
    """Every operator of a parsed ``.tflite``, in the order TFLM looks their kernels up."""
    return [
        OpRef(graph.index, op.index, op.opcode_index, op.opcode)
        for graph in parsed.subgraphs
        for op in graph.operators
    ]


def missing_op(log: str) -> str | None:
    """The op TFLM found no kernel for (its name as TFLM prints it), from its log."""
    for pattern in _MISSING:
        found = pattern.search(log)
        if found:
            return found.group(1)
    return None


def op_refusal(log: str) -> tuple[str, int, str] | None:
    """``(op, index, stage)`` of the op TFLM could not prepare or invoke, from its log."""
    found = _REFUSED.search(log)
    if found is not None:
        return found.group(1), int(found.group(2)), found.group(3)
    found = _LITERT_REFUSED.search(log)
    return None if found is None else (found.group(2), int(found.group(1)), found.group(3))


def arena_too_small(log: str) -> bool:
    """Whether TFLM's log says the arena ran out (rather than refusing an op)."""
    return any(words in log for words in _SHORT)


def tflm_words(log: str, limit: int = 3) -> str:
    """TFLM's first few distinct message lines, joined: what it said, for a finding."""
    seen: list[str] = []
    for line in log.splitlines():
        text = line.strip()
        if text and not text.startswith("[RecordingMicroAllocator]") and text not in seen:
            seen.append(text)
        if len(seen) >= limit:
            break
    return "; ".join(seen)


def missing_finding(name: str, refs: list[OpRef]) -> Finding:
    """The finding for an op name TFLM has no kernel for, naming every op that uses it."""
    where = ", ".join(f"{r.index}" if r.subgraph == 0 else f"{r.subgraph}:{r.index}" for r in refs)
    first = refs[0]
    if name.startswith("CUSTOM:"):
        code = name.split(":", 1)[1]
        fix = (
            f"register a kernel for the custom op {code!r} in the firmware "
            "(MicroMutableOpResolver::AddCustom), or rebuild the model without it"
        )
        if code.startswith("Flex"):
            fix = (
                "TensorFlow ops (Flex) never run on TFLM: convert with builtin ops only "
                "(no SELECT_TF_OPS) and replace the layer that needs them"
            )
    else:
        fix = _ADVICE.get(name, _GENERAL_FIX)
    return Finding(
        rule="no_kernel",
        message=f"TFLM has no kernel for {name} (op{'s' if len(refs) > 1 else ''} {where})",
        fix=fix,
        op=name,
        index=first.index,
        subgraph=first.subgraph,
        indices=tuple(r.index for r in refs),
    )


def readable(content: bytes, source: str) -> None:
    """Refuse a file whose tables TFLM's Python side cannot read (it unpacks every table).

    TFLM's host interpreter unpacks the whole model with the flatbuffers schema before its
    C++ code sees it, and the SOFTMAX check here reads op options: a table offset past the
    file's end (an op's options, a vector) would fail there. The same unpack runs here
    first, in Python, so such a file is one line.

    Raises:
        ModelLoadError: A table or vector of the file lies outside it.
    """
    import struct

    from tfcompress._compat.tflm import tflm_schema
    from tfcompress.errors import ModelLoadError

    schema = tflm_schema()
    try:
        schema.ModelT.InitFromObj(schema.Model.GetRootAs(bytearray(content), 0))
    except (struct.error, IndexError, ValueError, TypeError, OverflowError) as error:
        words = " ".join(str(error).split())[:160]
        raise ModelLoadError(
            f"{source}: a table of the .tflite lies outside the file ({words}); the file is "
            "corrupt or truncated: re-export it."
        ) from error


def softmax_findings(content: bytes, parsed: Any) -> list[Finding]:
    """Int8 SOFTMAX ops whose input scale TFLM's kernel cannot take (it aborts in prepare).

    TFLM's int8 softmax rescales its input by ``beta * scale * 2**26`` with
    ``QuantizeMultiplierGreaterThanOne``, which aborts the process (SIGABRT) when that is not
    above 1: an input scale at or below ``2**-26`` (1.5e-8) for beta 1. LiteRT runs such a
    model; TFLM dies loading it. It happens when the logits hardly vary over the calibration
    data (an untrained or collapsed model).
    """
    from tfcompress._compat.tflm import tflm_schema

    found: list[Finding] = []
    schema = None
    for graph in parsed.subgraphs:
        for op in graph.operators:
            if op.opcode != "SOFTMAX" or not op.inputs:
                continue
            tensor = graph.tensors[op.inputs[0]]
            params = tensor.quantization
            if tensor.dtype not in _QUANTIZED or params is None or not params.scales:
                continue
            if schema is None:
                schema = tflm_schema()
                model = schema.Model.GetRootAs(bytearray(content), 0)
            beta = _softmax_beta(schema, model, graph.index, op.index)
            scale = float(params.scales[0])
            if beta * scale * 2.0**26 > 1.0:
                continue
            found.append(
                Finding(
                    rule="refused",
                    message=f"SOFTMAX (op {op.index}): its input scale {scale:.3g} (beta "
                    f"{beta:g}) is too small for TFLM's int8 softmax, which aborts in prepare "
                    "when beta x scale x 2^26 <= 1 (QuantizeMultiplierGreaterThanOne)",
                    fix="the logits hardly varied over the calibration data: calibrate on real "
                    "samples of a trained model, or end the model before the softmax and "
                    "take the arg max in firmware",
                    op="SOFTMAX",
                    index=op.index,
                    subgraph=graph.index,
                )
            )
    return found


def _softmax_beta(schema: Any, model: Any, subgraph: int, index: int) -> float:
    operator = model.Subgraphs(subgraph).Operators(index)
    table = operator.BuiltinOptions()
    if table is None:
        return 1.0
    options = schema.SoftmaxOptions()
    options.Init(table.Bytes, table.Pos)
    return float(options.Beta())


def precision_findings(parsed: Any, refs: list[OpRef]) -> tuple[str, list[Finding]]:
    """The model's precision (``int8``, ``float32``, ``mixed``, ``int16x8``) and what to do.

    An op computes in float when a tensor it reads or writes (not a constant) is float;
    QUANTIZE/DEQUANTIZE at a float model edge count too: on the board, the float input is
    the firmware's to make, and every float op runs on reference kernels.
    """
    float_ops: list[OpRef] = []
    int16_ops: list[OpRef] = []
    integer_ops = 0
    for graph in parsed.subgraphs:
        for op in graph.operators:
            kinds = {
                graph.tensors[i].dtype
                for i in (*op.inputs, *op.outputs)
                if 0 <= i < len(graph.tensors) and not parsed.is_constant(graph.tensors[i])
            }
            ref = OpRef(graph.index, op.index, op.opcode_index, op.opcode)
            if kinds & {"float32", "float16", "float64"}:
                float_ops.append(ref)
            elif "int16" in kinds and op.opcode not in {"CAST"}:
                int16_ops.append(ref)
            elif kinds & {"int8", "uint8"}:
                integer_ops += 1
    findings: list[Finding] = []
    if float_ops and not integer_ops and not int16_ops:
        precision = "float32"
        findings.append(
            Finding(
                rule="float_model",
                message=f"a float model: all {len(float_ops)} ops compute in float",
                fix=f"microcontroller deployment needs full int8: {REQUANTIZE}",
            )
        )
    elif float_ops:
        precision = "mixed"
        names = ", ".join(f"{r.name} ({r.index})" for r in float_ops[:6])
        more = f" and {len(float_ops) - 6} more" if len(float_ops) > 6 else ""
        findings.append(
            Finding(
                rule="float_ops",
                message=f"{len(float_ops)} op(s) compute in float: {names}{more}",
                fix="float ops run on TFLM's slow reference kernels, and a float input or "
                f"output is the firmware's to convert: {REQUANTIZE}",
                op=float_ops[0].name,
                index=float_ops[0].index,
                subgraph=float_ops[0].subgraph,
                indices=tuple(r.index for r in float_ops),
            )
        )
    elif int16_ops:
        precision = "int16x8"
        findings.append(
            Finding(
                rule="int16",
                message=f"{len(int16_ops)} op(s) use int16 activations (int16x8)",
                fix="int16x8 runs where TFLM and your board's kernels have int16 variants; "
                "the int8 recipe is the common path",
                op=int16_ops[0].name,
                index=int16_ops[0].index,
                subgraph=int16_ops[0].subgraph,
            )
        )
    else:
        precision = "int8"
    return precision, findings
