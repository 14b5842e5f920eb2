"""What makes one post-training artifact, as a checked config: :class:`PTQConfig`.

:func:`tfcompress.quantize` takes one (``quantize(model, config=PTQConfig(...),
representative_data=...)``); its keyword options only build the same config
(:meth:`PTQConfig.from_options`), the CLI builds it from its flags, a result records it
(``result.config``, ``result.to_dict()["config"]``) and compress records one per
post-training attempt, which ``--replay`` reads back with :meth:`PTQConfig.from_dict`. Every
option is checked here once, on construction, so a bad value gets the same message
whichever way it came in.

A compress attempt records ``{"recipe": Recipe.to_dict(), "seed": N}``, with ``"target"``
when the target shapes the artifact (the Edge TPU), ``"engine"`` when it was chosen
(LiteRT Quantizer) and ``"methods"`` for a rung that tries the post-training methods; a
ladder rung may also be the recipe's own dict (``{"name": "int8"}``). :meth:`from_dict`
reads every one of these shapes.

Example:
    >>> config = PTQConfig.from_dict({"recipe": {"name": "int8"}, "seed": 3})
    >>> config.recipe.name, config.seed, PTQConfig.from_dict(config.to_dict()) == config
    ('int8', 3, True)
    >>> PTQConfig.from_dict({"name": "float16"}).recipe.name  # a ladder rung's recipe
    'float16'
    >>> PTQConfig(recipe="int8", target="edgetpu").recipe.static_batch  # the target's rules
    1
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypedDict

from tfcompress._config_fields import (
    CONFIG_VERSION,
    MAX_SEED,
    check_fields,
    check_version,
    checked_fields,
    integer,
    option,
    shown,
)
from tfcompress.errors import InvalidInputError, TFCompressError
from tfcompress.models.feeding import config_batch_dims, config_input_values
from tfcompress.quantization.recipes import ENGINES, FORMATS, Recipe, RecipeData
from tfcompress.quantization.rules import Rule

if TYPE_CHECKING:
    from tfcompress.quantization.onnx_ptq import OnnxRecipe
    from tfcompress.targets.contract import Target


def _per_op_min_snr(name: str, value: Any) -> float | None:
    """The check of ``PerOpBar.per_op_min_snr``, where it is declared (None: its default)."""
    from tfcompress.quantization.methods.per_op import PerOpBar

    return value if value is None else PerOpBar(per_op_min_snr=value).per_op_min_snr


@dataclass(frozen=True, kw_only=True)
class PTQConfig:
    """Everything that decides a post-training artifact: what :func:`tfcompress.quantize` makes.

    The data (calibration and eval samples) and how the run is shown (progress, layer
    errors) are not in it: the same config and the same data give the same bytes.

    Attributes:
        recipe: A :class:`~tfcompress.quantization.Recipe` (``.tflite``) or an
            :class:`~tfcompress.quantization.onnx_ptq.OnnxRecipe` (``.onnx``), with every
            override in it (``Recipe("int8", input_type="uint8", static_batch=1)``); a
            recipe name is read as ``Recipe(name)``. A target's rules are applied to it on
            construction (the Edge TPU's uint8 I/O, integer-only, batch 1), so it is the
            recipe that is made.
        seed, engine, methods: Options, each declared with its default and help by
            :func:`~tfcompress._config_fields.option` below (``engine`` and ``methods``:
            ``.tflite`` only; ``methods`` may also be a list of names, and None applies the
            recipe's own ``recipe.methods`` as given).
        target: A registered target (:func:`tfcompress.targets.base.list_targets`); None:
            none. ``.tflite`` only.
        target_options: Options of the target's check, by name (its declared
            ``Target.options``: the Edge TPU's ``compiler``); an option the target does not
            take is refused, and the target checks the values it takes (a compiler that is
            not an executable).
        per_op_min_snr: ``methods="per-op"`` without a gate: the SNR (dB) its weakest
            output must reach (declared, with its default, by
            :class:`~tfcompress.quantization.methods.per_op.PerOpBar`); None: that default.
        batch_dims: How the calibration data is laid out, as ``benchmark`` and ``gate``
            read it: input name -> the dimension that is its batch, for inputs whose
            signature cannot tell (``{"state": 1}`` for a ``(2, N, 128)`` state;
            ``--batch-dim state=1``). Names are checked against the model when it is read.
        input_values: Input name -> one value fed on every calibration call, for inputs
            the data lacks (``{"sr": 16000}``; ``--input-value sr=16000``).
        version: The config format.

    Raises:
        InvalidInputError: A recipe, seed, target, option, engine or method that is unknown,
            of the wrong type or range, or that does not fit the rest (``methods`` on
            ``float16``, an ``OnnxRecipe`` with a target, LiteRT Quantizer for the Edge TPU).
        BackendUnavailableError: A target option the target refuses (``compiler`` that is
            not an executable).

    Example:
        >>> PTQConfig(recipe=Recipe("int8"), engine="litert-quantizer").to_dict()["engine"]
        'litert-quantizer'
    """

    recipe: Recipe | OnnxRecipe
    seed: int = option(
        0,
        help="seed of the calibration subset, 0 to 2**32-1: same seed and data, same bytes",
        check=integer(0, MAX_SEED),
    )
    target: str | None = None
    target_options: Mapping[str, Any] = field(default_factory=dict)
    engine: str | None = option(
        None,
        metavar="ENGINE",
        help="converter (TFLite converter; default for Keras/SavedModel) or litert-quantizer "
        "(LiteRT Quantizer; default for a .tflite and the int4 recipes)",
    )
    methods: str | tuple[str, ...] | None = option(
        None,
        metavar="METHODS",
        names="METHODS",
        help="int8 .tflite: post-training methods tried against the converter's plain int8 "
        "(scored on --eval): auto, none, or names separated by commas. Kept: with a gate "
        "(--min-snr, --max-drop...), among those that pass it the smallest, then the largest "
        "margin on the weakest output; without, the best weakest output; plain int8 wins "
        "ties. Default: none (the converter's int8); with --eval and a gate, auto runs only "
        "if plain int8 fails the gate. auto, asked for or so started, makes the candidates "
        "by expected payoff per second and skips, unmade and said, those that would take it "
        "past 1.5x plain int8's seconds (and those that need a Keras model, on a "
        "SavedModel); named, methods are always made, or refused where they cannot run "
        "(see docs/quantization.md#beyond-minmax-int8). Registered:",
    )
    per_op_min_snr: float | None = field(default=None, metadata={"check": _per_op_min_snr})
    batch_dims: Mapping[str, int] = field(default_factory=dict)
    input_values: Mapping[str, float] = field(default_factory=dict)
    version: int = CONFIG_VERSION

    def __post_init__(self) -> None:
        check_version("PTQ", self.version)
        recipe = Recipe(self.recipe) if isinstance(self.recipe, str) else self.recipe
        if not isinstance(recipe, Recipe) and not _is_onnx(recipe):
            raise InvalidInputError(
                f"recipe must be a tfcompress.Recipe, an OnnxRecipe or a recipe name, got "
                f"{type(recipe).__name__}."
            )
        check_fields(self)
        options = _checked_target_options(self.target_options)
        object.__setattr__(self, "target_options", options)
        if isinstance(recipe, Recipe):
            recipe = _shaped(recipe, self.target, options)
            if self.engine is not None:
                check_engine(self.engine, recipe, target=self.target, methods=self.methods)
            if self.methods is not None:
                object.__setattr__(self, "methods", _checked_methods(self.methods, recipe))
        else:
            _refuse_for_onnx(self.target, options, self.engine, self.methods)
        named = self.methods.split(",") if isinstance(self.methods, str) else self.methods
        if self.per_op_min_snr is not None and "per-op" not in (
            *(named or ()),
            *getattr(recipe, "methods", ()),
        ):
            raise InvalidInputError(
                "per_op_min_snr (--per-op-min-snr) is the bar of methods='per-op' (--methods "
                "per-op): pass that method, or drop the bar."
            )
        object.__setattr__(self, "recipe", recipe)
        object.__setattr__(self, "batch_dims", config_batch_dims(self.batch_dims))
        object.__setattr__(self, "input_values", config_input_values(self.input_values))

    def __hash__(self) -> int:  # results are hashed (caches); a mapping field is not
        values = (getattr(self, f.name) for f in fields(self))
        return hash(
            tuple(tuple(sorted(v.items())) if isinstance(v, Mapping) else v for v in values)
        )

    @property
    def format(self) -> str:
        """``"tflite"`` or ``"onnx"``: the kind of file the recipe makes."""
        return "onnx" if _is_onnx(self.recipe) else "tflite"

    @classmethod
    def from_options(
        cls,
        *,
        format: str | None = None,
        recipe: str | Recipe | OnnxRecipe | None = None,
        input_type: str | None = None,
        output_type: str | None = None,
        per_channel: bool | None = None,
        calibration_samples: int | None = None,
        integer_only: bool | None = None,
        static_batch: int | None = None,
        float_nodes: Sequence[str] | None = None,
        rules: Sequence[Rule | dict[str, Any]] | None = None,
        block_size: int | None = None,
        engine: str | None = None,
        methods: str | Sequence[str] | None = None,
        calibration_method: str | None = None,
        opset: int | None = None,
        target: str | None = None,
        compiler: str | os.PathLike[str] | None = None,
        target_options: Mapping[str, Any] | None = None,
        seed: int | None = None,
        per_op_min_snr: float | None = None,
        batch_dims: Mapping[str, int] | None = None,
        input_values: Mapping[str, float] | None = None,
    ) -> PTQConfig:
        """The config :func:`tfcompress.quantize`'s keyword options describe (see it for each).

        A keyword left None is not given: the recipe's own value (or the target's) stays.
        ``output_type`` defaults to ``input_type``; ``compiler`` is one of the target
        options.

        Raises:
            InvalidInputError: What :class:`PTQConfig` refuses, an unknown ``format``, an
                option of the other format (``input_type`` with ``format="onnx"``,
                ``opset`` with ``.tflite``), or a target's rule the options break.

        Example:
            >>> PTQConfig.from_options(recipe="int8", input_type="int8").recipe.output_type
            'int8'
        """
        chosen_options = _target_options(target_options, compiler)

        def made(chosen: Recipe | OnnxRecipe) -> PTQConfig:
            return cls(
                recipe=chosen,
                seed=0 if seed is None else seed,
                target=target,
                target_options=chosen_options,
                engine=engine,
                methods=methods if methods is None or isinstance(methods, str) else tuple(methods),
                per_op_min_snr=per_op_min_snr,
                batch_dims=batch_dims or {},
                input_values=input_values or {},
            )

        if _resolve_format(format, recipe) == "onnx":
            _refuse_tflite_options(
                input_type=input_type,
                output_type=output_type,
                integer_only=integer_only,
                float_nodes=float_nodes,
                rules=rules,
                block_size=block_size,
                static_batch=static_batch,
            )
            return made(
                _onnx_recipe(recipe, per_channel, calibration_samples, calibration_method, opset)
            )
        for name, value in (("calibration_method", calibration_method), ("opset", opset)):
            if value is not None:
                raise InvalidInputError(
                    f"{name} (--{name.replace('_', '-')}) applies to format='onnx' (--format "
                    "onnx); the TFLite converter calibrates min-max ranges and has no opset."
                )
        if not isinstance(recipe, str | Recipe | None):
            raise InvalidInputError("an OnnxRecipe makes an .onnx: pass format='onnx'.")
        if recipe is None:  # the target's own default (the GPU's float16), else int8
            recipe = (None if target is None else _device(target).default_recipe) or "int8"
        base = Recipe.coerce(recipe)
        io_options: dict[str, Any] = {
            "input_type": input_type,
            "output_type": output_type,
            "integer_only": integer_only,
            "static_batch": static_batch,
        }
        if target is not None:  # what the user asked for, checked against the device's rules
            io_options = _device(target).recipe_options(base, **io_options)
        else:
            io_options["output_type"] = output_type or input_type
        return made(
            base.with_options(
                per_channel=per_channel,
                calibration_samples=calibration_samples,
                float_nodes=float_nodes,
                rules=None if rules is None else list(rules),
                block_size=block_size,
                **io_options,
            )
        )

    def to_dict(self) -> dict[str, Any]:
        """The recorded shape: ``recipe`` and ``seed``, the optional keys when set, ``version``.

        An ``.onnx`` config also records ``"format": "onnx"``, so :meth:`from_dict` reads its
        recipe as an ``OnnxRecipe``.
        """
        data: dict[str, Any] = {"recipe": self.recipe.to_dict(), "seed": self.seed}
        if self.format == "onnx":
            data["format"] = "onnx"
        for name in ("target", "engine", "methods", "per_op_min_snr"):
            value = getattr(self, name)
            if value is not None:
                data[name] = list(value) if isinstance(value, tuple) else value
        if self.target_options:
            data["target_options"] = dict(self.target_options)
        for name in ("batch_dims", "input_values"):  # how the data is fed, when said
            if getattr(self, name):
                data[name] = dict(getattr(self, name))
        return {**data, "version": self.version}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PTQConfig:
        """Read :meth:`to_dict` output, a compress attempt's record or a rung's bare recipe.

        Raises:
            InvalidInputError: Not a mapping, an unknown key, a recipe that is not an object
                or that its recipe class refuses, or a field of the wrong type or range.
        """
        if isinstance(data, Mapping) and "recipe" not in data:  # a rung's bare recipe
            return cls(recipe=recipe_from_data(data))
        checked_fields(cls, data, what="a PTQ recipe", taker="a PTQ attempt", also=("format",))
        if not isinstance(data["recipe"], Mapping):
            raise InvalidInputError(
                f"recipe holds no recipe object (a JSON {type(data['recipe']).__name__})."
            )
        kind = _resolve_format(data.get("format"), None)
        rest = {k: v for k, v in data.items() if k != "format"}
        return cls(**{**rest, "recipe": recipe_from_data(data["recipe"], format=kind)})


class PTQOptions(TypedDict, total=False):
    """:func:`tfcompress.quantize`'s keyword options: what :meth:`PTQConfig.from_options` takes.

    ``format`` (``"tflite"`` or ``"onnx"``), ``recipe`` (a name, a :class:`Recipe` or an
    ``OnnxRecipe``) and the recipe's fields that override it (see :class:`Recipe`; ONNX:
    ``OnnxRecipe``), then :class:`PTQConfig`'s ``engine``, ``methods``, ``target`` (with its
    options: ``compiler`` or ``target_options``), ``seed``, ``per_op_min_snr``, ``batch_dims`` and
    ``input_values``. None: not given. ``tests/test_cli_options.py`` keeps it equal to
    :meth:`PTQConfig.from_options`'s keywords.
    """

    format: str | None
    recipe: str | Recipe | OnnxRecipe | None
    input_type: str | None
    output_type: str | None
    per_channel: bool | None
    calibration_samples: int | None
    integer_only: bool | None
    static_batch: int | None
    float_nodes: Sequence[str] | None
    rules: Sequence[Rule | dict[str, Any]] | None
    block_size: int | None
    engine: str | None
    methods: str | Sequence[str] | None
    calibration_method: str | None
    opset: int | None
    target: str | None
    compiler: str | os.PathLike[str] | None
    target_options: Mapping[str, Any] | None
    seed: int | None
    per_op_min_snr: float | None
    batch_dims: Mapping[str, int] | None
    input_values: Mapping[str, float] | None


def check_engine(
    engine: str, recipe: Recipe, *, target: str | None = None, methods: Any = None
) -> None:
    """Refuse an engine that cannot make ``recipe`` for ``target`` with ``methods``.

    :class:`PTQConfig` calls it for the engine it is given; :func:`tfcompress.quantize`
    for the one it chose for the model (LiteRT Quantizer for a ``.tflite``).

    Raises:
        InvalidInputError: An unknown engine, a recipe (or rule) it does not make, LiteRT
            Quantizer for a target that needs the converter's settings, or with
            post-training methods.

    Example:
        >>> check_engine("tvm", Recipe("int8"))
        Traceback (most recent call last):
        ...
        tfcompress.errors.InvalidInputError: unknown engine 'tvm'; choose one of converter, \
