"""The model zoo: registered architectures built by name (MobileNet V1/V2/V3, MixNet S/M/L).

Importing this package does not import TensorFlow; building a model does. ``MixConv`` (a
Keras layer) is loaded on first access.

Example:
    >>> from tfcompress.zoo import create_model, list_models
    >>> list_models("mixnet*")
    ['mixnet_l', 'mixnet_m', 'mixnet_s']
    >>> model = create_model("mixnet_s", input_shape=(32, 32, 1), num_classes=10)  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tfcompress.zoo.api import ZooModelInfo, create_model, model_info
from tfcompress.zoo.blocks import (
    BlockSpec,
    decode_arch,
    decode_block,
    round_filters,
    split_channels,
)
from tfcompress.zoo.registry import list_models, register_model

if TYPE_CHECKING:
    from tfcompress.zoo.layers import GroupedConv2D, MixConv

__all__ = [
    "BlockSpec",
    "GroupedConv2D",
    "MixConv",
    "ZooModelInfo",
    "create_model",
    "decode_arch",
    "decode_block",
    "list_models",
    "model_info",
    "register_model",
    "round_filters",
    "split_channels",
]

_KERAS_LAYERS = ("GroupedConv2D", "MixConv")


def __getattr__(name: str) -> Any:
    if name in _KERAS_LAYERS:  # imports Keras: only when asked for
        return getattr(importlib.import_module("tfcompress.zoo.layers"), name)
    raise AttributeError(f"module 'tfcompress.zoo' has no attribute {name!r}")
