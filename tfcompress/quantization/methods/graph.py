"""A Keras model's layers as a graph the weight methods can walk (Keras 3 and tf-keras alike).

Both flavours keep, for a layer called once, its ``input`` and ``output`` tensor objects;
matching them by identity gives every layer's producers and consumers without reading
either flavour's private node structures. Layers called more than once (shared layers) and
layers with several outputs are opaque: no method rewrites them or looks through them.

The layer kinds the methods know are listed here, by class name, and only for the classes
Keras itself ships (a user subclass named ``Conv2D`` may compute anything):

* linear layers: ``Conv2D`` (one group, channels last), ``DepthwiseConv2D`` and ``Dense``
  (equalization rescales the outputs of those whose fused activation is the identity, ReLU,
  ReLU6 or a leaky ReLU);
* ``BatchNormalization`` over the last axis (folded into the linear layer before it);
* per-channel positively homogeneous layers, ``f(x / s) = f(x) / s`` for a per-channel
  ``s > 0``: ReLU, leaky ReLU and PReLU (exactly, whatever the slopes: an ``s > 0`` keeps
  each value's sign), ReLU6/``ReLU(max_value)`` (where a channel never reaches the clip, see
  :mod:`.equalize`), dropout, zero padding and pooling.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfcompress.errors import UnsupportedModelError

LINEAR = {"Conv2D": "conv", "DepthwiseConv2D": "depthwise", "Dense": "dense"}
#: Layers that pass each channel through ``f(x / s) = f(x) / s`` (with ``s > 0``).
PASS_THROUGH = frozenset(
    {
        "Dropout",
        # Not fused into the layer before it: its own op, whose output the converter
        # quantizes (MTCNN's O-Net: conv + PReLU, fc + PReLU into three heads).
        "PReLU",
        "SpatialDropout1D",
        "SpatialDropout2D",
        "ZeroPadding2D",
        "MaxPooling2D",
        "AveragePooling2D",
        "GlobalAveragePooling2D",
        "GlobalMaxPooling2D",
    }
)
#: Activation functions (by ``__name__``) that are positively homogeneous; relu6 clips.
HOMOGENEOUS_ACTIVATIONS = frozenset({"linear", "relu", "relu6", "leaky_relu"})


@dataclass(eq=False)
class Node:
    """One layer called once, with the nodes that feed it and the nodes it feeds.

    ``kind`` is ``conv``, ``depthwise``, ``dense``, ``batchnorm``, ``activation``, ``pass``
    or ``other``; a producer is None for a model input; ``clip`` the value a ReLU6-like
    layer clips at. :mod:`.folding` sets ``folded`` on a BatchNormalization folded into the
    layer before it (now the identity), and ``bias_in`` on a linear layer without a bias of
    its own (that BatchNormalization adds it).
    """

    layer: Any
    kind: str
    producers: list[Node | None] = field(default_factory=list)
    consumers: list[Node] = field(default_factory=list)
    is_output: bool = False
    clip: float | None = None
    folded: bool = False
    bias_in: Node | None = None

    @property
    def name(self) -> str:
        """The layer's name."""
        return str(self.layer.name)

    @property
    def is_linear(self) -> bool:
        """A conv, depthwise or dense layer."""
        return self.kind in ("conv", "depthwise", "dense")

    @property
    def homogeneous(self) -> bool:
        """A linear layer whose fused activation is positively homogeneous (ReLU6 clips)."""
        return self.is_linear and activation_name(self.layer) in HOMOGENEOUS_ACTIVATIONS


