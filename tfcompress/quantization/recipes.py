"""Post-training quantization recipes: small, frozen, JSON round-trippable data.

Each recipe's converter settings are registered right here, next to its definition.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, ClassVar, TypeVar

from tfcompress.errors import InvalidInputError
from tfcompress.quantization.methods.catalog import (
    DEFAULT_PERCENTILE,
    canonical_methods,
    check_methods_for,
)

Configure = Callable[[Any, "Recipe", Any], None]  # (converter, recipe, tensorflow module)


@dataclass(frozen=True)
class RecipeSpec:
    """What a recipe name means: converter settings and the options it allows."""

    name: str
    summary: str
    needs_calibration: bool
    io_types: tuple[str, ...]
    configure: Configure
    float_fallback: bool = False  # may keep ops without an integer kernel in float


_RECIPES: dict[str, RecipeSpec] = {}


def register_recipe(
    name: str,
    *,
    summary: str,
    needs_calibration: bool,
    io_types: tuple[str, ...],
    float_fallback: bool = False,
) -> Callable[[Configure], Configure]:
    """Register the converter settings of recipe ``name``.

    Args:
        name: The recipe's name.
        summary: One line for listings.
        needs_calibration: The recipe calibrates activation ranges on representative data.
        io_types: dtypes the model's input and output may take.
        float_fallback: The recipe quantizes activations to integers and may keep ops that
            have no integer kernel in float (``Recipe(..., float_fallback=True)``).

    Returns:
        A decorator registering ``configure(converter, recipe, tf)``.

    Example:
        >>> @register_recipe("mine", summary="...", needs_calibration=False, io_types=("float32",))
        ... def _mine(converter, recipe, tf): ...  # doctest: +SKIP
    """

    def decorate(configure: Configure) -> Configure:
        _RECIPES[name] = RecipeSpec(
            name, summary, needs_calibration, io_types, configure, float_fallback
        )
        return configure

    return decorate


def recipe_spec(name: str) -> RecipeSpec:
    """The registered spec of ``name``.

    Raises:
        InvalidInputError: Unknown recipe.
    """
    if name not in _RECIPES:
        raise InvalidInputError(
            f"unknown recipe {name!r}; choose one of {', '.join(list_recipes())}."
        )
    return _RECIPES[name]


def list_recipes(*, include_float: bool = False) -> list[str]:
    """Names of the quantization recipes (optionally with the float32 reference)."""
    return [n for n in _RECIPES if include_float or n != "float32"]


Self = TypeVar("Self", bound="RecipeData")


class RecipeData:
    """The JSON round trip every recipe dataclass shares (``.tflite`` and ``.onnx``).

    Example:
        >>> Recipe.from_json(Recipe("int8").to_json()) == Recipe("int8")
        True
    """

    kind: ClassVar[str] = "recipe"  # how messages name it

    def with_options(self: Self, **changes: Any) -> Self:
        """A copy with ``changes`` applied (None values are ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})  # type: ignore[type-var]

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form, for reports and replay."""
        return asdict(self)  # type: ignore[call-overload]

    def to_json(self) -> str:
        """JSON form; :meth:`from_json` reads it back."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls: type[Self], data: dict[str, Any]) -> Self:
        """Build from :meth:`to_dict` output; unknown keys are an error."""
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        unknown = set(data) - known
        if unknown:
            raise InvalidInputError(
                f"unknown {cls.kind} fields {sorted(unknown)}; allowed: {sorted(known)}."
            )
        return cls(**data)

    @classmethod
    def from_json(cls: type[Self], text: str) -> Self:
        """Build from :meth:`to_json` output."""
        return cls.from_dict(json.loads(text))


