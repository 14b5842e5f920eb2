"""The post-training methods by name: what each does, and which combinations are valid.

No TensorFlow: :class:`~tfcompress.quantization.recipes.Recipe` validates its ``methods``
here. The names, their order and their summaries are the registry's (:mod:`.registry`:
each method is a class registered next to its algorithm), read when asked, so a method
registered later is known here too; ``tfcompress/cli/_choices.py`` keeps a plain copy of
the names for ``--help`` (tests/test_cli_help.py compares the two).

A recipe's methods always run in one order, whatever order they are named in: BatchNorm
folding (implied by every weight method), the weight methods by their ``order``
(``equalize``, ``adaround``: they rewrite a copy of the Keras model), then, on the
calibrated flatbuffer, the graph edit (``bias-correction``) and the activation ranges
(``percentile-ranges`` or ``mse-ranges``) before the converter quantizes. The stored tuple
is in that order, so equal recipes compare equal.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tfcompress._config_fields import number
from tfcompress.errors import InvalidInputError
from tfcompress.quantization.methods.registry import (
    CALIBRATED_FLATBUFFER,
    KERAS_MODEL,
    PTQ_METHODS,
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

    def __getitem__(self, index: Any) -> Any:
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
#: Methods that work on the calibrated flatbuffer before the converter quantizes (any model
#: the converter takes): the range methods (they edit the activation ranges) and the graph
#: methods (``bias-correction``: it edits the biases).
RANGE_METHODS: Sequence[str] = _Names(CALIBRATED_FLATBUFFER)
#: What ``methods="auto"`` tries next to the converter's plain int8 (one is kept by
#: :func:`~tfcompress.quantization.methods.selection.choose`): the methods on the calibrated
#: flatbuffer (any model the converter takes), then the weight methods with min/max, MSE and
#: percentile ranges (a Keras model only), in the order of :data:`AUTO_PAYOFF` per estimated
#: cost, within :data:`~tfcompress.quantization.methods.budget.AUTO_BUDGET`.
AUTO_CANDIDATES: tuple[tuple[str, ...], ...] = (
    ("mse-ranges",),
    ("percentile-ranges",),
    ("bias-correction",),
    ("bias-correction", "mse-ranges"),
    ("equalize", "bias-correction"),
    ("equalize", "bias-correction", "mse-ranges"),
    ("equalize", "bias-correction", "percentile-ranges"),
)
#: What each of auto's candidates is expected to gain on the weakest output, in dB: about
#: the median over the six models of docs/benchmarks.md's "Post-training methods" and "PTQ on
#: models shaped like users' models" sections (equalization with bias correction lifted the
#: depthwise classifier by 28 dB, the two-head regressor by 15 and the three-head model by
#: 6.5, the others by under 1 dB; the range methods gain fractions of a dB, percentile ranges
#: lost 14 dB on the normalization front end). Divided by a candidate's estimated seconds, it
#: orders them.
AUTO_PAYOFF: Mapping[tuple[str, ...], float] = {
    ("mse-ranges",): 0.5,
    ("percentile-ranges",): 0.2,
    ("bias-correction",): 0.3,
    ("bias-correction", "mse-ranges"): 0.5,
    ("equalize", "bias-correction"): 3.5,
    ("equalize", "bias-correction", "mse-ranges"): 3.0,
    ("equalize", "bias-correction", "percentile-ranges"): 2.0,
}
#: ``Recipe.range_percentile`` default: the top and bottom 0.01% of values are clipped.
DEFAULT_PERCENTILE = 99.99


def canonical_methods(methods: Any) -> tuple[str, ...]:
    """Validate method names (a list or tuple from :data:`METHODS`), in the order applied.

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
    for name in methods:
        PTQ_METHODS.get(name)  # UnknownNameError lists them
    known = _registered()
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
    """Whether one of the methods ``names`` reads the recipe field ``option``."""
    known = _registered()
    return any(option in known[n].options for n in names if n in known)