litert-quantizer.
    """
    from tfcompress.quantization.engines import choose_engine

    if not isinstance(engine, str) or engine not in ENGINES:
        raise InvalidInputError(
            f"unknown engine {shown(engine)}; choose one of {', '.join(ENGINES)}."
        )
    choose_engine(engine, None, recipe)  # the recipe and its rules, whatever the model
    if engine != "litert-quantizer":
        if getattr(recipe, "calibration", None) is not None:
            raise InvalidInputError(
                f"calibration={recipe.calibration!r} chooses LiteRT Quantizer's activation "
                "ranges; the converter calibrates with min/max only: drop it, or quantize the "
                "float .tflite (engine 'litert-quantizer')."
            )
        return
    if target is not None and _device(target).shapes_artifact:
        raise InvalidInputError(
            f"--target {target} needs the converter's settings for "
            f"{_device(target).display_name}, which LiteRT Quantizer (the engine for a "
            ".tflite) cannot apply: quantize the Keras model or SavedModel the .tflite came "
            f"from, `tfcompress quantize MODEL.keras --target {target} --data CALIB.npz` "
            "(--engine converter, its default)."
        )
    if recipe.methods or methods not in (None, "none"):
        raise InvalidInputError(
            "the post-training methods (--methods) rewrite the Keras model before the "
            "converter quantizes it; LiteRT Quantizer has its own weight algorithms (rules "
            "with algorithm=...): drop --methods, or quantize the Keras model or SavedModel "
            "with --engine converter (a .tflite input has LiteRT Quantizer only)."
        )


def recipe_from_data(data: Mapping[str, Any], *, format: str = "tflite") -> Recipe | OnnxRecipe:
    """A :class:`tfcompress.Recipe` (or, for ``format="onnx"``, an ``OnnxRecipe``) from JSON.

    Lists are read back as tuples.

    Raises:
        InvalidInputError: Fields the recipe refuses (unknown, wrong type, out of range).

    Example:
        >>> recipe_from_data({"name": "int8", "calibration_samples": 300}).calibration_samples
        300
    """
    recipe_class: type[RecipeData] = Recipe
    if format == "onnx":
        from tfcompress.quantization.onnx_ptq import OnnxRecipe

        recipe_class = OnnxRecipe
    try:
        return recipe_class.from_dict(
            {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        )
    except TFCompressError:
        raise
    except TypeError as error:  # a field of the wrong type deep in the recipe's checks
        raise InvalidInputError(f"recipe: {shown(str(error), 200)}") from None


def _is_onnx(recipe: Any) -> bool:
    return getattr(type(recipe), "format", None) == "onnx" and isinstance(recipe, RecipeData)


def _device(name: str) -> Target:
    from tfcompress.targets.base import get_target

    return get_target(name)  # refuses an unknown one, listing the registered ones


def _shaped(recipe: Recipe, target: str | None, options: Mapping[str, Any]) -> Recipe:
    """``recipe`` with the target's rules applied, the target and its options checked."""
    from tfcompress.targets.base import resolve_target

    device = resolve_target(target, **options)  # unknown target, options it does not take
    if device is None:
        return recipe
    return recipe.with_options(**device.recipe_options(recipe, input_type=None, output_type=None))


