"""Keras layers of the MixNet family: MixConv and the grouped 1x1 convolution.

Importing this module imports Keras; it registers both layers with
``keras.saving.register_keras_serializable`` (package ``tfcompress``), so a saved
``.keras`` file holding them loads once this module has been imported (accessing
``tfcompress.zoo.MixConv`` imports it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
from keras import layers, ops

from tfcompress.zoo.blocks import split_channels

__all__ = ["GroupedConv2D", "MixConv"]


def _check_groups(channels: int, groups: int, layer: str) -> list[int]:
    sizes = split_channels(channels, groups)
    if min(sizes) < 1:
        raise ValueError(
            f"{layer}: {channels} input channels cannot feed {groups} groups; "
            "use fewer kernel sizes or more channels."
        )
    return sizes


def _split(x: Any, sizes: Sequence[int]) -> list[Any]:
    """Channel groups as ops every target maps: one SPLIT, or slices when sizes differ.

    Uneven cut points would convert to SPLIT_V, which is not in the Edge TPU compiler's op
    table (the linter predicts the graph splits there); equal groups convert to SPLIT and
    uneven ones to STRIDED_SLICE with stride 1, both of which the Edge TPU maps.
    """
    if len(sizes) == 1:
        return [x]
    if len(set(sizes)) == 1:
        return list(ops.split(x, len(sizes), axis=-1))
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return [x[..., start : start + size] for start, size in zip(starts, sizes, strict=True)]


class _ChannelGroups(layers.Layer):
    """The part MixConv and GroupedConv2D share: split channels, one conv each, concatenate.

    Subclasses set ``self.convs`` (one conv per group, in channel order).
    """

    convs: list[Any]

    def build(self, input_shape: Sequence[int | None]) -> None:
        """Split the input channels into one group per conv and build each conv."""
        self._sizes = _check_groups(int(input_shape[-1]), len(self.convs), self.name)  # type: ignore[arg-type]
        for conv, size in zip(self.convs, self._sizes, strict=True):
            conv.build((*input_shape[:-1], size))

    def call(self, inputs: Any) -> Any:
        """Run each channel group through its own conv; concatenate the outputs in order."""
        parts = _split(inputs, self._sizes)
        outputs = [conv(part) for conv, part in zip(self.convs, parts, strict=True)]
        return outputs[0] if len(outputs) == 1 else ops.concatenate(outputs, axis=-1)


@keras.saving.register_keras_serializable(package="tfcompress")
class MixConv(_ChannelGroups):
    """Mixed depthwise convolution (MixNet, Tan & Le 2019).

    The input channels are split into one group per kernel size (near-equal groups, the
    first taking the remainder: 10 channels over kernels 3, 5, 7 give 4/3/3), each group
    goes through its own ``DepthwiseConv2D`` (``same`` padding), and the results are
    concatenated back in order. With one kernel size it is exactly a ``DepthwiseConv2D``.

    Args:
        kernel_sizes: One depthwise kernel size per channel group, e.g. ``(3, 5, 7)``.
        strides: Stride of every group.
        use_bias: Give each depthwise conv a bias.
        **kwargs: ``name``, ``dtype``... (Keras layer options).

    Example:
        >>> y = MixConv((3, 5, 7), strides=2)(keras.ops.ones((1, 32, 32, 10)))  # doctest: +SKIP
    """

    def __init__(
        self,
        kernel_sizes: Sequence[int],
        strides: int = 1,
        use_bias: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kernel_sizes = tuple(int(k) for k in kernel_sizes)
        if not self.kernel_sizes or min(self.kernel_sizes) < 1:
            raise ValueError(f"MixConv kernel_sizes must be positive, got {kernel_sizes!r}")
        self.strides = int(strides)
        self.use_bias = bool(use_bias)
        self.convs = [
            layers.DepthwiseConv2D(
                k, strides=self.strides, padding="same", use_bias=self.use_bias, name=f"dw{i}_k{k}"
            )
            for i, k in enumerate(self.kernel_sizes)
        ]
        self._sizes: list[int] = []

    def compute_output_shape(self, input_shape: Sequence[int | None]) -> tuple[int | None, ...]:
        """Same channels; spatial size divided by the stride (``same`` padding)."""
        shape = self.convs[0].compute_output_shape((*input_shape[:-1], 1))
        return (*shape[:-1], input_shape[-1])

    def get_config(self) -> dict[str, Any]:
        """Constructor arguments (JSON-ready)."""
        config: dict[str, Any] = super().get_config()
        config.update(
            kernel_sizes=list(self.kernel_sizes), strides=self.strides, use_bias=self.use_bias
        )
        return config


@keras.saving.register_keras_serializable(package="tfcompress")
class GroupedConv2D(_ChannelGroups):
    """A convolution over channel groups: split channels, one ``Conv2D`` per group, concat.

    MixNet's grouped 1x1 expand/project (``a1.1``/``p1.1``: 2 groups). Input channels and
    output filters are both split with the MixConv rule (the first group takes the rest).

    Args:
        filters: Output channels in all.
        groups: Number of groups.
        kernel_size: Kernel size of every group (1 in MixNet).
        use_bias: Give each conv a bias.
        **kwargs: Keras layer options.

    Example:
        >>> y = GroupedConv2D(40, groups=2)(keras.ops.ones((1, 8, 8, 144)))  # doctest: +SKIP
    """

    def __init__(
        self,
        filters: int,
        groups: int,
        kernel_size: int = 1,
        use_bias: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.filters, self.groups = int(filters), int(groups)
        self.kernel_size, self.use_bias = int(kernel_size), bool(use_bias)
        out_sizes = _check_groups(self.filters, self.groups, "GroupedConv2D")
        self.convs = [
            layers.Conv2D(
                size, self.kernel_size, padding="same", use_bias=self.use_bias, name=f"conv{i}"
            )
            for i, size in enumerate(out_sizes)
        ]
        self._sizes: list[int] = []

    def compute_output_shape(self, input_shape: Sequence[int | None]) -> tuple[int | None, ...]:
        """Spatial size unchanged (stride 1, ``same``); ``filters`` channels."""
        return (*input_shape[:-1], self.filters)

    def get_config(self) -> dict[str, Any]:
        """Constructor arguments (JSON-ready)."""
        config: dict[str, Any] = super().get_config()
        config.update(
            filters=self.filters,
            groups=self.groups,
            kernel_size=self.kernel_size,
            use_bias=self.use_bias,
        )
        return config