@dataclass(frozen=True)
class Recipe(RecipeData):
    """A post-training quantization recipe.

    Attributes:
        name: ``dynamic``, ``float16``, ``int8``, ``int16x8`` (or ``float32``: no quantization).
        input_type: dtype of the model input: ``float32``; ``int8``/``uint8`` for ``int8``;
            ``int16`` for ``int16x8``.
        output_type: dtype of the model output (same choices as ``input_type``).
        per_channel: Per-channel weight scales (more accurate); False for per-tensor.
        calibration_samples: Representative samples used to calibrate activation ranges.
        float_fallback: ``int8``/``int16x8`` only: keep ops that have no integer kernel in
            float (between DEQUANTIZE and QUANTIZE) instead of refusing the model; the result
            lists them as ``float_ops``.
        batch_size: A static batch dimension for the file (e.g. 1 for the Edge TPU, whose
            compiler needs every shape fixed); None keeps the model's own (usually dynamic).
        float_nodes: ``int8`` only: op output tensors to keep in float (the converter's
            ``denylisted_nodes``; names as :func:`~tfcompress.quantization.selective.rank_layers`
            reports them), everything else quantized. See ``docs/quantization.md``.
        methods: ``int8`` only: post-training methods applied before the converter quantizes
            (``equalize``, ``adaround``, ``bias-correction``, ``percentile-ranges``,
            ``mse-ranges``; see :mod:`tfcompress.quantization.methods`), stored in the order
            they run. Empty: the converter's own int8.
        range_percentile: The percentile ``percentile-ranges`` keeps (default 99.99).

    Example:
        >>> Recipe.from_json(Recipe("int8", input_type="uint8").to_json()).input_type
        'uint8'
    """

    name: str
    input_type: str = "float32"
    output_type: str = "float32"
    per_channel: bool = True
    calibration_samples: int = 200
    float_fallback: bool = False
    batch_size: int | None = None
    float_nodes: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()
    range_percentile: float = DEFAULT_PERCENTILE

    def __post_init__(self) -> None:
        spec = recipe_spec(self.name)
        # JSON gives a list back: store a tuple, so a replayed recipe equals the original.
        object.__setattr__(self, "float_nodes", _check_float_nodes(self.name, self.float_nodes))
        methods = canonical_methods(self.methods)
        object.__setattr__(self, "methods", methods)
        percentile = check_methods_for(self.name, methods, self.range_percentile)
        object.__setattr__(self, "range_percentile", percentile)
        for option in ("input_type", "output_type"):
            value = getattr(self, option)
            if value not in spec.io_types:
                raise InvalidInputError(
                    f"recipe {self.name!r} does not support {option}={value!r}; choose one of "
                    f"{', '.join(spec.io_types)}."
                )
        if not isinstance(self.calibration_samples, int) or self.calibration_samples < 1:
            raise InvalidInputError(
                f"calibration_samples must be a positive integer, got {self.calibration_samples!r}."
            )
        if self.batch_size is not None and (
            isinstance(self.batch_size, bool)
            or not isinstance(self.batch_size, int)
            or self.batch_size < 1
        ):
            raise InvalidInputError(
                f"batch_size must be a positive integer or None, got {self.batch_size!r}."
            )
        if not isinstance(self.float_fallback, bool):
            raise InvalidInputError(
                f"float_fallback must be True or False, got {self.float_fallback!r}."
            )
        if self.float_fallback and not spec.float_fallback:
            allowed = ", ".join(n for n, s in _RECIPES.items() if s.float_fallback)
            raise InvalidInputError(
                f"recipe {self.name!r} has no integer activations to fall back from; "
                f"float_fallback applies to {allowed}."
            )

    @property
    def spec(self) -> RecipeSpec:
        """The registered converter settings."""
        return recipe_spec(self.name)

    @classmethod
    def coerce(cls, recipe: str | Recipe) -> Recipe:
        """Accept a recipe name or a :class:`Recipe`."""
        return recipe if isinstance(recipe, Recipe) else cls(str(recipe))


def _check_float_nodes(recipe: str, nodes: Any) -> tuple[str, ...]:
    if isinstance(nodes, str) or not isinstance(nodes, list | tuple):
        raise InvalidInputError(
            f"float_nodes must be a list of node names, got {nodes!r}; e.g. "
            "['model/dense_1/MatMul;model/dense_1/Relu'] (see rank_layers)."
        )
    if not all(isinstance(n, str) and n for n in nodes) or len(set(nodes)) != len(nodes):
        raise InvalidInputError(
            f"float_nodes must be distinct non-empty node names, got {list(nodes)!r}."
        )
    if nodes and recipe != "int8":
        why = (
            "its activations are float already"
            if recipe in ("float32", "dynamic", "float16")
            else "TF calibrates int16 activations with its older quantizer, which has no denylist"
        )
        raise InvalidInputError(
            f"float_nodes applies to recipe 'int8' only, not {recipe!r} ({why}); drop "
            "float_nodes or use recipe='int8'."
        )
    return tuple(nodes)


_FLOAT = ("float32",)


@register_recipe(
    "float32", summary="no quantization (reference)", needs_calibration=False, io_types=_FLOAT
)
def _float32(converter: Any, recipe: Recipe, tf: Any) -> None:
    del converter, recipe, tf  # the converter's defaults are the float32 reference


@register_recipe(
    "dynamic", summary="int8 weights, float activations", needs_calibration=False, io_types=_FLOAT
)
def _dynamic(converter: Any, recipe: Recipe, tf: Any) -> None:
    del recipe
    converter.optimizations = [tf.lite.Optimize.DEFAULT]


@register_recipe(
    "float16",
    summary="float16 weights, float32 compute on CPU",
    needs_calibration=False,
    io_types=_FLOAT,
)
def _float16(converter: Any, recipe: Recipe, tf: Any) -> None:
    del recipe
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_types = [tf.float16]


def _with_fallback(ops: list[Any], recipe: Recipe, tf: Any) -> list[Any]:
    # TFLITE_BUILTINS next to the integer set is the converter's documented "allow float"
    # switch (QuantizationMode.is_allow_float): ops without an integer kernel stay float
    # between DEQUANTIZE and QUANTIZE instead of failing the conversion.
    return [*ops, tf.lite.OpsSet.TFLITE_BUILTINS] if recipe.float_fallback else ops


@register_recipe(
    "int8",
    summary="full integer: int8 weights and activations",
    needs_calibration=True,
    io_types=("float32", "int8", "uint8"),
    float_fallback=True,
)
def _int8(converter: Any, recipe: Recipe, tf: Any) -> None:
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_ops = _with_fallback(
        [tf.lite.OpsSet.TFLITE_BUILTINS_INT8], recipe, tf
    )
    converter.inference_input_type = getattr(tf, recipe.input_type)
    converter.inference_output_type = getattr(tf, recipe.output_type)


@register_recipe(
    "int16x8",
    summary="int16 activations, int8 weights",
    needs_calibration=True,
    io_types=("float32", "int16"),
    float_fallback=True,
)
def _int16x8(converter: Any, recipe: Recipe, tf: Any) -> None:
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_ops = _with_fallback(
        [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8], recipe, tf
    )
    converter.inference_input_type = getattr(tf, recipe.input_type)
    converter.inference_output_type = getattr(tf, recipe.output_type)
