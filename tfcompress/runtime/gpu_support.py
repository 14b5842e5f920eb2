"""What LiteRT's GPU accelerator takes, read from a ``.tflite``: the static verdict.

Where no GPU answers, this is how tfcompress judges whether a file would run whole on one
(``quantize --target gpu``'s check, ``tfcompress gpu``); where a GPU refuses a model, the
``gpu`` backend names the causes from it. It reads the file only (no native code, no numpy).

The three verdicts (whole, falls back, refused) are docs/gpu.md's; the op rules are
:mod:`tfcompress.runtime.gpu_rules`'. Which tensors are sized at run time (the whole graph
refused) follows TFLite's kernels: SHAPE's output, and CONCATENATION, GATHER, MUL, RANGE,
RESHAPE, STRIDED_SLICE, TILE and the reductions of such values, are computed when tensors
are allocated; an op whose output size depends on any other computed value (a RESHAPE's new
shape, a SLICE's size) makes it dynamic.

Each refused op names the Keras layer it came from (the converter's tensor names), a change
that works, and, when it is refused only for a tensor another refused op made (the rank-5
output of a Conv3D), that op: the fix names the cause, not what follows it. Reductions of
squares over long rows (LayerNorm and RMSNorm variances) are flagged: in float16 their sum
overflows.
"""

from __future__ import annotations

import math
import struct
from dataclasses import asdict, dataclass
from typing import Any

from tfcompress.models.tflite_file import Operator, Subgraph, TFLiteFile, read_tflite
from tfcompress.models.tflite_options import read_options
from tfcompress.runtime.gpu_rules import LITERT_SOURCE, View, refusal

#: What makes a dynamic-batch model whole for the GPU (the target's rule and its flag).
STATIC_BATCH_FIX = (
    "make it with `tfcompress quantize MODEL --target gpu` (a static batch: --static-batch 1, or N)"
)
WHOLE, FALLS_BACK, REFUSED = "whole", "falls back", "refused"
_FP16_MAX = 65504.0
_FP16_ROW = 256  # a sum of this many squares overflows float16 once |x| averages 16
# Output computed when tensors are allocated, when every input is (tflite/kernels).
_AT_PREPARE = frozenset({"CONCATENATION", "GATHER", "MUL", "RANGE", "RESHAPE", "STRIDED_SLICE",
                         "TILE", "BROADCAST_ARGS", "SUM", "REDUCE_PROD", "REDUCE_MAX",
                         "REDUCE_MIN", "MEAN"})  # fmt: skip
# op -> inputs its output's size is read from (SetTensorToDynamic when one is computed).
_SIZED_BY: dict[str, tuple[int, ...]] = {
    "RESHAPE": (1,), "SLICE": (1, 2), "STRIDED_SLICE": (1, 2, 3), "TILE": (1,), "PAD": (1,),
    "PADV2": (1,), "MIRROR_PAD": (1,), "TRANSPOSE": (1,), "BROADCAST_TO": (1,),
    "EXPAND_DIMS": (1,), "FILL": (0,), "RANGE": (0, 1, 2), "ONE_HOT": (1,), "TOPK_V2": (1,),
    "RESIZE_BILINEAR": (1,), "RESIZE_NEAREST_NEIGHBOR": (1,), "SPLIT": (0,),
    "SPLIT_V": (1, 2), "MEAN": (1,), "SUM": (1,), "REDUCE_PROD": (1,), "REDUCE_MAX": (1,),
    "REDUCE_MIN": (1,), "REDUCE_ANY": (1,), "REDUCE_ALL": (1,), "ARG_MAX": (1,),
    "ARG_MIN": (1,), "SPACE_TO_BATCH_ND": (1, 2), "BATCH_TO_SPACE_ND": (1, 2),
    "TRANSPOSE_CONV": (0,), "SCATTER_ND": (2,), "SPARSE_TO_DENSE": (1,),
}  # fmt: skip
_ALWAYS_DYNAMIC = frozenset({"WHERE", "UNIQUE", "NON_MAX_SUPPRESSION_V4",
                             "NON_MAX_SUPPRESSION_V5"})  # fmt: skip
_SQUARES = frozenset({"SQUARE", "SQUARED_DIFFERENCE"})
_NO_LAYER = ("serving_default", "StatefulPartitionedCall", "PartitionedCall", "arith.constant")


