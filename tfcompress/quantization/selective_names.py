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
from typing import Any

from tfcompress.errors import ConversionError, InvalidInputError
from tfcompress.models.tflite_file import read_tflite

__all__ = ["check_nodes", "float_name", "keras_layer_names", "layer_of", "node_names"]


def node_names(content: bytes) -> tuple[str, ...]:
    """Output tensor names of every op of a (calibrated) ``.tflite``, in graph order.

    Args:
        content: The flatbuffer.

    Returns:
        The names ``denylisted_nodes`` can take.

    Raises:
        ModelLoadError: ``content`` is not a readable ``.tflite``.

    Example:
        >>> node_names(calibrated)[:1]  # doctest: +SKIP
        ('functional_1/dense_1/MatMul;functional_1/dense_1/Relu',)
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
    """Refuse node names the model does not have (the quantizer ignores them silently).

    Args:
        content: The calibrated flatbuffer the names must belong to.
        nodes: The names asked for.
        source: Model name, for messages.

    Returns:
        ``nodes``, as a tuple.

    Raises:
        InvalidInputError: One line naming the unknown node and the nearest real ones.

    Example:
        >>> check_nodes(calibrated, ["model/dense/MatMul"], "m")  # doctest: +SKIP
        Traceback (most recent call last):
        InvalidInputError: float_nodes: 'model/dense/MatMul' is not an op output of 'm'; ...
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


def keras_layer_names(model: Any) -> tuple[set[str], str]:
    """Every (nested) Keras layer name of ``model`` and its own name; empty otherwise."""
    names: set[str] = set()
    stack = list(getattr(model, "layers", None) or [])
    while stack:
        layer = stack.pop()
        names.add(layer.name)
        stack.extend(getattr(layer, "layers", None) or [])
    return names, str(getattr(model, "name", ""))


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
