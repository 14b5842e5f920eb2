"""The post-training methods by name: what each does, and which combinations are valid.

No TensorFlow: :class:`~tfcompress.quantization.recipes.Recipe` validates its ``methods``
here. The names, their order and their summaries are the registry's (:mod:`.registry`:
each method is a class registered next to its algorithm), read when asked, so a method
registered later is known here too; ``tfcompress/cli/_choices.py`` keeps a plain copy of
the names for ``--help`` (tests/test_cli_help.py compares the two).

A recipe's methods always run in one order, whatever order they are named in: BatchNorm
folding (implied by every weight method), the weight methods by their ``order``
(``equalize``, ``adaround``, ``bias-correction``), then the activation ranges
(``percentile-ranges`` or ``mse-ranges``) before the converter quantizes. The stored tuple
is in that order, so equal recipes compare equal.

Example:
    >>> canonical_methods(["mse-ranges", "equalize"])
    ('equalize', 'mse-ranges')
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

from tfcompress.errors import InvalidInputError
from tfcompress.quantization.methods.registry import (
    CALIBRATED_FLATBUFFER,
    KERAS_MODEL,
    method_names,
)
from tfcompress.quantization.methods.registry import methods as registered_methods


class _Summaries(Mapping[str, str]):
    """Every registered method's name -> its one line, in the order recipes apply them."""

    def __getitem__(self, name: str) -> str:
        found = next((m for m in registered_methods() if m.name == name), None)
        if found is None:
            raise KeyError(name)
        return found.summary

    def __iter__(self) -> Iterator[str]:
        return iter(method_names())

    def __len__(self) -> int:
        return len(method_names())

    def __repr__(self) -> str:
        return repr(dict(self))


class _Names(Sequence[str]):
    """The names of the registered methods that work on ``needs``, in order."""

    def __init__(self, needs: str) -> None:
        self.needs = needs

    def _names(self) -> tuple[str, ...]:
        return tuple(m.name for m in registered_methods() if m.needs == self.needs)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...
    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._names())


#: Every method, in the order a recipe applies them, with one line each (the registry's).
METHODS: Mapping[str, str] = _Summaries()
#: Methods that rewrite a copy of the float Keras model before conversion.
WEIGHT_METHODS: Sequence[str] = _Names(KERAS_MODEL)
#: Methods that edit the calibrated activation ranges before the converter quantizes.
RANGE_METHODS: Sequence[str] = _Names(CALIBRATED_FLATBUFFER)
#: What ``methods="auto"`` tries next to the converter's plain int8 (the best one not worse
#: is kept): the cheap weight methods with min/max, MSE and percentile ranges. All three share
#: one rewritten model, one calibration and one float run for the histograms, so each range
#: variant costs one quantizer call and one scoring.
AUTO_CANDIDATES: tuple[tuple[str, ...], ...] = (
    ("equalize", "bias-correction"),
    ("equalize", "bias-correction", "mse-ranges"),
    ("equalize", "bias-correction", "percentile-ranges"),
)
#: ``Recipe.range_percentile`` default: the top and bottom 0.01% of values are clipped.
DEFAULT_PERCENTILE = 99.99


def canonical_methods(methods: Any) -> tuple[str, ...]:
    """Validate method names and return them in the order they are applied.

    Args:
        methods: A list or tuple of names from :data:`METHODS`.

    Returns:
        The names in application order.

    Raises:
        InvalidInputError: Not a list of names, an unknown or repeated name, or two range
            methods at once.

    Example:
        >>> canonical_methods(("bias-correction", "equalize"))
        ('equalize', 'bias-correction')
    """
    if (
        isinstance(methods, str)
        or not isinstance(methods, list | tuple)
        or not all(isinstance(m, str) for m in methods)  # a {} is not a name (nor hashable)
    ):
        raise InvalidInputError(
            f"methods must be a list of method names, got {repr(methods)[:200]}; e.g. "
            "['equalize', 'bias-correction']."
        )
    known = _registered()
    unknown = [m for m in methods if m not in known]
    if unknown:
        raise InvalidInputError(
            f"unknown method {unknown[0][:100]!r}; choose from {', '.join(known)}."
        )
    if len(set(methods)) != len(methods):
        raise InvalidInputError(f"methods {list(methods)!r} names a method twice.")
    groups: dict[str, list[str]] = {}
    for name in methods:
        if known[name].exclusive is not None:
            groups.setdefault(known[name].exclusive, []).append(name)
    for group, names in groups.items():
        if len(names) > 1:
            raise InvalidInputError(f"choose one {group} method, not {' and '.join(names)}.")
    return tuple(m for m in known if m in methods)


def _registered() -> dict[str, Any]:
    """The registered methods by name, in order."""
    return {m.name: m for m in registered_methods()}