class LayerGraph:
    """The layers of a Sequential or Functional model, in topological order."""

    def __init__(self, model: Any) -> None:
        if type(model).__name__ not in ("Functional", "Sequential", "Model") or not getattr(
            model, "_is_graph_network", True
        ):
            raise UnsupportedModelError(
                f"{model.name!r} is a subclassed model; the weight methods rewrite "
                "Sequential or Functional models only: rebuild it on keras.Input."
            )
        inputs = getattr(model, "inputs", None)
        if not inputs:
            raise UnsupportedModelError(
                f"{model.name!r} has no inputs yet; build it on keras.Input so the weight "
                "methods can read its layers."
            )
        self.model = model
        self.nodes: list[Node] = []
        by_output: dict[int, Node] = {}
        outputs = {id(t) for t in model.outputs}
        for layer in model.layers:
            if type(layer).__name__ == "InputLayer":
                continue
            node = Node(layer, _kind(layer))
            self.nodes.append(node)
            if node.kind == "other":
                continue
            output = layer.output
            by_output[id(output)] = node
            node.is_output = id(output) in outputs
            node.clip = _clip_of(layer)
        for node in self.nodes:
            if node.kind == "other":
                continue
            for tensor in _flat(node.layer.input):
                producer = by_output.get(id(tensor))
                node.producers.append(producer)
                if producer is not None:
                    producer.consumers.append(node)
        # An opaque layer reads tensors too: whatever feeds it cannot be rescaled.
        for node in self.nodes:
            if node.kind == "other":
                # every tensor any call of it read (shared layers included)
                read = [t for call in node.layer._inbound_nodes for t in _flat(call.input_tensors)]
                for tensor in read:
                    producer = by_output.get(id(tensor))
                    if producer is not None:
                        producer.consumers.append(node)

    def linear_nodes(self) -> Iterator[Node]:
        """The conv, depthwise and dense layers, in graph order."""
        return (n for n in self.nodes if n.is_linear)

    def node(self, name: str) -> Node:
        """The node of layer ``name``."""
        return next(n for n in self.nodes if n.name == name)


def _kind(layer: Any) -> str:
    name = type(layer).__name__
    module = type(layer).__module__
    if not module.startswith(("keras.", "tf_keras.")) or len(layer._inbound_nodes) != 1:
        return "other"
    try:
        layer.output  # noqa: B018 - raises for a layer with several outputs or calls
    except (AttributeError, ValueError):
        return "other"
    if isinstance(layer.output, list | tuple):
        return "other"
    if name in LINEAR:
        plain = getattr(layer, "data_format", "channels_last") == "channels_last"
        return LINEAR[name] if plain and getattr(layer, "groups", 1) == 1 else "other"
    if name == "BatchNormalization":
        return "batchnorm" if _last_axis(layer) else "other"
    if name in ("ReLU", "LeakyReLU", "Activation"):
        return "activation" if _homogeneous(layer) else "other"
    if name in PASS_THROUGH and getattr(layer, "data_format", "channels_last") in (
        "channels_last",
        None,
    ):
        return "pass"
    return "other"


def activation_name(layer: Any) -> str:
    """The ``__name__`` of a layer's activation function (``linear`` when it has none)."""
    activation = getattr(layer, "activation", None)
    return "linear" if activation is None else str(getattr(activation, "__name__", "?"))


def _last_axis(layer: Any) -> bool:
    axis = layer.axis
    axes = list(axis) if isinstance(axis, list | tuple) or hasattr(axis, "__len__") else [axis]
    rank = len(layer.input.shape)
    return len(axes) == 1 and int(axes[0]) in (-1, rank - 1)


def _homogeneous(layer: Any) -> bool:
    name = type(layer).__name__
    if name == "ReLU":
        return float(layer.threshold or 0.0) == 0.0
    return name == "LeakyReLU" or activation_name(layer) in HOMOGENEOUS_ACTIVATIONS


def _clip_of(layer: Any) -> float | None:
    if type(layer).__name__ == "ReLU" and layer.max_value is not None:
        return float(layer.max_value)
    return 6.0 if activation_name(layer) == "relu6" else None


def _flat(value: Any) -> list[Any]:
    if isinstance(value, Mapping):
        return [t for v in value.values() for t in _flat(v)]
    return [t for v in value for t in _flat(v)] if isinstance(value, list | tuple) else [value]


def ordered_feed(model: Any, x: np.ndarray | Mapping[str, np.ndarray]) -> Any:
    """``x`` as the model takes it: one array, or a list in ``model.inputs`` order.

    Raises:
        UnsupportedModelError: A dict whose keys are not the model's input names.
    """
    if not isinstance(x, Mapping):
        return x
    names = [input_name(t) for t in model.inputs]
    if set(x) != set(names):
        raise UnsupportedModelError(
            f"calibration samples are keyed {sorted(x)} but {model.name!r} has inputs "
            f"{names}; key them by input name."
        )
    arrays = [x[name] for name in names]
    return arrays[0] if len(arrays) == 1 else arrays


def input_name(tensor: Any) -> str:
    """The name of the Input layer behind ``tensor`` (what data is keyed by)."""
    history = getattr(tensor, "_keras_history", None)
    layer = getattr(history, "operation", None) or getattr(history, "layer", None)
    return str(getattr(layer, "name", None) or getattr(tensor, "name", "")).split(":")[0]
