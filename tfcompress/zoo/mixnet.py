"""MixNet-S/M/L (Tan & Le 2019), built here from the reference block strings.

The stage definitions below are the ones of the TensorFlow reference builder
(tensorflow/tpu ``mixnet_builder.py``); :mod:`tfcompress.zoo.blocks` decodes them and
:mod:`tfcompress.zoo.layers` holds MixConv and the grouped 1x1 convolution. Each block is
an inverted residual: grouped 1x1 expansion (skipped when ``e1``), MixConv depthwise,
optional squeeze-excite, grouped 1x1 projection, and a skip connection when the stride is
1 and the width does not change. Stem: 3x3 stride-2 conv; head: 1x1 conv to 1536
channels (at every width), global average pooling, dropout, dense. Drop-connect
(stochastic depth) of the reference training recipe is not included.

Total stride is 32, so inputs are at least 32x32 (the last stage then sees 1x1 maps).
"""

from __future__ import annotations

from typing import Any

from tfcompress.errors import InvalidInputError
from tfcompress.zoo.blocks import BlockSpec, decode_arch, round_filters
from tfcompress.zoo.registry import register_model

__all__ = ["MIXNET_M_BLOCKS", "MIXNET_S_BLOCKS", "build_mixnet"]

MIXNET_S_BLOCKS = (
    "r1_k3_a1_p1_s11_e1_i16_o16",
    "r1_k3_a1.1_p1.1_s22_e6_i16_o24",
    "r1_k3_a1.1_p1.1_s11_e3_i24_o24",
    "r1_k3.5.7_a1_p1_s22_e6_i24_o40_se0.5_sw",
    "r3_k3.5_a1.1_p1.1_s11_e6_i40_o40_se0.5_sw",
    "r1_k3.5.7_a1_p1.1_s22_e6_i40_o80_se0.25_sw",
    "r2_k3.5_a1_p1.1_s11_e6_i80_o80_se0.25_sw",
    "r1_k3.5.7_a1.1_p1.1_s11_e6_i80_o120_se0.5_sw",
    "r2_k3.5.7.9_a1.1_p1.1_s11_e3_i120_o120_se0.5_sw",
    "r1_k3.5.7.9.11_a1_p1_s22_e6_i120_o200_se0.5_sw",
    "r2_k3.5.7.9_a1_p1.1_s11_e6_i200_o200_se0.5_sw",
)
MIXNET_M_BLOCKS = (
    "r1_k3_a1_p1_s11_e1_i24_o24",
    "r1_k3.5.7_a1.1_p1.1_s22_e6_i24_o32",
    "r1_k3_a1.1_p1.1_s11_e3_i32_o32",
    "r1_k3.5.7.9_a1_p1_s22_e6_i32_o40_se0.5_sw",
    "r3_k3.5_a1.1_p1.1_s11_e6_i40_o40_se0.5_sw",
    "r1_k3.5.7_a1_p1_s22_e6_i40_o80_se0.25_sw",
    "r3_k3.5.7.9_a1.1_p1.1_s11_e6_i80_o80_se0.25_sw",
    "r1_k3_a1_p1_s11_e6_i80_o120_se0.5_sw",
    "r3_k3.5.7.9_a1.1_p1.1_s11_e3_i120_o120_se0.5_sw",
    "r1_k3.5.7.9_a1_p1_s22_e6_i120_o200_se0.5_sw",
    "r3_k3.5.7.9_a1_p1.1_s11_e6_i200_o200_se0.5_sw",
)
_HEAD = 1536
_MIN = 32
_BN = {"momentum": 0.99, "epsilon": 1e-3}


def build_mixnet(
    name: str,
    blocks: tuple[str, ...] | str,
    *,
    stem_filters: int,
    input_shape: tuple[int, int, int],
    num_classes: int,
    width_multiplier: float,
    weights: str | None = None,
    dropout_rate: float = 0.2,
    classifier_activation: str | None = "softmax",
    head_filters: int = _HEAD,
) -> Any:
    """Build a MixNet from block strings (see docs/zoo.md for the notation).

    A float32 ``keras.Model``: ``width_multiplier`` scales every channel count (rounded to
    multiples of 8) but ``head_filters`` (the 1x1 head conv); ``stem_filters`` is at width 1.0.

    Raises:
        InvalidInputError: ``weights="imagenet"`` (no MixNet weights ship with Keras), a
            weights file that does not fit, or a dropout rate outside [0, 1).

    Example:
        >>> model = build_mixnet("mine", MIXNET_S_BLOCKS, stem_filters=16,
        ...     input_shape=(32, 32, 1), num_classes=10, width_multiplier=0.5)  # doctest: +SKIP
    """
    import keras
    from keras import layers

    if weights == "imagenet":
        raise InvalidInputError(
            f"{name}: no ImageNet weights ship with Keras for MixNet; use weights=None "
            "(random init, then train) or a path to a weights file of this architecture."
        )
    if not 0 <= float(dropout_rate) < 1:
        raise InvalidInputError(f"dropout_rate must be in [0, 1), got {dropout_rate!r}.")
    specs = decode_arch(blocks)
    inputs = keras.Input(shape=input_shape, name="input")
    x = layers.Conv2D(
        round_filters(stem_filters, width_multiplier),
        3,
        strides=2,
        padding="same",
        use_bias=False,
        name="stem_conv",
    )(inputs)
    x = layers.BatchNormalization(**_BN, name="stem_bn")(x)
    x = layers.ReLU(name="stem_relu")(x)
    for stage, spec in enumerate(specs):
        filters_in = round_filters(spec.input_filters, width_multiplier)
        filters_out = round_filters(spec.output_filters, width_multiplier)
        for repeat in range(spec.repeats):
            first = repeat == 0
            x = _block(
                x,
                spec,
                filters_in if first else filters_out,
                filters_out,
                spec.stride if first else 1,
                prefix=f"block{stage}_{repeat}",
            )
    # The head keeps its width at every multiplier: that is what gives MixNet-L (M at 1.3)
    # the paper's 7.3M parameters; scaled to 2000 channels it would have 7.9M.
    x = layers.Conv2D(head_filters, 1, use_bias=False, name="head_conv")(x)
    x = layers.BatchNormalization(**_BN, name="head_bn")(x)
    x = layers.ReLU(name="head_relu")(x)
    x = layers.GlobalAveragePooling2D(name="pool")(x)
    x = layers.Dropout(float(dropout_rate), name="dropout")(x)
    outputs = layers.Dense(num_classes, activation=classifier_activation, name="predictions")(x)
    model = keras.Model(inputs, outputs, name=name)
    if weights is not None:
        try:
            model.load_weights(weights)
        except (ValueError, OSError) as error:
            raise InvalidInputError(
                f"{name}: cannot load weights {weights!r} ({' '.join(str(error).split())}); "
                "pass a .weights.h5 saved from this architecture with the same arguments."
            ) from error
    return model


