"""Node names for selective quantization: the op outputs of a model, and their Keras layers.

The converter's ``denylisted_nodes`` takes the output tensor name of an op in the calibrated
model (``functional_1/dense_1/MatMul;functional_1/dense_1/Relu``) and silently ignores any
other string, so names are checked here, and mapped back to the Keras layer they came from
where the name scopes allow it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from tfcompress.errors import ConversionError, InvalidInputError
from tfcompress.models.tflite_file import read_tflite


def node_names(content: bytes) -> tuple[str, ...]:
    """Output tensor names of every op of a (calibrated) ``.tflite``, in graph order.

    The names ``denylisted_nodes`` can take.

    Raises:
        ModelLoadError: ``content`` is not a readable ``.tflite``.
    """
    parsed = read_tflite(content)
    return tuple(
        graph.tensors[i].name
        for graph in parsed.subgraphs
        for op in graph.operators
        for i in op.outputs
        if 0 <= i < len(graph.tensors)
    )


def check_nodes(content: bytes, nodes: Sequence[str], source: str) -> tuple[str, ...]:
    """``nodes`` as a tuple, every one an op output of the calibrated flatbuffer ``content``.

    The quantizer would ignore an unknown name silently.

    Raises:
        InvalidInputError: One line naming the unknown node and the nearest real ones.
    """
    known = node_names(content)
    for node in nodes:
        if node not in known:
            near = [n for n in known if node in n] or difflib.get_close_matches(
                node, known, n=3, cutoff=0.0
            )
            raise InvalidInputError(
                f"float_nodes: {node!r} is not an op output of {source!r}; nearest: "
                f"{', '.join(repr(n) for n in near[:3])}; rank_layers lists every node name."
            )
    return tuple(nodes)


def float_name(name: str, known: set[str]) -> str:
    """The calibrated model's name of a debug-model tensor.

    The debug model renames the quantized copy of an op by appending one digit (the
    debugger's own ``_get_operand_name_and_index`` strips it the same way).
    """
    for candidate in (name, name[:-1] if name[-1:].isdigit() else None):
        if candidate in known:
            return candidate
    raise ConversionError(
        f"the quantization debugger reported tensor {name!r}, which is no op output of the "
        "calibrated model; this TensorFlow version names debug tensors differently: please "
        "report it."
    )


_SUFFIX = re.compile(r"_\d+$")


def layer_of(node: str, names: set[str], model: str) -> str | None:
    """The outermost Keras layer named in ``node`` ("functional_1/dense_1/MatMul;...").

    A trace may add ``_1`` to every name scope (the model's too): when the model's scope is
    its name plus a suffix, the layers' scopes are read the same way.
    """
    if not names:
        return None
    for part in node.split(";"):
        segments = part.split("/")
        if len(segments) < 2:
            continue
        suffixed = segments[0] != model and _SUFFIX.sub("", segments[0]) == model
        for segment in segments[1:-1] or segments[1:]:
            stripped = _SUFFIX.sub("", segment)
            if suffixed and stripped in names:
                return stripped
            if segment in names:
                return segment
            if stripped in names:
                return stripped
    return None