def _checked_target_options(options: Any) -> dict[str, Any]:
    if not isinstance(options, Mapping):
        raise InvalidInputError(
            f"target_options must be a mapping of option names to values, got {shown(options)}."
        )
    if not all(isinstance(k, str) for k in options):
        raise InvalidInputError(f"target_options are named by strings, got {shown(dict(options))}.")
    return {
        k: os.fspath(v) if isinstance(v, os.PathLike) else v
        for k, v in sorted(options.items())
        if v is not None
    }


def _target_options(
    options: Mapping[str, Any] | None, compiler: str | os.PathLike[str] | None
) -> dict[str, Any]:
    """The target's check options given (``compiler`` is one of them; PTQConfig checks them)."""
    if compiler is None or not isinstance(options, Mapping | None):
        return {} if options is None else options  # type: ignore[return-value]
    return {**(options or {}), "compiler": compiler}


def _checked_methods(methods: Any, recipe: Recipe) -> str | tuple[str, ...]:
    """``"auto"``/``"none"``/a comma list as ``--methods``, or names, fit for ``recipe``."""
    from tfcompress.quantization.methods.catalog import canonical_methods, plan_candidates

    if isinstance(methods, str):
        checked: str | tuple[str, ...] = methods
    elif isinstance(methods, list | tuple):
        checked = canonical_methods(tuple(methods))
    else:
        raise InvalidInputError(
            f"methods must be 'auto', 'none' or a list of method names, got {shown(methods)}."
        )
    # Unknown names, methods on a recipe other than int8, or beside the recipe's own.
    plan_candidates(recipe.name, recipe.methods, checked, has_eval=False)
    return checked


