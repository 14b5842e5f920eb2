"""``create_model`` and ``model_info``: build a registered model, count what it costs."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tfcompress.errors import InvalidInputError
from tfcompress.zoo.registry import get_entry, validate_arguments

__all__ = ["ZooModelInfo", "create_model", "model_info"]


def create_model(
    name: str,
    *,
    input_shape: Sequence[int] = (224, 224, 3),
    num_classes: int = 1000,
    width_multiplier: float = 1.0,
    weights: str | None = None,
    **builder_options: Any,
) -> Any:
    """Build a registered architecture as a float32 Keras 3 model.

    Every zoo model takes float32 images of ``input_shape`` in the range the user trains
    with (no rescaling inside: MobileNetV3 is built with ``include_preprocessing=False``,
    so all families see the same input; feed [0, 1] or standardised pixels, and the
    ``[-1, 1]`` range the ImageNet weights were trained on when using
    ``weights="imagenet"``). The output is ``num_classes`` softmax probabilities unless
    ``classifier_activation=None`` asks for logits.

    Args:
        name: A name from :func:`list_models`, e.g. ``"mixnet_s"``.
        input_shape: (height, width, channels); any channel count with ``weights=None``.
        num_classes: Classes of the classifier head.
        width_multiplier: Channel multiplier (Keras' ``alpha`` for MobileNets; MixNet
            channels are rounded to multiples of 8).
        weights: None (random init), ``"imagenet"`` (MobileNets only; downloaded by Keras,
            needs 3 channels, 1000 classes and one of Keras' published widths) or a path to a
            weights file of this exact architecture.
        **builder_options: Options of the family's builder: ``dropout_rate`` and
            ``classifier_activation`` for every family. Any other option is refused.

    Returns:
        An uncompiled ``keras.Model`` named ``name``.

    Raises:
        InvalidInputError: Unknown name (with close names), bad ``input_shape`` or one
            below the model's ``min_resolution``, ``num_classes`` < 1, a width <= 0, sizes
            beyond the zoo's limits (:func:`~tfcompress.zoo.registry.validate_arguments`)
            or a model too large for this machine's memory, an unknown builder option, or
            weights Keras cannot use with these arguments.

    Example:
        >>> model = create_model("mixnet_s", input_shape=(32, 32, 1), num_classes=10)
        >>> model.output_shape
        (None, 10)
    """
    entry = get_entry(name)
    shape, classes, width = validate_arguments(entry, input_shape, num_classes, width_multiplier)
    if weights is not None and not isinstance(weights, str):
        raise InvalidInputError(
            f"weights must be None, 'imagenet' or a file path, got {weights!r}."
        )
    from tfcompress._compat.tf import tensorflow

    try:
        return entry.builder(
            input_shape=shape,
            num_classes=classes,
            width_multiplier=width,
            weights=weights,
            **builder_options,
        )
    except (tensorflow().errors.ResourceExhaustedError, MemoryError) as error:
        height, width_px, channels = shape
        raise InvalidInputError(
            f"{name} at {height}x{width_px}x{channels}, {classes} classes, width {width:g} is too "
            "large to build in this machine's memory; choose a smaller input shape, width "
            "multiplier or number of classes."
        ) from error


@dataclass(frozen=True)
class ZooModelInfo:
    """What one zoo model costs at one input shape, measured on its float ``.tflite``.

    Attributes:
        name: Registered name.
        family: Its family.
        input_shape: (height, width, channels).
        num_classes: Classes of the head.
        width_multiplier: Channel multiplier.
        params: Parameters of the Keras model (``count_params``: weights, biases and the
            batch-norm statistics).
        macs: Multiply-accumulates of one image, counted from the Keras layers
            (:func:`tfcompress.zoo.macs.count_macs`, which counts what the harness's
            ``.tflite`` counter counts on the converted file); None only when
            :func:`model_info` was asked not to count them.
        min_resolution: Smallest input height/width the model takes.
    """

    name: str
    family: str
    input_shape: tuple[int, int, int]
    num_classes: int
    width_multiplier: float
    params: int
    macs: int | None
    min_resolution: int

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready)."""
        data = asdict(self)
        data["input_shape"] = list(self.input_shape)
        return data

    def __str__(self) -> str:
        height, width, channels = self.input_shape
        macs = "MACs not counted" if self.macs is None else f"{self.macs / 1e6:.1f}M MACs"
        return (
            f"{self.name} ({self.family}) at {height}x{width}x{channels}, "
            f"{self.num_classes} classes, width {self.width_multiplier:g}: "
            f"{self.params / 1e6:.2f}M params, {macs}"
        )


def model_info(
    name: str,
    *,
    input_shape: Sequence[int] = (224, 224, 3),
    num_classes: int = 1000,
    width_multiplier: float = 1.0,
    count_macs: bool = True,
) -> ZooModelInfo:
    """Build ``name`` (random weights) and count its parameters and MACs, without converting.

    Results are cached per process. Counting MACs (from the layers) takes a second even for
    MixNet-L at 224; ``count_macs=False`` leaves ``macs`` None.

    Raises:
        InvalidInputError: As :func:`create_model`.

    Example:
        >>> model_info("mixnet_s").params  # doctest: +SKIP
        4166798
    """
    entry = get_entry(name)
    shape, classes, width = validate_arguments(entry, input_shape, num_classes, width_multiplier)
    return _cached_info(entry.name, shape, classes, width, bool(count_macs))


@functools.lru_cache(maxsize=64)
def _cached_info(
    name: str, shape: tuple[int, int, int], classes: int, width: float, count_macs: bool
) -> ZooModelInfo:
    from tfcompress.zoo import macs as mac_counter

    entry = get_entry(name)
    model = create_model(name, input_shape=shape, num_classes=classes, width_multiplier=width)
    return ZooModelInfo(
        name=name,
        family=entry.family,
        input_shape=shape,
        num_classes=classes,
        width_multiplier=width,
        params=int(model.count_params()),
        macs=mac_counter.count_macs(model) if count_macs else None,
        min_resolution=entry.min_resolution,
    )
