"""Builtin options of a parsed ``.tflite``'s ops, read on demand (the reader's companion).

:mod:`tfcompress.models.tflite_file` keeps no builtin options: most callers never need them.
Those that do (the Edge TPU linter's limitations and the GPU check: fused activation,
dilation, depth multiplier, mirror-pad mode, weights format, pack axis, strided slice masks,
squeeze dimensions) read them here, through the same generated schema the reader walks, only
for the ops that need them, on a file :func:`read_tflite` has already parsed and validated.
Any parsing failure becomes a one-line :class:`ModelLoadError`.
"""

from __future__ import annotations

import struct
from typing import Any

from tfcompress.errors import ModelLoadError
from tfcompress.models.tflite_file import TFLiteFile

OptionValue = int | tuple[int, ...]

ACTIVATION_NAMES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}

_POOL = ("Pool2DOptions", ("FusedActivationFunction",))
_DILATION = ("DilationWFactor", "DilationHFactor")
# op -> (options table, fields read); a field missing from the file takes the schema default.
_READ: dict[str, tuple[str, tuple[str, ...]]] = {
    "AVERAGE_POOL_2D": _POOL,
    "MAX_POOL_2D": _POOL,
    "CONCATENATION": ("ConcatenationOptions", ("FusedActivationFunction", "Axis")),
    "CONV_2D": ("Conv2DOptions", _DILATION),
    "DEPTHWISE_CONV_2D": ("DepthwiseConv2DOptions", (*_DILATION, "DepthMultiplier")),
    "FULLY_CONNECTED": ("FullyConnectedOptions", ("WeightsFormat", "KeepNumDims")),
    "MIRROR_PAD": ("MirrorPadOptions", ("Mode",)),
    "PACK": ("PackOptions", ("Axis",)),
    "STRIDED_SLICE": ("StridedSliceOptions", ("EllipsisMask", "NewAxisMask", "ShrinkAxisMask")),
    "SQUEEZE": ("SqueezeOptions", ("SqueezeDims",)),
}
# The schema's defaults that are not 0 (a flatbuffer field left out reads as its default).
_DEFAULTS: dict[str, OptionValue] = {"DilationWFactor": 1, "DilationHFactor": 1, "SqueezeDims": ()}
_ERRORS = (IndexError, struct.error, TypeError, ValueError, OverflowError, RecursionError)


def read_options(model: TFLiteFile, *, subgraph: int = 0) -> dict[int, dict[str, OptionValue]]:
    """Options of the ops in ``subgraph`` whose Edge TPU or GPU limitations depend on them.

    Raises:
        ModelLoadError: The options cannot be read (a corrupt or crafted file), or an op
            carries another op's options table.
    """
    from tfcompress._compat.litert import flatbuffer_utils

    schema = flatbuffer_utils().schema_fb
    try:
        graph = schema.Model.GetRootAs(model.content, 0).Subgraphs(subgraph)
        return {
            op.index: _fields(schema, graph.Operators(op.index), op.opcode, op.index)
            for op in model.subgraphs[subgraph].operators
            if op.opcode in _READ
        }
    except _ERRORS as error:
        reason = " ".join(str(error).split())[:160] or type(error).__name__
        raise ModelLoadError(
            f"the .tflite's operator options cannot be read ({reason}); the file is corrupt or "
            "crafted: re-export it from the source model."
        ) from error


def _fields(schema: Any, operator: Any, opcode: str, index: int) -> dict[str, OptionValue]:
    table_name, names = _READ[opcode]
    values = {name: _DEFAULTS.get(name, 0) for name in names}
    kind = int(operator.BuiltinOptionsType())
    table = operator.BuiltinOptions()
    if kind == 0 or table is None:  # options absent: every field takes its default
        return values
    if kind != getattr(schema.BuiltinOptions, table_name):
        raise ModelLoadError(
            f"operator {index} ({opcode}) carries options of type {kind}, not {table_name}; "
            "the file is corrupt or crafted: re-export it from the source model."
        )
    options = getattr(schema, table_name)()
    options.Init(table.Bytes, table.Pos)
    for name in names:
        if name == "SqueezeDims":
            count = int(options.SqueezeDimsLength())
            if count * 4 > len(table.Bytes):
                raise ValueError(f"{count} squeeze dimensions cannot fit in the file")
            values[name] = tuple(int(options.SqueezeDims(j)) for j in range(count))
        else:
            values[name] = int(getattr(options, name)())
    return values
