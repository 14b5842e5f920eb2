"""Fold each BatchNormalization into the conv, depthwise or dense layer before it.

The converter folds such a BatchNorm into the layer's weights itself; the weight methods
must see those folded weights (they are what gets quantized), so they fold it first. The
model keeps its layers: the BatchNorm stays in place as an exact identity (``gamma = 1``,
``beta = 0``, a variance that makes ``rsqrt(var + eps)`` exactly 1), or, for a layer without
a bias of its own, as the ``x - moving_mean`` that adds the folded bias. The converter folds
it away again, so the ``.tflite`` has the same ops as the original's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from tfcompress.quantization.methods.graph import LayerGraph, Node, activation_name
from tfcompress.quantization.methods.linear import LinearWeights


@dataclass(frozen=True)
class FoldedBatchNorm:
    """One BatchNormalization folded into the layer before it.

    Attributes:
        batchnorm: The BatchNorm layer's name.
        into: The conv/depthwise/dense layer that now holds its scale and shift.
        bias_held_by_batchnorm: The layer has no bias, so the BatchNorm still adds it.
    """

    batchnorm: str
    into: str
    bias_held_by_batchnorm: bool

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports."""
        return asdict(self)


def fold_batchnorms(graph: LayerGraph) -> tuple[FoldedBatchNorm, ...]:
    """Fold every BatchNorm that directly follows a linear layer with no activation.

    The layers of ``graph`` (the model copy) change in place; one entry per folded
    BatchNorm, in graph order.
    """
    folded = []
    for node in graph.nodes:
        source = _foldable(node)
        if source is None:
            continue
        weights = LinearWeights.read(source)
        layer = node.layer
        eps = np.float32(layer.epsilon)
        variance = np.asarray(layer.moving_variance.numpy(), np.float64)
        gain = 1.0 / np.sqrt(variance + float(eps))
        if layer.gamma is not None:
            gain = gain * np.asarray(layer.gamma.numpy(), np.float64)
        shift = -np.asarray(layer.moving_mean.numpy(), np.float64) * gain
        if layer.beta is not None:
            shift = shift + np.asarray(layer.beta.numpy(), np.float64)
        weights.scale_outputs(1.0 / gain)
        weights.bias = shift if weights.bias is None else weights.bias + shift
        _make_identity(layer, eps)
        node.folded = True
        if not source.layer.use_bias:
            source.bias_in = node
        weights.write()
        folded.append(FoldedBatchNorm(node.name, source.name, not source.layer.use_bias))
    return tuple(folded)


def _foldable(node: Node) -> Node | None:
    """The linear layer ``node`` (a BatchNorm) can be folded into, if any."""
    if node.kind != "batchnorm" or len(node.producers) != 1:
        return None
    source = node.producers[0]
    if source is None or not source.is_linear or source.consumers != [node]:
        return None
    if activation_name(source.layer) != "linear" or source.is_output:
        return None
    return source


def _make_identity(layer: Any, eps: np.float32) -> None:
    channels = layer.moving_variance.shape[-1]
    variance = np.float32(1.0) - eps
    while np.float32(variance + eps) > np.float32(1.0):  # float32 rounding, not arithmetic
        variance = np.nextafter(variance, np.float32(0.0))
    while np.float32(variance + eps) < np.float32(1.0):
        variance = np.nextafter(variance, np.float32(2.0))
    layer.moving_variance.assign(np.full(channels, variance, np.float32))
    layer.moving_mean.assign(np.zeros(channels, np.float32))
    if layer.gamma is not None:
        layer.gamma.assign(np.ones(channels, np.float32))
    if layer.beta is not None:
        layer.beta.assign(np.zeros(channels, np.float32))
