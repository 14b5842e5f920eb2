"""The zoo's registry: ``@register_model`` next to each builder, ``create_model`` by name.

A builder lives in any module of ``zoo/`` (:data:`MODELS` finds the modules whose lines start
with ``@register_model``); nothing lists them.

Builders are plain functions ``builder(*, input_shape, num_classes, width_multiplier,
weights, **options) -> keras.Model``; the registry validates the common arguments once, so
every builder gets a clean 3-tuple shape, a positive width and at least one class.
"""

from __future__ import annotations

import fnmatch
import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tfcompress._config_fields import number
from tfcompress._registry import Registry
from tfcompress.errors import InvalidInputError

__all__ = ["MODELS", "ZooEntry", "get_entry", "list_models", "register_model", "validate_arguments"]

Builder = Callable[..., Any]


@dataclass(frozen=True)
class ZooEntry:
    """A registered architecture: its name, family, smallest input side and builder."""

    name: str
    family: str
    min_resolution: int
    builder: Builder
    summary: str = ""


#: Every architecture: a builder with ``@register_model(NAME, ...)`` in a module of zoo/.
MODELS: Registry[ZooEntry] = Registry("zoo model", "zoo", "register_model")


def register_model(
    name: str, *, family: str, min_resolution: int, summary: str = ""
) -> Callable[[Builder], Builder]:
    """Register ``builder`` under ``name`` (a decorator, placed next to the builder).

    Args:
        name: The name :func:`create_model` takes, e.g. ``"mixnet_s"``.
        family: Its family (``"mobilenet_v2"``, ``"mixnet"``...).
        min_resolution: Smallest input height and width it accepts.
        summary: One line for listings.

    Raises:
        ValueError: ``name`` is already registered.
        InvalidInputError: ``min_resolution`` < 1.

    Example:
        >>> @register_model("tiny_cnn", family="custom", min_resolution=8)  # doctest: +SKIP
        ... def tiny_cnn(*, input_shape, num_classes, width_multiplier, weights): ...
    """
    if min_resolution < 1:
        raise InvalidInputError(f"min_resolution must be at least 1, got {min_resolution}.")

    def decorate(builder: Builder) -> Builder:
        MODELS.register(name, ZooEntry(name, family, int(min_resolution), builder, summary))
        return builder

    return decorate


def list_models(pattern: str = "*") -> list[str]:
    """Names of the registered models matching a shell-style pattern, sorted.

    Example:
        >>> list_models("mixnet*")
        ['mixnet_l', 'mixnet_m', 'mixnet_s']
    """
    return [name for name in MODELS if fnmatch.fnmatchcase(name, pattern)]


def get_entry(name: str) -> ZooEntry:
    """The registry entry of ``name``.

    Raises:
        UnknownNameError: Unknown name; the message lists them, close names first.

    Example:
        >>> get_entry("mixnet_s").family
        'mixnet'
    """
    return MODELS.get(name)


MAX_RESOLUTION = 4096
"""Largest input side the zoo builds (a 4096x4096 image is far beyond an edge model's)."""
MAX_CHANNELS = 64
MAX_CLASSES = 100_000
"""ImageNet-21k has 21,843 classes; more is a typo or a hostile option."""
MAX_WIDTH_MULTIPLIER = 8.0
"""Published MobileNet/MixNet widths go up to 1.4; 8 already means 64x the parameters."""


def validate_arguments(
    entry: ZooEntry, input_shape: Sequence[int], num_classes: int, width_multiplier: float
) -> tuple[tuple[int, int, int], int, float]:
    """Check the arguments every builder shares; return them normalised.

    Raises:
        InvalidInputError: ``input_shape`` is not (height, width, channels) of positive
            ints, is smaller than the model's minimum or beyond :data:`MAX_RESOLUTION` /
            :data:`MAX_CHANNELS`, ``num_classes`` is not 1 to :data:`MAX_CLASSES`, or the
            width multiplier is not in (0, :data:`MAX_WIDTH_MULTIPLIER`].

    Example:
        >>> validate_arguments(get_entry("mixnet_s"), [32, 32, 1], 10, 0.5)
        ((32, 32, 1), 10, 0.5)
    """
    shape = tuple(input_shape) if isinstance(input_shape, list | tuple) else ()
    if len(shape) != 3 or not all(_is_int(d) and d >= 1 for d in shape):
        raise InvalidInputError(
            f"input_shape must be (height, width, channels) of positive integers, got "
            f"{input_shape!r}; e.g. (224, 224, 3) or (32, 32, 1)."
        )
    height, width, channels = (int(d) for d in shape)
    if max(height, width) > MAX_RESOLUTION or channels > MAX_CHANNELS:
        raise InvalidInputError(
            f"input_shape {height}x{width}x{channels} is beyond what the zoo builds (at most "
            f"{MAX_RESOLUTION} pixels a side and {MAX_CHANNELS} channels); edge models take "
            "e.g. 224x224x3."
        )
    if min(height, width) < entry.min_resolution:
        raise InvalidInputError(
            f"{entry.name} needs inputs of at least {entry.min_resolution}x"
            f"{entry.min_resolution}, got {height}x{width}; resize or pad the images "
            f"(e.g. tf.image.resize or np.pad) to {entry.min_resolution} or more."
        )
    if not _is_int(num_classes) or not 1 <= num_classes <= MAX_CLASSES:
        raise InvalidInputError(
            f"num_classes must be an integer from 1 to {MAX_CLASSES}, got {num_classes!r}."
        )
    number(  # closed above: 8 itself is allowed
        0,
        math.nextafter(MAX_WIDTH_MULTIPLIER, math.inf),
        f"a number above 0 and at most {MAX_WIDTH_MULTIPLIER:g} (e.g. 0.5, 1.0 or 1.3)",
    )("width_multiplier", width_multiplier)
    return (height, width, channels), int(num_classes), float(width_multiplier)


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)