def _resolve_format(format: str | None, recipe: object) -> str:
    implied = "onnx" if _is_onnx(recipe) else None
    if format is None:
        return implied or "tflite"
    if format not in FORMATS:
        raise InvalidInputError(
            f"unknown format {shown(format)}; choose one of {', '.join(FORMATS)}."
        )
    if implied is not None and format != implied:
        raise InvalidInputError("an OnnxRecipe makes an .onnx: pass format='onnx'.")
    return format


def _onnx_recipe(
    recipe: Any,
    per_channel: bool | None,
    calibration_samples: int | None,
    calibration_method: str | None,
    opset: int | None,
) -> OnnxRecipe:
    from tfcompress.quantization.onnx_ptq import OnnxRecipe

    if isinstance(recipe, Recipe):
        raise InvalidInputError(
            f"a tflite Recipe ({recipe.name!r}) cannot make an .onnx; pass the recipe's "
            "name or an OnnxRecipe with format='onnx'."
        )
    base = recipe if isinstance(recipe, OnnxRecipe) else OnnxRecipe(str(recipe or "int8"))
    return base.with_options(
        per_channel=per_channel,
        calibration_samples=calibration_samples,
        calibration_method=calibration_method,
        opset=opset,
    )


#: The refusal of the post-training methods (or their eval data) with ``format="onnx"``.
ONNX_NO_METHODS = (
    "methods and eval_data (the post-training methods) apply to .tflite only: ONNX Runtime "
    "calibrates its own way (calibration_method); drop them, or quantize the Keras model or "
    "SavedModel to a .tflite (--format tflite; an .onnx input stays an .onnx)."
)


def _refuse_tflite_options(**options: Any) -> None:
    """ONNX Runtime's models keep float I/O and leave unquantizable ops float on their own."""
    for name, value in options.items():
        if value is not None and not (name.endswith("_type") and value == "float32"):
            raise InvalidInputError(
                f"{name} (--{name.replace('_', '-')}) applies to .tflite only: ONNX Runtime's "
                "quantized models keep float32 inputs and outputs and leave ops without an int8 "
                "kernel in float on their own; drop it, or use --format tflite."
            )


def _refuse_for_onnx(
    target: str | None, options: Mapping[str, Any], engine: str | None, methods: Any
) -> None:
    if target is not None or options:
        shown_target = f"--target {target}" if target is not None else "a target's options"
        raise InvalidInputError(
            f"{shown_target} makes a .tflite; drop --format onnx (or the target)."
        )
    if engine is not None:
        _refuse_tflite_options(engine=engine)
    if methods is not None:
        raise InvalidInputError(ONNX_NO_METHODS)