def _block(
    x: Any, spec: BlockSpec, filters_in: int, filters_out: int, stride: int, prefix: str
) -> Any:
    """One inverted-residual MixNet block."""
    from keras import layers

    from tfcompress.zoo.layers import GroupedConv2D, MixConv

    activation = "swish" if spec.swish else "relu"
    shortcut = x
    expanded = filters_in * spec.expand_ratio
    if spec.expand_ratio != 1:
        x = GroupedConv2D(expanded, spec.expand_groups, name=f"{prefix}_expand")(x)
        x = layers.BatchNormalization(**_BN, name=f"{prefix}_expand_bn")(x)
        x = layers.Activation(activation, name=f"{prefix}_expand_act")(x)
    x = MixConv(spec.kernel_sizes, strides=stride, name=f"{prefix}_mixconv")(x)
    x = layers.BatchNormalization(**_BN, name=f"{prefix}_mixconv_bn")(x)
    x = layers.Activation(activation, name=f"{prefix}_mixconv_act")(x)
    if spec.se_ratio > 0:
        reduced = max(1, int(filters_in * spec.se_ratio))  # of the block's input, as the paper
        se = layers.GlobalAveragePooling2D(keepdims=True, name=f"{prefix}_se_pool")(x)
        se = layers.Conv2D(reduced, 1, activation=activation, name=f"{prefix}_se_reduce")(se)
        se = layers.Conv2D(expanded, 1, activation="sigmoid", name=f"{prefix}_se_expand")(se)
        x = layers.Multiply(name=f"{prefix}_se")([x, se])
    x = GroupedConv2D(filters_out, spec.project_groups, name=f"{prefix}_project")(x)
    x = layers.BatchNormalization(**_BN, name=f"{prefix}_project_bn")(x)
    if spec.skip and stride == 1 and filters_in == filters_out:
        x = layers.Add(name=f"{prefix}_add")([x, shortcut])
    return x


def _mixnet(
    name: str, blocks: tuple[str, ...], stem: int, dropout: float, width: float, /, **arguments: Any
) -> Any:
    options = {k: v for k, v in arguments.items() if k not in _COMMON}
    unknown = sorted(set(options) - {"dropout_rate", "classifier_activation"})
    if unknown:
        raise InvalidInputError(
            f"{name} does not take option(s) {', '.join(unknown)}; it takes "
            "classifier_activation and dropout_rate."
        )
    common = {k: arguments[k] for k in _COMMON if k in arguments}
    common["width_multiplier"] = common["width_multiplier"] * width
    options.setdefault("dropout_rate", dropout)
    return build_mixnet(name, blocks, stem_filters=stem, **common, **options)


_COMMON = ("input_shape", "num_classes", "width_multiplier", "weights")


@register_model("mixnet_s", family="mixnet", min_resolution=_MIN)
def mixnet_s(**arguments: Any) -> Any:
    """MixNet-S: stem 16, 11 stages, dropout 0.2 (4.1M params, 256M MACs at 224, 1000 classes)."""
    return _mixnet("mixnet_s", MIXNET_S_BLOCKS, 16, 0.2, 1.0, **arguments)


@register_model("mixnet_m", family="mixnet", min_resolution=_MIN)
def mixnet_m(**arguments: Any) -> Any:
    """MixNet-M: stem 24, 11 stages, dropout 0.25 (5.0M params, 360M MACs at 224)."""
    return _mixnet("mixnet_m", MIXNET_M_BLOCKS, 24, 0.25, 1.0, **arguments)


@register_model("mixnet_l", family="mixnet", min_resolution=_MIN)
def mixnet_l(**arguments: Any) -> Any:
    """MixNet-L: MixNet-M at width 1.3 (7.3M params, 565M MACs at 224)."""
    return _mixnet("mixnet_l", MIXNET_M_BLOCKS, 24, 0.25, 1.3, **arguments)