@dataclass(frozen=True)
class CpuOp:
    """An op LiteRT's GPU accelerator leaves to the CPU, and why.

    Attributes:
        index: The op's index in the main subgraph.
        op: Its type (``SHAPE``; ``CUSTOM:name`` for a custom op).
        reason: Which rule refuses it.
        from_dynamic_shape: It computes (or consumes) a shape at run time: a static batch
            folds it away.
        layer: The Keras layer it came from (the converter's name scope), None if unnamed.
        fix: A change that makes the GPU take it.
        follows: The refused op whose tensor is the only cause (its fix is this op's), or None.
    """

    index: int
    op: str
    reason: str
    from_dynamic_shape: bool = False
    version: int = 1
    layer: str | None = None
    fix: str = ""
    follows: int | None = None

    def __str__(self) -> str:
        where = f"op {self.index}" + (f", layer {self.layer}" if self.layer else "")
        return f"{self.op} ({where}): {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return asdict(self)


@dataclass(frozen=True)
class DynamicTensor:
    """A tensor sized at run time: LiteRT refuses the GPU for the whole graph.

    Attributes:
        index: The op that makes it.
        layer: The Keras layer, None if unnamed.
        from_dynamic_batch: Its size comes from the input's dynamic batch (a static batch
            folds it away).
    """

    index: int
    op: str
    tensor: str
    layer: str | None
    from_dynamic_batch: bool

    def __str__(self) -> str:
        where = f"op {self.index}" + (f", layer {self.layer}" if self.layer else "")
        return f"{self.tensor!r} from {self.op} ({where}) is sized at run time"

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return asdict(self)


