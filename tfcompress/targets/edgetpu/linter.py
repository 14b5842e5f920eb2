"""Predict what edgetpu_compiler 16 does with a ``.tflite``, with no Edge TPU software.

The file is read with the project's one reader (:func:`read_tflite`, then its structural
validator); no native code runs. Every op of the main subgraph is checked against Coral's
model requirements and op table (:mod:`.checks`, :mod:`.ops`); the file as a whole against
what makes the compiler refuse it (:mod:`.versions`; dynamic-sized tensors). Then the split,
as docs/edgetpu.md ("Reading the report") describes it: from the first op the compiler can
map to the first it cannot, input QUANTIZE ops staying on the CPU before the segment.
"""

from __future__ import annotations

from typing import Any

from tfcompress.models.formats import read_tflite_input
from tfcompress.models.tflite_file import Subgraph, TFLiteFile
from tfcompress.models.tflite_options import read_options
from tfcompress.targets.edgetpu.checks import FIX_STATIC_SHAPE, is_input_quantizer, op_issues
from tfcompress.targets.edgetpu.findings import (
    ALREADY_COMPILED,
    DYNAMIC_SHAPE,
    MULTIPLE_SUBGRAPHS,
    NOT_FULLY_QUANTIZED,
    OP_VERSION,
    Effect,
    Finding,
    Issue,
)
from tfcompress.targets.edgetpu.report import EdgeTPUReport, OpPrediction
from tfcompress.targets.edgetpu.versions import (
    COMPILER_VERSION,
    GENERAL_WORKAROUNDS,
    VersionLimit,
    version_limit,
)
from tfcompress.targets.edgetpu.view import OpView

_COMPILED_OP = "CUSTOM:edgetpu-custom-op"
TFLITE_ONLY = (
    "the Edge TPU linter reads .tflite files: convert the model first with `tfcompress quantize "
    "MODEL --recipe int8 --input-type uint8 --data CALIB.npz --out M.tflite`"
)


def check(model: Any) -> EdgeTPUReport:
    """Lint a ``.tflite`` for the Edge TPU: which ops edgetpu_compiler 16 maps, and why not.

    ``model``: a ``.tflite`` path, its bytes, or a :class:`~tfcompress.models.TFLiteModel`.
    The prediction: ops and MACs on the TPU, where the graph splits, every finding with its
    rule, message and fix.

    Raises:
        ModelLoadError: Missing file, or bytes that are not a readable ``.tflite``.
        UnsupportedModelError: A model file of another format (``.onnx``, Keras...).
        InvalidArgumentTypeError: ``model`` is none of the accepted types.
    """
    _, source, parsed = read_tflite_input(model, TFLITE_ONLY)
    graph = parsed.subgraphs[0]
    options = read_options(parsed)
    views = [OpView(parsed, graph, op, options.get(op.index, {})) for op in graph.operators]
    issues = [op_issues(view) for view in views]
    start, end = _segment(views, issues)
    ops = tuple(
        OpPrediction(v.op.index, v.op.opcode, v.op.version, start <= v.op.index < end, _macs(v))
        for v in views
    )
    findings = [*_file_findings(parsed, graph, views)]
    findings += [
        Finding.of(x, v.op.opcode, v.op.index)
        for v, xs in zip(views, issues, strict=True)
        for x in xs
    ]
    findings.sort(key=lambda f: -1 if f.index is None else f.index)
    compiles = not any(f.effect is Effect.COMPILE_FAILS for f in findings)
    return EdgeTPUReport(source, compiles, ops, tuple(findings), end if end < len(views) else None)


def _segment(views: list[OpView], issues: list[list[Issue]]) -> tuple[int, int]:
    """``[start, end)`` of the ops the compiler is predicted to map.

    From the first op past the leading float-input QUANTIZE ops up to (not including) the
    first op with a ``cpu`` issue.
    """

    def input_quantizer_only(i: int) -> bool:
        only_input = all(x.rule == NOT_FULLY_QUANTIZED for x in issues[i])
        return is_input_quantizer(views[i]) and only_input

    start = next((i for i in range(len(views)) if not input_quantizer_only(i)), len(views))
    blocked = (
        i for i in range(start, len(views)) if any(x.effect is Effect.CPU for x in issues[i])
    )
    return start, next(blocked, len(views))


