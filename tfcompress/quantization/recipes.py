"""Post-training quantization recipes: small, frozen, JSON round-trippable data.

Each recipe's converter settings are registered next to its definition (``@register_recipe``
here, or in a module of its own under ``quantization/``: :data:`RECIPES` finds it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, ClassVar, TypeVar

from tfcompress._config_fields import boolean, check_fields, integer, option
from tfcompress._registry import Registry
from tfcompress.data.calibration import DEFAULT_CALIBRATION_SAMPLES
from tfcompress.data.validation import check_count
from tfcompress.errors import InvalidInputError
from tfcompress.quantization.methods.catalog import (
    DEFAULT_PERCENTILE,
    canonical_methods,
    check_methods_for,
)
from tfcompress.quantization.rules import Rule, coerce_rules

#: The engines that make a ``.tflite``: the TFLite converter and LiteRT Quantizer.
ENGINES = ("converter", "litert-quantizer")
#: Blockwise weight scales LiteRT Quantizer offers (``Recipe.block_size``).
BLOCK_SIZES = (32, 64, 128)
#: What ``--input-type`` shows: :func:`list_io_types` (tests/test_cli_vocabulary.py checks it).
IO_METAVAR = "{float32,int8,uint8,int16}"
#: The largest static batch dimension (``Recipe.static_batch``): a tensor dimension is int32.
MAX_STATIC_BATCH = 2**31 - 1  # 2**64 overflows the converter
STATIC_BATCHES = f"a positive integer up to {MAX_STATIC_BATCH} or None"

Configure = Callable[[Any, "Recipe", Any], None]  # (converter, recipe, tensorflow module)

#: Artifact formats :func:`tfcompress.quantize` makes.
FORMATS = ("tflite", "onnx")


@dataclass(frozen=True)
class RecipeSpec:
    """What a recipe name means: converter settings and the options it allows."""

    name: str
    summary: str  # one line for listings
    needs_calibration: bool  # calibrates activation ranges on representative data
    io_types: tuple[str, ...]  # the dtypes the model's input and output may take
    configure: Configure
    integer_activations: bool = False  # integer activations: ``integer_only`` applies
    engines: tuple[str, ...] = ("converter",)
    # What every op becomes under LiteRT Quantizer, as a rule (None: nothing is quantized).
    base_rule: Rule | None = None
    float16_weights: bool = False  # LiteRT Quantizer casts weights to float16 instead


#: Every recipe, in registration order: ``@register_recipe`` in a module of quantization/.
RECIPES: Registry[RecipeSpec] = Registry("recipe", "quantization", "register_recipe", ordered=True)


def register_recipe(name: str, **spec: Any) -> Callable[[Configure], Configure]:
    """Register the converter settings of recipe ``name``.

    The keywords are the :class:`RecipeSpec` fields of the same names (see it): ``summary``,
    ``needs_calibration`` and ``io_types`` are required.

    Returns:
        A decorator registering ``configure(converter, recipe, tf)``.

    Example:
        >>> @register_recipe("mine", summary="...", needs_calibration=False, io_types=("float32",))
        ... def _mine(converter, recipe, tf): ...  # doctest: +SKIP
    """

    def decorate(configure: Configure) -> Configure:
        RECIPES.register(name, RecipeSpec(name, configure=configure, **spec), replace=True)
        return configure

    return decorate


def recipe_spec(name: str) -> RecipeSpec:
    """The registered spec of ``name`` (UnknownNameError lists the recipes)."""
    return RECIPES.get(name)


def list_recipes(*, include_float: bool = False, engine: str | None = None) -> list[str]:
    """Names of the quantization recipes (optionally with the float32 reference).

    Args:
        include_float: List ``float32`` (no quantization) too.
        engine: Only the recipes this engine makes.

    Example:
        >>> list_recipes(engine="litert-quantizer")[-2:]
        ['int4-weights', 'int4-dynamic']
    """
    return [
        n
        for n in RECIPES
        if (include_float or n != "float32") and engine in (None, *RECIPES.get(n).engines)
    ]


def list_io_types() -> list[str]:
    """Every input/output dtype some recipe takes, in first-registered order.

    Example:
        >>> list_io_types()
        ['float32', 'int8', 'uint8', 'int16']
    """
    return list(dict.fromkeys(t for spec in map(RECIPES.get, RECIPES) for t in spec.io_types))


Self = TypeVar("Self", bound="RecipeData")


class RecipeData:
    """The JSON round trip every recipe dataclass shares (``.tflite`` and ``.onnx``).

    Example:
        >>> Recipe.from_json(Recipe("int8").to_json()) == Recipe("int8")
        True
    """

    kind: ClassVar[str] = "recipe"  # how messages name it
    #: Fields renamed before the first release, each with the error that names its
    #: replacement: a recipe (a replayed report's too) that has one is refused, never read.
    renamed_keys: ClassVar[dict[str, str]] = {}

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
        """Build from :meth:`to_dict` output; unknown and renamed keys are an error."""
        renamed = sorted(set(data) & set(cls.renamed_keys))
        if renamed:
            key = renamed[0]
            raise InvalidInputError(f"{cls.kind} field {key!r} is gone: {cls.renamed_keys[key]}")
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


#: LiteRT Quantizer's activation calibrations (``Recipe.calibration``): the full min/max
#: over every sample (the default) and its own moving average.
LITERT_CALIBRATIONS = ("min-max", "moving-average")


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
        integer_only: ``int8``/``int16x8`` only: refuse a model with ops that have no
            integer kernel instead of keeping them in float, as integer-only hardware (the
            Edge TPU, microcontrollers) needs. Off by default, as in the TFLite converter:
            such ops run in float between DEQUANTIZE and QUANTIZE and the result lists them
            as ``float_ops``.
        static_batch: A static batch dimension for the file (e.g. 1 for the Edge TPU, whose
            compiler needs every shape fixed); None keeps the model's own (usually dynamic).
            Not a training batch: the fine-tuning verbs' ``batch_size`` is that.
        float_nodes: ``int8`` only: op output tensors to keep in float (the converter's
            ``denylisted_nodes``; names as :func:`~tfcompress.quantization.selective.rank_layers`
            reports them), everything else quantized. See ``docs/quantization.md``.
        rules: Ordered per-op :class:`~tfcompress.quantization.rules.Rule` s on top of the
            recipe's own setting (a later rule overrides an earlier one). LiteRT Quantizer
            honours every mode; the converter engine only ``float`` (with ``int8``).
        block_size: LiteRT Quantizer, ``int4-dynamic``: blockwise weight scales of 32, 64
            or 128 values for fully connected and embedding weights (the kernels LiteRT has;
            other ops keep per-channel scales); None: per channel (or per tensor).
        methods: ``int8`` only: post-training methods applied before the converter quantizes
            (``equalize``, ``adaround``, ``bias-correction``, ``percentile-ranges``,
            ``mse-ranges``; see :mod:`tfcompress.quantization.methods`), stored in the order
            they run. Empty: the converter's own int8.
        range_percentile: The percentile ``percentile-ranges`` keeps (default 99.99).
        calibration: LiteRT Quantizer, recipes that calibrate: ``"min-max"`` or
            ``"moving-average"`` activation ranges (see
            :mod:`tfcompress.quantization.engines.calibration`). None: min-max, or with eval
            data the better of both, which the result's recipe then records (so a replay
            makes the same file).

    Example:
        >>> Recipe.from_json(Recipe("int8", input_type="uint8").to_json()).input_type
        'uint8'
    """

    renamed_keys: ClassVar[dict[str, str]] = {
        "float_fallback": "use integer_only, its opposite (float fallback is the default; "
        "integer_only: true refuses ops without an integer kernel, as float_fallback: false "
        "did).",
        "batch_size": "use static_batch (the file's fixed batch dimension; batch_size is the "
        "fine-tuning batch of qat, prune, cluster and compress --train).",
    }

    name: str
    input_type: str = option("float32", metavar=IO_METAVAR, help="model input dtype (.tflite)")
    output_type: str = option(
        "float32", metavar=IO_METAVAR, help="model output dtype (.tflite; none: --input-type's)"
    )
    per_channel: bool = option(
        True,
        help="per-channel weight scales; --no-per-channel: one scale per weight tensor",
        check=boolean,
    )
    calibration_samples: int = option(DEFAULT_CALIBRATION_SAMPLES, help="calibration samples")
    integer_only: bool = option(
        False,
        help="int8/int16x8 .tflite: refuse a model with ops that have no integer kernel (Edge "
        "TPU, microcontrollers) instead of keeping them float, the converter's default",
        check=boolean,
    )
    static_batch: int | None = option(
        None,
        help=".tflite: a static batch dimension in the file (e.g. 1; RNNs whose conversion "
        "needs one)",
        check=integer(1, MAX_STATIC_BATCH, STATIC_BATCHES, optional=True),
    )
    float_nodes: tuple[str, ...] = option(
        (),
        metavar="NODE,NODE",
        help="int8 .tflite: keep these op outputs in float (names as rank_layers reports them, "
        "see docs/quantization.md#selective-quantization)",
    )
    rules: tuple[Rule, ...] = option(
        (),
        metavar="RULE",
        parse="tfcompress.cli.quantize:parse_rule",
        help="per-op rule, repeatable, later ones win: PATTERN=MODE or OP_TYPE:PATTERN=MODE "
        "(MODE: float, int8, int16, weights, dynamic), or a JSON object with pattern, "
        "op_type, mode, weight_bits, granularity, algorithm (see docs/quantization.md#rules)",
        check=lambda _, v: coerce_rules(v),
    )
    block_size: int | None = option(
        None, help="litert-quantizer, dynamic/int4 recipes: blockwise weight scales (32, 64, 128)"
    )
    methods: tuple[str, ...] = ()
    range_percentile: float = DEFAULT_PERCENTILE
    calibration: str | None = None

    def __post_init__(self) -> None:
        check_fields(self)
        spec = recipe_spec(self.name)
        if self.calibration is not None:
            if self.calibration not in LITERT_CALIBRATIONS:
                raise InvalidInputError(
                    f"calibration {self.calibration!r} is not one of "
                    f"{', '.join(LITERT_CALIBRATIONS)} (LiteRT Quantizer's activation ranges)."
                )
            if not spec.needs_calibration:
                raise InvalidInputError(
                    f"calibration={self.calibration!r}: recipe {self.name!r} calibrates no "
                    "activation ranges; drop it."
                )
        # JSON gives a list back: store a tuple, so a replayed recipe equals the original.
        object.__setattr__(self, "float_nodes", _check_float_nodes(self.name, self.float_nodes))
        _check_block_size(spec, self.block_size)
        methods = canonical_methods(self.methods)
        object.__setattr__(self, "methods", methods)
        percentile = check_methods_for(self.name, methods, self.range_percentile)
        object.__setattr__(self, "range_percentile", percentile)
        for io in ("input_type", "output_type"):
            value = getattr(self, io)
            if value not in spec.io_types:
                raise InvalidInputError(
                    f"recipe {self.name!r} does not support {io}={value!r}; choose one of "
                    f"{', '.join(spec.io_types)}."
                )
        object.__setattr__(
            self, "calibration_samples", check_calibration_samples(self.calibration_samples)
        )
        if self.integer_only and not spec.integer_activations:
            raise InvalidInputError(
                f"recipe {self.name!r} keeps float activations, so it cannot be integer-only; "
                f"integer_only applies to {', '.join(integer_recipes())}."
            )

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form, for reports and replay (rules as plain dicts)."""
        data = asdict(self)
        data["rules"] = [rule.to_dict() for rule in self.rules]
        return data

    @property
    def spec(self) -> RecipeSpec:
        """The registered converter settings."""
        return recipe_spec(self.name)

    @classmethod
    def coerce(cls, recipe: str | Recipe) -> Recipe:
        """Accept a recipe name or a :class:`Recipe`."""
        return recipe if isinstance(recipe, Recipe) else cls(str(recipe))


def check_calibration_samples(value: Any) -> int:
    """``calibration_samples`` as an ``int`` (a NumPy integer read as one), or the refusal.

    Every recipe, and so every way of giving one (a keyword, a config, ``--calibration-samples``, a
    replayed report), refuses a bad count with this one message.

    Raises:
        InvalidArgumentTypeError: Not an integer (a bool neither).
        InvalidInputError: Below 1.

    Example:
        >>> check_calibration_samples(0)
        Traceback (most recent call last):
        ...
        tfcompress.errors.InvalidInputError: calibration_samples must be at least 1, got 0; \