def parse_methods(text: str) -> tuple[tuple[str, ...], ...] | None:
    """Read the CLI's ``--methods``: ``auto``, ``none`` or a comma-separated list of names.

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
            f"--methods {text!r}: pass auto, none, or method names separated by commas "
            f"({', '.join(method_names())})."
        )
    return (canonical_methods(words),)


def check_methods_for(recipe: str, methods: Sequence[str], percentile: Any) -> float:
    """The percentile as a float; methods on a recipe not ``int8`` and unused percentiles refused.

    Raises:
        InvalidInputError: Methods on another recipe, a percentile outside (50, 100), or a
            non-default percentile without ``percentile-ranges``.
    """
    if methods and recipe != "int8":
        raise InvalidInputError(
            f"methods ({', '.join(methods)}) apply to recipe 'int8' only, not {recipe!r}; "
            "drop them or use recipe='int8'."
        )
    expected = f"a number between 50 and 100 (exclusive), e.g. {DEFAULT_PERCENTILE}"
    number(50.0, 100.0, expected)("range_percentile", percentile)
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
    """Which sets of methods :func:`tfcompress.quantize` makes, and whether it picks one.

    Args:
        recipe: The recipe's name.
        recipe_methods: ``Recipe.methods``: applied as given (a replay).
        methods: ``quantize(methods=...)``: None, ``"auto"``, ``"none"``, a comma-separated
            string or a list of names: tried against plain int8, one kept by
            :func:`~tfcompress.quantization.methods.selection.choose`.
        has_eval: ``eval_data`` was given.

    Returns:
        ``(candidates, searched)``: no candidates means the converter's plain int8. Without
        ``methods``, the recipe's own methods, else none: eval data alone does not turn the
        methods on (``int8`` means the converter's int8); with a gate too, ``auto`` runs
        only when plain int8 fails it (:func:`auto_if_plain_fails`).

    Raises:
        InvalidInputError: ``methods`` together with a recipe that names methods, methods or
            eval data on a recipe other than ``int8``, or an unknown method.
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
        return ((recipe_methods,), False) if recipe_methods else ((), False)
    if isinstance(methods, str):
        planned = parse_methods(methods)
    else:
        planned = (canonical_methods(methods),) if methods else None
    if planned is None:
        return (), False
    check_methods_for(recipe, planned[0], DEFAULT_PERCENTILE)
    return planned, True


def auto_if_plain_fails(
    recipe: str, recipe_methods: tuple[str, ...], methods: Any, *, has_eval: bool, gated: bool
) -> bool:
    """Whether plain int8 is judged by the gate first, and ``auto`` runs only if it fails.

    That is the default of ``int8`` with eval data and a gate (``--min-snr``,
    ``--max-drop``...) and no ``methods`` named: what the user asked for is the converter's
    int8 that passes the gate; the methods are the way to get there when it does not.
    """
    return recipe == "int8" and not recipe_methods and methods is None and has_eval and gated


def keras_only(methods: Sequence[str]) -> tuple[str, ...]:
    """The methods among ``methods`` that need a Keras model to rewrite (their ``needs``).

    A method whose ``needs`` is the calibrated graph runs on any model the converter takes.
    """
    known = _registered()
    return tuple(m for m in methods if m in known and known[m].needs == KERAS_MODEL)


def runnable_candidates(
    candidates: Sequence[tuple[str, ...]], why_not_keras: str | None
) -> tuple[tuple[tuple[str, ...], ...], tuple[tuple[str, str], ...]]:
    """The candidates that can run on a model, and ``(label, why)`` for the others.

    On a model that is not a Keras model, a candidate loses its methods that need one (by
    each method's ``needs``): what is left is tried, unless nothing is or an earlier
    candidate is the same. A method that works on the calibrated graph is therefore tried on
    a SavedModel as soon as it is registered so. ``why_not_keras`` is None when the model
    is a Keras model the weight methods can rewrite, else why not (``"a SavedModel"``).
    """
    if why_not_keras is None:
        return tuple(candidates), ()
    kept: list[tuple[str, ...]] = []
    skipped: list[tuple[str, str]] = []
    for methods in candidates:
        needing = keras_only(methods)
        rest = tuple(m for m in methods if m not in needing)
        if not needing:
            if rest not in kept:
                kept.append(rest)
            continue
        why = f"{', '.join(needing)} need{'s' if len(needing) == 1 else ''} a Keras model "
        why += f"({why_not_keras})"
        # Said when planning: whether the rest then runs (a budget) is its own row's to say.
        rest_row = f"; {'+'.join(rest)} is a candidate of its own" if rest else ""
        skipped.append(("+".join(methods), why + rest_row))
        if rest and rest not in kept:
            kept.append(rest)
    return tuple(kept), tuple(skipped)


def refuse_unrunnable(methods: Sequence[str], why_not_keras: str | None, *, source: str) -> None:
    """Refuse, in one line and before any conversion, methods named that cannot run here.

    Raises:
        InvalidInputError: A method that needs a Keras model, on a model that is not one.
    """
    needing = keras_only(methods)
    if why_not_keras is None or not needing:
        return
    anywhere = [m.name for m in registered_methods() if m.needs != KERAS_MODEL]
    plural = "s" if len(needing) > 1 else ""
    raise InvalidInputError(
        f"method{plural} {', '.join(needing)} need{'' if plural else 's'} a Keras model to "
        f"rewrite and {source!r} is not one ({why_not_keras}); on this model only "
        f"{', '.join(anywhere)} run: name those, or load the .keras/.h5 file."
    )
