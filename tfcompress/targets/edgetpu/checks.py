"""Coral's model requirements, checked op by op; and what each op's row adds to them.

For one op, in this order: is the op in Coral's table (else ``unsupported-op`` or
``op-support-unknown``, and nothing else is checked); are the tensors it touches 8-bit
(``not-fully-quantized``); are its weights and shape/axis arguments constants
(``non-constant-parameter``); are its tensors at most 3-D, or only their 3 innermost
dimensions larger than 1 (``tensor-rank``); and its row's limitations (``op-limitation``).
Each failed check is one :class:`Issue` with what to try.
"""

from __future__ import annotations

from dataclasses import replace

from tfcompress.targets.edgetpu.findings import (
    NON_CONSTANT_PARAMETER,
    NOT_FULLY_QUANTIZED,
    OP_SUPPORT_UNKNOWN,
    TENSOR_RANK,
    UNSUPPORTED_OP,
    Issue,
)
from tfcompress.targets.edgetpu.limitations import LIMITATION_CHECKS
from tfcompress.targets.edgetpu.ops import Support, rule_for
from tfcompress.targets.edgetpu.view import EIGHT_BIT, OpView

# `--target edgetpu` applies the three fixes below at once (integer-only int8, 8-bit
# inputs and outputs, a static batch of 1): each fix names it first.
TARGET_FIX = "`tfcompress quantize MODEL --target edgetpu --data CALIB.npz --out M.tflite`"
FIX_QUANTIZE = (
    f"quantize fully for the Edge TPU: {TARGET_FIX} (integer-only int8, uint8 inputs and "
    "outputs, batch 1); if the converter keeps this op in float, replace it with an op that "
    "has an int8 kernel"
)
FIX_INPUT = (
    f"make the model's input 8-bit: {TARGET_FIX} (or `--recipe int8 --input-type uint8`), so "
    "no float-to-int8 QUANTIZE runs on the CPU before the TPU"
)
FIX_STATIC_SHAPE = (
    f"fix a batch of 1: {TARGET_FIX} converts at batch 1; an unknown size other than the "
    "batch must be fixed in the model (keras.Input(shape, batch_size=1)), so no dimension "
    "of the .tflite's shape signatures is -1"
)
FIX_PARAMETER = (
    "make weights, biases and shape/axis arguments constants of the graph: no weights fed as "
    "model inputs, no shapes computed at run time (fix the input size)"
)
FIX_RANK = (
    "keep every tensor at most 3-D beyond a batch of 1: fold the extra dimension into a "
    "neighbour with a Reshape (e.g. [2, H, W, C] -> [1, 2*H, W, C]), or move this part of the "
    "model to the host"
)
_REQUIREMENTS = "https://coral.ai/docs/edgetpu/models-intro/#model-requirements"
_CONSTANT_TYPES = EIGHT_BIT | {"int32", "int64"}  # weights; biases and shape/axis arguments


def is_input_quantizer(view: OpView) -> bool:
    """A QUANTIZE turning a float model input into integers (runs on the CPU before the TPU)."""
    source = view.input(0)
    return (
        view.op.opcode == "QUANTIZE"
        and source is not None
        and source in view.graph.inputs
        and view.tensor(source).dtype not in EIGHT_BIT
    )


def op_issues(view: OpView) -> list[Issue]:
    """Every rule ``view.op`` breaks (empty: the compiler can map it)."""
    rule = rule_for(view.op.opcode)
    if rule.support is Support.NO:
        text = f" ({rule.limitation})" if rule.limitation else ""
        return [
            Issue(
                UNSUPPORTED_OP,
                f"{view.op.opcode} is not an op the Edge TPU compiler maps{text}",
                rule.fix,
                source=rule.source,
            )
        ]
    if rule.support is Support.UNKNOWN:
        return [
            Issue(
                OP_SUPPORT_UNKNOWN,
                f"whether the Edge TPU compiler maps {view.op.opcode} is unknown: predicted on "
                "the CPU to stay on the safe side (the compiler's own log decides)",
                rule.fix,
                source=rule.source,
            )
        ]
    found = [_quantization(view), _constant_inputs(view, rule.constant_inputs), _rank(view)]
    limits = [LIMITATION_CHECKS[name](view) for name in rule.checks]
    found += [replace(x, source=f"{rule.source}: {rule.limitation}") for x in limits if x]
    return [issue for issue in found if issue is not None]


def _quantization(view: OpView) -> Issue | None:
    offenders = [
        f"'{view.tensor(i).name}' ({view.tensor(i).dtype})"
        for i in view.activations()
        if view.tensor(i).dtype not in EIGHT_BIT
    ]
    offenders += [
        f"constant '{view.tensor(i).name}' ({view.tensor(i).dtype})"
        for i in view.op.inputs
        if i >= 0 and view.is_constant(i) and view.tensor(i).dtype not in _CONSTANT_TYPES
    ]
    if not offenders:
        return None
    if is_input_quantizer(view):
        return Issue(
            NOT_FULLY_QUANTIZED,
            f"the model input {offenders[0]} is not 8-bit: this QUANTIZE converts it on the CPU "
            "before the TPU part",
            FIX_INPUT,
            source=f"{_REQUIREMENTS}; https://github.com/f0cal/google-coral/issues/20",
        )
    more = f" and {len(offenders) - 2} more" if len(offenders) > 2 else ""
    return Issue(
        NOT_FULLY_QUANTIZED,
        f"not fully quantized: {view.op.opcode} touches {', '.join(offenders[:2])}{more}; every "
        "tensor the Edge TPU touches must be 8-bit (int8/uint8)",
        FIX_QUANTIZE,
        source=_REQUIREMENTS,
    )


def _constant_inputs(view: OpView, positions: tuple[int, ...]) -> Issue | None:
    computed = [
        (position, view.tensor(index).name)
        for position in positions
        if (index := view.input(position)) is not None and not view.is_constant(index)
    ]
    if not computed:
        return None
    names = ", ".join(f"input {p} '{name}'" for p, name in computed)
    return Issue(
        NON_CONSTANT_PARAMETER,
        f"{view.op.opcode}'s {names} is computed at run time; the Edge TPU needs weights, biases "
        "and shape/axis arguments to be compile-time constants",
        FIX_PARAMETER,
        source=_REQUIREMENTS,
    )


def _rank(view: OpView) -> Issue | None:
    for index in view.activations():
        shape = view.shape(index)
        if len(shape) > 3 and any(d != 1 for d in shape[:-3]):
            return Issue(
                TENSOR_RANK,
                f"{view.op.opcode} touches '{view.tensor(index).name}' of shape {list(shape)}: "
                "the Edge TPU takes tensors of at most 3 dimensions, or whose only dimensions "
                "larger than 1 are the 3 innermost",
                FIX_RANK,
                source=_REQUIREMENTS,
            )
    return None