def option_used(option: str, names: Sequence[str]) -> bool:
    """Whether one of the methods ``names`` reads the recipe field ``option``.

    Example:
        >>> option_used("range_percentile", ("equalize", "percentile-ranges"))
        True
    """
    known = _registered()
    return any(option in known[n].options for n in names if n in known)


def parse_methods(text: str) -> tuple[tuple[str, ...], ...] | None:
    """Read the CLI's ``--method``: ``auto``, ``none`` or a comma-separated list of names.

    Returns:
        The candidates to try next to plain int8 (``auto``: :data:`AUTO_CANDIDATES`; a list:
        that one combination), or None for ``none`` (the converter's plain int8).

    Raises:
        InvalidInputError: An unknown name or an invalid combination.

    Example:
        >>> parse_methods("bias-correction,equalize")
        (('equalize', 'bias-correction'),)
        >>> parse_methods("none") is None
        True
    """
    words = [w.strip() for w in text.split(",") if w.strip()]
    if words == ["auto"]:
        return AUTO_CANDIDATES
    if words == ["none"]:
        return None
    if not words or "auto" in words or "none" in words:
        raise InvalidInputError(
            f"--method {text!r}: pass auto, none, or method names separated by commas "
            f"({', '.join(method_names())})."
        )
    return (canonical_methods(words),)


def check_methods_for(recipe: str, methods: Sequence[str], percentile: Any) -> float:
    """Refuse methods on a recipe that is not ``int8``, and a percentile nothing uses.

    Returns:
        The percentile as a float.

    Raises:
        InvalidInputError: Methods on another recipe, a percentile outside (50, 100), or a
            non-default percentile without ``percentile-ranges``.
    """
    if methods and recipe != "int8":
        raise InvalidInputError(
            f"methods ({', '.join(methods)}) apply to recipe 'int8' only, not {recipe!r}; "
            "drop them or use recipe='int8'."
        )
    if isinstance(percentile, bool) or not isinstance(percentile, int | float):
        raise InvalidInputError(f"range_percentile must be a number, got {percentile!r}.")
    if not 50.0 < float(percentile) < 100.0:
        raise InvalidInputError(
            f"range_percentile must lie between 50 and 100 (exclusive), got {percentile!r}; "
            f"e.g. {DEFAULT_PERCENTILE}."
        )
    if float(percentile) != DEFAULT_PERCENTILE and not option_used("range_percentile", methods):
        readers = " or ".join(
            repr(m.name) for m in registered_methods() if "range_percentile" in m.options
        )
        raise InvalidInputError(
            f"range_percentile={percentile!r} is used by the {readers} method only; "
            "add it to methods or drop range_percentile."
        )
    return float(percentile)


def plan_candidates(
    recipe: str, recipe_methods: tuple[str, ...], methods: Any, *, has_eval: bool
) -> tuple[tuple[tuple[str, ...], ...], bool]:
    """Which sets of methods :func:`tfcompress.quantize` makes, and whether it picks the best.

    Args:
        recipe: The recipe's name.
        recipe_methods: ``Recipe.methods``: applied as given (a replay).
        methods: ``quantize(methods=...)``: None, ``"auto"``, ``"none"``, a comma-separated
            string or a list of names: tried against plain int8, the better kept.
        has_eval: ``eval_data`` was given.

    Returns:
        ``(candidates, searched)``: no candidates means the converter's plain int8.
        Without ``methods``, eval data on ``int8`` means ``"auto"`` (the documented default:
        never worse than plain int8 on that data); without both, the recipe's own methods.

    Raises:
        InvalidInputError: ``methods`` together with a recipe that names methods, methods or
            eval data on a recipe other than ``int8``, or an unknown method.

    Example:
        >>> plan_candidates("int8", (), None, has_eval=True) == (AUTO_CANDIDATES, True)
        True
        >>> plan_candidates("int8", ("equalize",), None, has_eval=False)
        ((('equalize',),), False)
    """
    if methods is not None and recipe_methods:
        raise InvalidInputError(
            f"the recipe already names methods ({', '.join(recipe_methods)}), applied as "
            "given; pass methods= only to try methods against plain int8, not both."
        )
    if has_eval and recipe != "int8":
        raise InvalidInputError(
            f"eval_data scores the int8 methods against plain int8; recipe {recipe!r} has "
            "none: drop eval_data (evaluate the result with tfcompress.evaluate)."
        )
    if methods is None:
        if recipe_methods:
            return (recipe_methods,), False
        return (AUTO_CANDIDATES, True) if has_eval else ((), False)
    if isinstance(methods, str):
        planned = parse_methods(methods)
    else:
        planned = (canonical_methods(methods),) if methods else None
    if planned is None:
        return (), False
    check_methods_for(recipe, planned[0], DEFAULT_PERCENTILE)
    return planned, True
