"""What a post-training attempt of compress records, as a checked config.

A PTQ attempt of a compress report records ``{"recipe": Recipe.to_dict(), "seed": N}``,
with ``"target"`` when the target shapes the artifact (the Edge TPU), ``"engine"`` when it
was chosen (LiteRT Quantizer) and ``"methods"`` for a rung that tries the post-training
methods; a ladder rung may also be the recipe's own dict (``{"name": "int8"}``).
:class:`PTQConfig` reads every one of these shapes, checks each field (the
:class:`~tfcompress.quantization.Recipe` checks its own) and writes the recorded shape back,
with a ``version``.

Example:
    >>> config = PTQConfig.from_dict({"recipe": {"name": "int8"}, "seed": 3})
    >>> config.recipe.name, config.seed, PTQConfig.from_dict(config.to_dict()) == config
    ('int8', 3, True)
    >>> PTQConfig.from_dict({"name": "float16"}).recipe.name  # a ladder rung's recipe
    'float16'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from tfcompress.errors import InvalidInputError
from tfcompress.quantization.recipes import ENGINES, Recipe
from tfcompress.training.configs import CONFIG_VERSION, MAX_SEED, check_version, require_int


@dataclass(frozen=True, kw_only=True)
class PTQConfig:
    """How one post-training artifact of compress is made (``ptq`` and ``selective``).

    Attributes:
        recipe: The recipe (``float_nodes`` in it for a selective step).
        seed: Seed of the calibration subset, 0 to 2**32-1.
        target: A registered target (:func:`tfcompress.targets.base.list_targets`); None:
            none passed to quantize.
        engine: ``"converter"`` or ``"litert-quantizer"``; None: quantize's default.
        methods: Post-training methods tried against plain int8 (``"auto"``, ``"none"``
            or names); None: the recipe's own (``recipe.methods``) applied as given.
        version: The config format.

    Example:
        >>> PTQConfig(recipe=Recipe("int8"), engine="litert-quantizer").to_dict()["engine"]
        'litert-quantizer'
    """

    recipe: Recipe
    seed: int = 0
    target: str | None = None
    engine: str | None = None
    methods: str | tuple[str, ...] | None = None
    version: int = CONFIG_VERSION

    def __post_init__(self) -> None:
        check_version("PTQ", self.version)
        if not isinstance(self.recipe, Recipe):
            raise InvalidInputError(
                f"recipe must be a tfcompress.Recipe, got {type(self.recipe).__name__}."
            )
        require_int("seed", self.seed, 0, MAX_SEED, f"an integer 0 to {MAX_SEED}")
        if self.target is not None:
            from tfcompress.targets.base import get_target

            get_target(self.target)  # refuses an unknown one, listing the registered ones
        if self.engine is not None and self.engine not in ENGINES:
            raise InvalidInputError(
                f"unknown engine {_shown(self.engine)}; choose one of {', '.join(ENGINES)}."
            )
        if self.methods is not None:
            object.__setattr__(self, "methods", _checked_methods(self.methods))

    def to_dict(self) -> dict[str, Any]:
        """The recorded shape: ``recipe`` and ``seed``, the optional keys when set, ``version``."""
        data: dict[str, Any] = {"recipe": self.recipe.to_dict(), "seed": self.seed}
        for name in ("target", "engine", "methods"):
            value = getattr(self, name)
            if value is not None:
                data[name] = list(value) if isinstance(value, tuple) else value
        return {**data, "version": self.version}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PTQConfig:
        """Read :meth:`to_dict` output, an older attempt's record or a rung's bare recipe.

        Raises:
            InvalidInputError: Not a mapping, an unknown key, a recipe that is not an object
                or that :class:`~tfcompress.quantization.Recipe` refuses, or a field of the
                wrong type or range.
        """
        if not isinstance(data, Mapping):
            raise InvalidInputError(f"a PTQ recipe is a JSON object, not a {type(data).__name__}.")
        if "recipe" not in data:  # a rung's (or an old attempt's) bare recipe
            return cls(recipe=recipe_from_data(data))
        known = {f.name for f in fields(cls)}
        unknown = sorted((k for k in data if k not in known), key=str)
        if unknown:
            raise InvalidInputError(
                f"a PTQ attempt records no {', '.join(map(_shown, unknown))} (it records "
                f"{', '.join(sorted(known))})."
            )
        if not isinstance(data["recipe"], Mapping):
            raise InvalidInputError(
                f"recipe holds no recipe object (a JSON {type(data['recipe']).__name__})."
            )
        return cls(**{**data, "recipe": recipe_from_data(data["recipe"])})


def recipe_from_data(data: Mapping[str, Any]) -> Recipe:
    """A :class:`tfcompress.Recipe` from its JSON form (lists read back as tuples).

    Raises:
        InvalidInputError: Fields the recipe refuses (unknown, wrong type, out of range).

    Example:
        >>> recipe_from_data({"name": "int8", "calibration_samples": 300}).calibration_samples
        300
    """
    try:
        return Recipe.from_dict(
            {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        )
    except TypeError as error:  # a field of the wrong type deep in the recipe's checks
        raise InvalidInputError(f"recipe: {_shown(str(error), 200)}") from None


def _checked_methods(methods: Any) -> str | tuple[str, ...]:
    """``"auto"``/``"none"``/a comma list as the CLI's ``--method``, or a list of names."""
    from tfcompress.quantization.methods.catalog import canonical_methods, parse_methods

    if isinstance(methods, str):
        parse_methods(methods)  # refuses unknown names with the list of known ones
        return methods
    if not isinstance(methods, list | tuple):
        raise InvalidInputError(
            f"methods must be 'auto', 'none' or a list of method names, got {_shown(methods)}."
        )
    return tuple(canonical_methods(tuple(methods)))


def _shown(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
