"""Multiply-accumulates of a Keras model, counted from its layers without converting it.

It counts exactly what the harness's ``.tflite`` counter
(:func:`tfcompress.bench.size.tflite_op_macs`) counts after conversion: convolutions,
depthwise convolutions and dense layers, not pooling, means or element-wise products. So a
zoo model's MACs at 224x224 take a second instead of a conversion of up to two minutes;
``tests/test_zoo.py`` holds the two counters against each other on converted models.

Layers that hold convolutions (MixNet's ``MixConv`` and ``GroupedConv2D``) are opened: every
convolution inside shares the holder's output resolution, as a channel-group layer's do.

Example:
    >>> count_macs(create_model("mixnet_s"))  # doctest: +SKIP
    239173360
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["count_macs"]


def count_macs(model: Any) -> int:
    """MACs of one sample (batch excluded) through a built Keras 3 functional/sequential model.

    What counts: its convolutions, depthwise convolutions and dense layers.

    Example:
        >>> dense = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])  # doctest: +SKIP
        >>> count_macs(dense)  # doctest: +SKIP
        32
    """
    total = 0
    for layer in model.layers:
        if hasattr(layer, "layers") and layer is not model and _is_model(layer):
            total += count_macs(layer)
            continue
        out_shape = tuple(layer.output.shape)
        total += sum(_layer_macs(inner, out_shape) for inner in _weighted(layer))
    return total


def _is_model(layer: Any) -> bool:
    return type(layer).__name__ in ("Functional", "Sequential", "Model")


def _weighted(layer: Any) -> list[Any]:
    """The layer itself, or the convolutions it holds (a MixConv's depthwise convs)."""
    flatten = getattr(layer, "_flatten_layers", None)
    inner = list(flatten(include_self=True, recursive=True)) if flatten else [layer]
    return [item for item in inner if _counted(item)]


def _counted(layer: Any) -> bool:
    # By class name, so Keras 3 and tf-keras layers (and subclasses) both count.
    names = {cls.__name__ for cls in type(layer).__mro__}
    return bool(names & {"Conv2D", "DepthwiseConv2D", "Dense"}) and hasattr(layer, "kernel")


def _layer_macs(layer: Any, out_shape: tuple[int | None, ...]) -> int:
    """One kernel application costs the kernel's size, for all three kinds of layer.

    Conv2D (kh, kw, in/groups, out), DepthwiseConv2D (kh, kw, in, multiplier) and Dense
    (in, out): each output position multiplies-and-adds every kernel element once.
    """
    return _positions(out_shape) * math.prod(int(d) for d in layer.kernel.shape)


def _positions(out_shape: tuple[int | None, ...]) -> int:
    """Positions a kernel is applied at: every dimension but the batch and the channels."""
    dims = out_shape[1:-1]
    if any(d is None for d in dims):
        raise ValueError(f"MACs need a static shape, got {out_shape}; give input_shape.")
    return math.prod(int(d) for d in dims)  # type: ignore[arg-type]