@dataclass(frozen=True)
class Fp16Risk:
    """A sum of squares over a long row (a LayerNorm or RMSNorm variance): float16 overflows.

    Attributes:
        index: The reduction op.
        op: ``MEAN`` or ``SUM``.
        layer: The Keras layer, None if unnamed.
        elements: Squares summed per output value.
        file_float16: The file stores float16 weights (else: at risk where the GPU
            computes in float16).
    """

    index: int
    op: str
    layer: str | None
    elements: int
    file_float16: bool

    @property
    def bound(self) -> float:
        """The mean magnitude of the squared values above which the float16 sum overflows."""
        return math.sqrt(_FP16_MAX / self.elements)

    def __str__(self) -> str:
        where = f"op {self.index}" + (f", layer {self.layer}" if self.layer else "")
        when = "" if self.file_float16 else " where the GPU computes in float16"
        return (
            f"{self.op} ({where}) sums {self.elements} squares per row: float16 (max 65504) "
            f"overflows{when} once the values average |x| > {self.bound:.3g}; compare against "
            "the CPU on real inputs (`tfcompress gpu MODEL --data ...`), or keep this layer "
            "float32"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return {**asdict(self), "bound": self.bound}


@dataclass(frozen=True)
class GpuSupport:
    """The static verdict: whole, falls back (ops on the CPU) or refused (the whole graph).

    Attributes:
        cpu_ops: The ops the accelerator refuses (they run on the CPU).
        dynamic_inputs: ``(name, shape signature)`` of each input with a dynamic dimension.
        dynamic_tensors: Tensors sized at run time: the whole graph is refused.
        fp16_risks: Reductions whose float16 sum can overflow.
        precision: ``float16`` (float16 weights), ``int8`` or ``float32``.
    """

    ops_total: int
    cpu_ops: tuple[CpuOp, ...]
    dynamic_inputs: tuple[tuple[str, tuple[int, ...]], ...]
    dynamic_tensors: tuple[DynamicTensor, ...] = ()
    fp16_risks: tuple[Fp16Risk, ...] = ()
    precision: str = "float32"

    @property
    def graph_refused(self) -> bool:
        """A tensor is sized at run time: LiteRT refuses the GPU for the whole graph."""
        return bool(self.dynamic_tensors)

    @property
    def compatible(self) -> bool:
        """The whole graph runs on the GPU."""
        return not self.cpu_ops and not self.dynamic_tensors

    @property
    def verdict(self) -> str:
        """``whole``, ``falls back`` or ``refused``."""
        return REFUSED if self.graph_refused else FALLS_BACK if self.cpu_ops else WHOLE

    @property
    def dynamic_shape_ops(self) -> tuple[CpuOp, ...]:
        """The refused ops a static batch folds away."""
        return tuple(op for op in self.cpu_ops if op.from_dynamic_shape)

    @property
    def causes(self) -> tuple[CpuOp, ...]:
        """The refused ops that are causes: not folded by a static batch, not following another."""
        return tuple(op for op in self.cpu_ops if not op.from_dynamic_shape and op.follows is None)

    def layer_fixes(self) -> list[tuple[str, str]]:
        """``(what, fix)`` per Keras layer at fault (or per op where no layer is named)."""
        found: dict[str, tuple[list[str], str]] = {}
        for op in self.causes:
            key = f"layer {op.layer}" if op.layer else f"{op.op} (op {op.index})"
            ops, _ = found.setdefault(key, ([], op.fix))
            if op.op not in ops:
                ops.append(op.op)
        return [(f"{key} ({', '.join(ops)})", fix) for key, (ops, fix) in found.items()]

    def fix(self) -> str | None:
        """What to do so that the file runs whole on a GPU, or None when it does.

        Example:
            >>> GpuSupport(2, (CpuOp(0, "SHAPE", "no GPU kernel", True),),
            ...            (("x", (-1, 4)),)).fix()
            'make it with `tfcompress quantize MODEL --target gpu` (a static batch: --static-batch 1, or N)'
        """  # noqa: E501
        if self.compatible:
            return None
        parts = []
        batch = any(t.from_dynamic_batch for t in self.dynamic_tensors)
        if batch or self.dynamic_shape_ops:
            parts.append(STATIC_BATCH_FIX)
        for tensor in self.dynamic_tensors:
            if not tensor.from_dynamic_batch:
                what = (
                    f"layer {tensor.layer}" if tensor.layer else f"{tensor.op} (op {tensor.index})"
                )
                parts.append(f"{what}: give it a shape fixed at conversion, not computed from "
                             "the input's values")  # fmt: skip
        parts += [f"{what}: {fix}" for what, fix in self.layer_fixes()]
        return "; ".join(dict.fromkeys(parts))

    def cause(self, limit: int = 4) -> str:
        """The causes in one phrase (the first ``limit`` ops), with the dynamic inputs.

        Example:
            >>> GpuSupport(2, (CpuOp(4, "SHAPE", "no GPU kernel", True),),
            ...            (("x", (-1, 4)),)).cause()
            'SHAPE (op 4): no GPU kernel; dynamic batch on x [-1, 4]'
        """
        shown = []
        if self.dynamic_tensors:
            shown.append(
                f"the whole graph is refused: {self.dynamic_tensors[0]} (LiteRT's GPU takes "
                "only static-sized tensors)"
            )
        ops = [op for op in self.cpu_ops if op.follows is None]
        shown += [str(op) for op in ops[:limit]]
        if len(ops) > limit:
            shown.append(f"{len(ops) - limit} more")
        text = "; ".join(shown)
        batch = self.dynamic_shape_ops or any(t.from_dynamic_batch for t in self.dynamic_tensors)
        if batch and self.dynamic_inputs:
            inputs = ", ".join(f"{name} {list(shape)}" for name, shape in self.dynamic_inputs)
            text += f"; dynamic batch on {inputs}"
        return text

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return {
            "verdict": self.verdict,
            "ops_total": self.ops_total,
            "precision": self.precision,
            "cpu_ops": [op.to_dict() for op in self.cpu_ops],
            "dynamic_tensors": [t.to_dict() for t in self.dynamic_tensors],
            "dynamic_inputs": [
                {"name": name, "shape_signature": list(shape)}
                for name, shape in self.dynamic_inputs
            ],
            "fp16_risks": [r.to_dict() for r in self.fp16_risks],
            "fix": self.fix(),
            "rules": LITERT_SOURCE,
        }


def gpu_support(content: bytes | TFLiteFile) -> GpuSupport:
    """Check statically what LiteRT's GPU accelerator makes of a ``.tflite``.

    ``content``: the file's bytes (read and validated here; ModelLoadError if it is not a
    readable ``.tflite``) or a validated parsed file. The verdict holds the refused ops with
    their layers, reasons and fixes, the tensors sized at run time (the whole graph refused),
    the inputs with a dynamic dimension and the float16 overflow risks.
    """
    model = content if isinstance(content, TFLiteFile) else _read(content)
    if not model.subgraphs:
        return GpuSupport(0, (), ())
    graph = model.subgraphs[0]
    options = read_options(model)
    from_shape = _shape_tensors(graph)
    folded = _fp16_weights(model, graph)
    persistent, dynamic = _sizes(model, graph, from_shape)
    producers = {t: op for op in graph.operators for t in op.outputs if t >= 0}
    constants = frozenset(t.index for t in graph.tensors if model.is_constant(t))
    found: dict[int, tuple[Operator, Any]] = {}
    for op in graph.operators:
        if any(i in folded for i in op.outputs):  # FP16GraphPartitionHelper takes them
            continue
        view = View(model, graph, op, options.get(op.index, {}), folded, persistent)
        why = refusal(view)
        if why is not None:
            found[op.index] = (op, why)
    refused = []
    for index, (op, why) in found.items():
        touches_shape = op.opcode == "SHAPE" or any(i in from_shape for i in op.inputs)
        follows = _follows(graph, op, why, found, producers)
        refused.append(
            CpuOp(index, op.opcode, why.reason, touches_shape, op.version,
                  layer_of(graph, op, constants), why.fix, follows)
        )  # fmt: skip
    dynamic_inputs = tuple(
        (graph.tensors[i].name, tuple(graph.tensors[i].shape_signature or ()))
        for i in graph.inputs
        if 0 <= i < len(graph.tensors) and -1 in (graph.tensors[i].shape_signature or ())
    )
    tensors = tuple(
        DynamicTensor(
            op.index, op.opcode, graph.tensors[t].name, layer_of(graph, op, constants), batch
        )
        for op, t, batch in dynamic
    )
    precision = "float16" if folded else _precision(model, graph)
    risks = _fp16_risks(model, graph, producers, precision, constants)
    return GpuSupport(
        len(graph.operators), tuple(refused), dynamic_inputs, tensors, risks, precision
    )


def _read(content: bytes) -> TFLiteFile:
    model = read_tflite(content)
    model.validate()
    return model


def layer_of(graph: Subgraph, op: Operator, constants: frozenset[int] = frozenset()) -> str | None:
    """The Keras layer an op came from, from the converter's tensor names.

    The converter names tensors by the TensorFlow name scope that made them:
    ``model/layer/...`` (``functional_1/layer_normalization_1/moments/mean``; Keras 3's export
    adds ``_1`` to the model's and the layer's scope, removed here). The op's outputs are read
    first, then its constants, then its run-time inputs; the model's own inputs and outputs
    carry no layer.
    """
    tensors = graph.tensors
    ordered = [
        *op.outputs,
        *(i for i in op.inputs if i in constants),
        *(i for i in op.inputs if i not in constants),
    ]
    for index in ordered:
        if not 0 <= index < len(tensors):
            continue
        name = tensors[index].name.split(";")[0]
        parts = name.split("/")
        if len(parts) < 3 or parts[0].startswith(_NO_LAYER):
            continue
        layer = parts[1]
        if parts[0].endswith("_1") and layer.endswith("_1"):  # Keras 3's export scope
            layer = layer[:-2]
        return layer
    return None


def _follows(
    graph: Subgraph, op: Operator, why: Any, found: dict[int, Any], producers: dict[int, Operator]
) -> int | None:
    """The refused op whose tensor is the only cause of this refusal, if any.

    A type refusal follows the refused op that made the tensor; a rank refusal follows the
    nearest refused op upstream that made a tensor of rank 5 or more (a Conv3D's output,
    carried on by the ops after it).
    """
    if why.kind not in ("type", "rank") or why.tensor < 0:
        return None
    maker = producers.get(why.tensor)
    if why.kind == "type":
        return (
            maker.index if maker is not None and maker.index in found and maker is not op else None
        )
    seen: set[int] = set()
    queue = [i for i in op.inputs if i >= 0]
    while queue:
        tensor = queue.pop(0)
        source = producers.get(tensor)
        if source is None or source.index in seen:
            continue
        seen.add(source.index)
        high = any(len(graph.tensors[t].shape or ()) > 4 for t in source.outputs if t >= 0)
        if high and source.index in found and found[source.index][1].kind != "rank":
            return source.index
        queue.extend(i for i in source.inputs if i >= 0)
    return None


def _fp16_weights(model: TFLiteFile, graph: Subgraph) -> frozenset[int]:
    """Outputs of DEQUANTIZE ops over stored float16 weights (a float16 recipe's weights).

    The delegate's FP16GraphPartitionHelper reads them as the constants they are
    (model_builder.cc skips those DEQUANTIZE nodes), so they count as constants here too.
    """
    found = set()
    for op in graph.operators:
        if op.opcode != "DEQUANTIZE" or not op.inputs or not 0 <= op.inputs[0] < len(graph.tensors):
            continue
        source = graph.tensors[op.inputs[0]]
        if source.dtype == "float16" and model.is_constant(source):
            found.update(i for i in op.outputs if i >= 0)
    return frozenset(found)


def _shape_tensors(graph: Subgraph) -> set[int]:
    """Tensors computed at run time from a ``SHAPE``: what a static batch makes constant."""
    found: set[int] = set()
    for op in graph.operators:  # graph order: producers before consumers
        if op.opcode == "SHAPE" or any(i in found for i in op.inputs if i >= 0):
            for index in op.outputs:
                tensor = graph.tensors[index] if 0 <= index < len(graph.tensors) else None
                if tensor is not None and tensor.dtype in ("int32", "int64"):
                    found.add(index)
    return found


def _sizes(
    model: TFLiteFile, graph: Subgraph, from_shape: set[int]
) -> tuple[frozenset[int], list[tuple[Operator, int, bool]]]:
    """Tensors computed when tensors are allocated, and the ops whose output is dynamic."""
    known = {t.index for t in graph.tensors if model.is_constant(t)}
    persistent: set[int] = set()
    dynamic: list[tuple[Operator, int, bool]] = []
    for op in graph.operators:
        inputs = [i for i in op.inputs if i >= 0]
        outputs = [i for i in op.outputs if i >= 0]
        if op.opcode in ("SHAPE", "RANK") or (
            op.opcode in _AT_PREPARE and inputs and all(i in known for i in inputs)
        ):
            persistent.update(outputs)
            known.update(outputs)
            continue
        sized_by = [op.inputs[i] for i in _SIZED_BY.get(op.opcode, ()) if i < len(op.inputs)]
        computed = [i for i in sized_by if i >= 0 and i not in known]
        if outputs and (computed or op.opcode in _ALWAYS_DYNAMIC):
            batch = bool(computed) and all(i in from_shape for i in computed)
            dynamic.append((op, outputs[0], batch))
    return frozenset(persistent), dynamic


def _precision(model: TFLiteFile, graph: Subgraph) -> str:
    quantized = any(
        t.dtype in ("int8", "uint8") and t.quantization is not None
        for t in graph.tensors
        if not model.is_constant(t)
    )
    return "int8" if quantized else "float32"


def _fp16_risks(
    model: TFLiteFile,
    graph: Subgraph,
    producers: dict[int, Operator],
    precision: str,
    constants: frozenset[int],
) -> tuple[Fp16Risk, ...]:
    """MEAN/SUM of a squared term over a row of at least ``_FP16_ROW`` elements."""
    if precision == "int8":
        return ()
    risks = []
    for op in graph.operators:
        if op.opcode not in ("MEAN", "SUM") or len(op.inputs) < 2 or op.inputs[0] < 0:
            continue
        source = producers.get(op.inputs[0])
        squared = source is not None and (
            source.opcode in _SQUARES or (source.opcode == "MUL" and len(set(source.inputs)) == 1)
        )
        if not squared:
            continue
        shape = graph.tensors[op.inputs[0]].shape or ()
        axes = _int32s(model, graph, op.inputs[1])
        if not shape or axes is None:
            continue
        elements = math.prod(shape[a % len(shape)] for a in axes) if axes else 1
        if elements >= _FP16_ROW:
            layer = layer_of(graph, op, constants)
            risks.append(Fp16Risk(op.index, op.opcode, layer, elements, precision == "float16"))
    return tuple(risks)


def _int32s(model: TFLiteFile, graph: Subgraph, index: int) -> tuple[int, ...] | None:
    """A constant int32 tensor's values (the axes of a reduction)."""
    if not 0 <= index < len(graph.tensors):
        return None
    tensor = graph.tensors[index]
    if tensor.dtype != "int32" or not model.is_constant(tensor):
        return None
    data = bytes(model.buffer_data(tensor.buffer))
    count = len(data) // 4
    return tuple(struct.unpack(f"<{count}i", data[: count * 4]))