def _macs(view: OpView) -> int:
    from tfcompress.bench.size import tflite_op_macs

    def shape(index: int) -> list[int]:
        return list(view.shape(index)) if index >= 0 else []

    return tflite_op_macs(view.op.opcode, list(view.op.inputs), list(view.op.outputs), shape)


def _file_findings(model: TFLiteFile, graph: Subgraph, views: list[OpView]) -> list[Finding]:
    findings = [*_version_findings(views)]
    dynamic = _dynamic_shapes(graph, views)
    if dynamic is not None:
        findings.append(dynamic)
    if len(model.subgraphs) > 1:
        findings.append(
            Finding(
                None,
                None,
                MULTIPLE_SUBGRAPHS,
                f"the model has {len(model.subgraphs)} subgraphs (control flow); the linter and "
                "the compiler map ops of the main subgraph only",
                "unroll or remove the control flow (WHILE/IF) so the model is one graph",
                Effect.INFO,
                "compiler logs: 'More than one subgraph is not supported' (https://raw."
                "githubusercontent.com/rajansaini691/retinanet-model-tflite/master/"
                "tiny_yolo_edgetpu.log)",
            )
        )
    compiled = next((v for v in views if v.op.opcode == _COMPILED_OP), None)
    if compiled is not None:
        findings.append(
            Finding(
                compiled.op.opcode,
                compiled.op.index,
                ALREADY_COMPILED,
                "this model was already compiled by edgetpu_compiler: the ops inside the "
                "edgetpu-custom-op are not visible to the linter",
                "lint the .tflite you give to edgetpu_compiler, not its *_edgetpu.tflite output",
                Effect.INFO,
                "edgetpu_compiler writes the ops it maps as one edgetpu-custom-op",
            )
        )
    return findings


def _version_findings(views: list[OpView]) -> list[Finding]:
    seen: dict[tuple[str, int], tuple[VersionLimit, list[int]]] = {}
    for view in views:
        limit = version_limit(view.op.opcode)
        if limit is not None and view.op.version >= limit.refused_from:
            key = (view.op.opcode, view.op.version)
            seen.setdefault(key, (limit, []))[1].append(view.op.index)
    return [
        Finding(
            opcode,
            indices[0],
            OP_VERSION,
            f"the file's {opcode} is version {version} (shared by its {len(indices)} "
            f"{opcode} op(s)): edgetpu_compiler {COMPILER_VERSION} predates it and refuses "
            f"the whole file (refused from version {limit.refused_from} in public reports); "
            f"{limit.cause}",
            f"{limit.workaround}; in general: {'; or '.join(GENERAL_WORKAROUNDS)}",
            Effect.COMPILE_FAILS,
            limit.evidence,
        )
        for (opcode, version), (limit, indices) in seen.items()
    ]


def _dynamic_shapes(graph: Subgraph, views: list[OpView]) -> Finding | None:
    def dynamic(index: int) -> bool:
        signature = graph.tensors[index].shape_signature or ()
        return -1 in signature

    touched = [(v, i) for v in views for i in v.activations() if dynamic(i)]
    if not touched:
        return None
    first, _ = touched[0]
    inputs = [
        f"'{graph.tensors[i].name}' {list(graph.tensors[i].shape_signature or ())}"
        for i in graph.inputs
        if dynamic(i)
    ]
    named = f"input {', '.join(inputs)}" if inputs else f"'{graph.tensors[touched[0][1]].name}'"
    count = len({i for _, i in touched})
    return Finding(
        first.op.opcode,
        first.op.index,
        DYNAMIC_SHAPE,
        f"{count} tensor(s) have a dynamic size (-1 in the shape signature), starting with "
        f"{named}: edgetpu_compiler {COMPILER_VERSION} refuses such a file",
        FIX_STATIC_SHAPE,
        Effect.COMPILE_FAILS,
        "https://coral.ai/docs/edgetpu/models-intro/#model-requirements (no dynamic sizes); "
        "compiler 16 fails with 'Attempting to use a delegate that only supports static-sized "
        "tensors with a graph that has dynamic-sized tensors' "
        "(https://github.com/google-coral/edgetpu/issues/586, /issues/829)",
    )
