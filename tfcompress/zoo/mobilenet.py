"""MobileNet V1, V2 and V3 (Small/Large, plain and minimalistic) from ``keras.applications``.

Keras refuses inputs below 32x32 for all of them, so that is their ``min_resolution``.
MobileNetV3 is built with ``include_preprocessing=False``: like every zoo model it takes
the pixels as the user feeds them, with no Rescaling layer inside.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tfcompress.errors import InvalidInputError
from tfcompress.zoo.registry import register_model

_MIN = 32  # keras.applications' own minimum for the MobileNets


def _build(
    name: str,
    factory: Callable[[Any], Callable[..., Any]],
    *,
    input_shape: tuple[int, int, int],
    num_classes: int,
    width_multiplier: float,
    weights: str | None,
    dropout_keyword: str | None,
    options: dict[str, Any],
    **fixed: Any,
) -> Any:
    """Call the Keras application with our arguments; its ValueErrors become ours."""
    import keras

    allowed = {"classifier_activation"} | ({"dropout_rate"} if dropout_keyword else set())
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise InvalidInputError(
            f"{name} does not take option(s) {', '.join(unknown)}; it takes "
            f"{', '.join(sorted(allowed))}."
        )
    kwargs: dict[str, Any] = {
        "classifier_activation": options.get("classifier_activation", "softmax")
    }
    if dropout_keyword and "dropout_rate" in options:
        kwargs[dropout_keyword] = float(options["dropout_rate"])
    try:
        return factory(keras.applications)(
            input_shape=input_shape,
            alpha=width_multiplier,
            include_top=True,
            weights=weights,
            classes=num_classes,
            name=name,
            **kwargs,
            **fixed,
        )
    except ValueError as error:
        message = " ".join(str(error).split())
        raise InvalidInputError(
            f"keras.applications cannot build {name} with input_shape={input_shape}, "
            f"width {width_multiplier:g}, {num_classes} classes, weights={weights!r}: "
            f"{message}"
        ) from error


@register_model("mobilenet_v1", family="mobilenet_v1", min_resolution=_MIN)
def mobilenet_v1(*, weights: str | None = None, **arguments: Any) -> Any:
    """MobileNetV1 (Howard et al. 2017); ``dropout_rate`` is Keras' ``dropout``."""
    return _build(
        "mobilenet_v1",
        lambda apps: apps.MobileNet,
        weights=weights,
        dropout_keyword="dropout",
        **_split(arguments),
    )


@register_model("mobilenet_v2", family="mobilenet_v2", min_resolution=_MIN)
def mobilenet_v2(*, weights: str | None = None, **arguments: Any) -> Any:
    """MobileNetV2 (Sandler et al. 2018); Keras' builder has no dropout option."""
    return _build(
        "mobilenet_v2",
        lambda apps: apps.MobileNetV2,
        weights=weights,
        dropout_keyword=None,
        **_split(arguments),
    )


def _v3(name: str, large: bool, minimalistic: bool) -> Callable[..., Any]:
    """MobileNetV3 (Howard et al. 2019): hard-swish and squeeze-excite, unless minimalistic.

    Minimalistic: ReLU, 3x3 kernels, no squeeze-excite.
    """

    def build(*, weights: str | None = None, **arguments: Any) -> Any:
        return _build(
            name,
            lambda apps: apps.MobileNetV3Large if large else apps.MobileNetV3Small,
            weights=weights,
            dropout_keyword="dropout_rate",
            minimalistic=minimalistic,
            include_preprocessing=False,
            **_split(arguments),
        )

    return build


for _name, _large, _minimal in (
    ("mobilenet_v3_small", False, False),
    ("mobilenet_v3_large", True, False),
    ("mobilenet_v3_small_minimalistic", False, True),
    ("mobilenet_v3_large_minimalistic", True, True),
):
    register_model(_name, family="mobilenet_v3", min_resolution=_MIN)(_v3(_name, _large, _minimal))


def _split(arguments: dict[str, Any]) -> dict[str, Any]:
    """Separate the registry's common arguments from the builder options."""
    common = ("input_shape", "num_classes", "width_multiplier")
    options = {key: value for key, value in arguments.items() if key not in common}
    return {**{key: arguments[key] for key in common}, "options": options}