pass e.g. 200 (the default).
    """
    check_count(value, "calibration_samples", f"e.g. {DEFAULT_CALIBRATION_SAMPLES} (the default)")
    return int(value)


def integer_recipes() -> list[str]:
    """The recipes with integer activations (where ``integer_only`` applies).

    Example:
        >>> integer_recipes()
        ['int8', 'int16x8']
    """
    return [n for n in RECIPES if RECIPES.get(n).integer_activations]


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


def _check_block_size(spec: RecipeSpec, block_size: Any) -> None:
    if block_size is None:
        return
    if isinstance(block_size, bool) or block_size not in BLOCK_SIZES:
        raise InvalidInputError(
            f"block_size must be one of {', '.join(map(str, BLOCK_SIZES))} or None, got "
            f"{block_size!r}."
        )
    if not _blockwise(spec):
        allowed = ", ".join(n for n in RECIPES if _blockwise(RECIPES.get(n)))
        raise InvalidInputError(
            f"block_size: LiteRT Quantizer 0.11 has blockwise weight scales for dynamic int4 "
            f"fully connected weights only ({allowed}), not recipe {spec.name!r}."
        )


def _blockwise(spec: RecipeSpec) -> bool:
    rule = spec.base_rule
    return rule is not None and rule.mode == "dynamic" and rule.weight_bits == 4


def _refuse_converter(converter: Any, recipe: Recipe, tf: Any) -> None:
    del converter, tf
    raise InvalidInputError(
        f"recipe {recipe.name!r} is made by LiteRT Quantizer only: pass "
        "engine='litert-quantizer' (--engine litert-quantizer)."
    )


_BOTH = ENGINES
_FLOAT = ("float32",)


@register_recipe(
    "float32",
    summary="no quantization (reference)",
    needs_calibration=False,
    io_types=_FLOAT,
    engines=_BOTH,
)
def _float32(converter: Any, recipe: Recipe, tf: Any) -> None:
    del converter, recipe, tf  # the converter's defaults are the float32 reference


@register_recipe(
    "dynamic",
    summary="int8 weights, float activations",
    needs_calibration=False,
    io_types=_FLOAT,
    engines=_BOTH,
    base_rule=Rule(mode="dynamic"),
)
def _dynamic(converter: Any, recipe: Recipe, tf: Any) -> None:
    del recipe
    converter.optimizations = [tf.lite.Optimize.DEFAULT]


@register_recipe(
    "float16",
    summary="float16 weights, float32 compute on CPU",
    needs_calibration=False,
    io_types=_FLOAT,
    engines=_BOTH,
    float16_weights=True,
)
def _float16(converter: Any, recipe: Recipe, tf: Any) -> None:
    del recipe
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_types = [tf.float16]


def _integer(converter: Any, recipe: Recipe, tf: Any, integer_ops: Any) -> None:
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    # TFLITE_BUILTINS next to the integer set is the converter's documented "allow float"
    # switch (QuantizationMode.is_allow_float), and its behaviour when no ops are set: ops
    # without an integer kernel stay float between DEQUANTIZE and QUANTIZE instead of
    # failing the conversion. integer_only leaves the integer set alone.
    fallback = [] if recipe.integer_only else [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.target_spec.supported_ops = [integer_ops, *fallback]
    converter.inference_input_type = getattr(tf, recipe.input_type)
    converter.inference_output_type = getattr(tf, recipe.output_type)


@register_recipe(
    "int8",
    summary="int8 weights and activations (ops without an int8 kernel stay float)",
    needs_calibration=True,
    io_types=("float32", "int8", "uint8"),
    integer_activations=True,
    engines=_BOTH,
    base_rule=Rule(mode="int8"),
)
def _int8(converter: Any, recipe: Recipe, tf: Any) -> None:
    _integer(converter, recipe, tf, tf.lite.OpsSet.TFLITE_BUILTINS_INT8)


@register_recipe(
    "int16x8",
    summary="int16 activations, int8 weights",
    needs_calibration=True,
    io_types=("float32", "int16"),
    integer_activations=True,
    engines=_BOTH,
    base_rule=Rule(mode="int16"),
)
def _int16x8(converter: Any, recipe: Recipe, tf: Any) -> None:
    ops = tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8
    _integer(converter, recipe, tf, ops)


@register_recipe(
    "int4-weights",
    summary="int4 weights dequantized to float ops (weight-only)",
    needs_calibration=False,
    io_types=_FLOAT,
    engines=("litert-quantizer",),
    base_rule=Rule(mode="weights", weight_bits=4),
)
def _int4_weights(converter: Any, recipe: Recipe, tf: Any) -> None:
    _refuse_converter(converter, recipe, tf)


@register_recipe(
    "int4-dynamic",
    summary="int4 weights, activations quantized on the fly (dynamic range)",
    needs_calibration=False,
    io_types=_FLOAT,
    engines=("litert-quantizer",),
    base_rule=Rule(mode="dynamic", weight_bits=4),
)
def _int4_dynamic(converter: Any, recipe: Recipe, tf: Any) -> None:
    _refuse_converter(converter, recipe, tf)
