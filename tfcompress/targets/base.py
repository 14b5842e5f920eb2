"""Deployment targets as data: what a device needs of an artifact, and how it is judged.

A :class:`Target` is registered with :func:`register_target` next to what it knows (the Edge
TPU's in ``targets/edgetpu/target.py``). Everything that depends on where an artifact goes
reads the target from the registry: ``quantize(target=)`` applies its recipe rules and runs
its check, ``compress(target=)`` keeps the rungs it admits, gates on its gate backend, times
on its latency backend and ranks with its rank, ``select_model`` measures on its latency
backend and applies the budget fields it adds, and the CLI offers :func:`list_targets` as
choices. A new target is one module plus its registration (``tests/test_targets.py`` runs
every registered target through the same contract).

Importing this module imports no TensorFlow: the CLI builds its ``--target`` choices from it.

Example:
    >>> get_target("edgetpu").rules.batch_size
    1
    >>> list_targets()
    ['cpu', 'edgetpu', 'gpu']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tfcompress.errors import InvalidInputError

__all__ = [
    "BudgetField",
    "RecipeRules",
    "Target",
    "TargetVerdict",
    "get_target",
    "list_targets",
    "register_target",
    "resolve_target",
    "verdict_under",
    "verdicts_by_key",
]


@dataclass(frozen=True)
class RecipeRules:
    """What a target demands of a recipe before anything is converted.

    Attributes:
        recipes: Recipe names the device runs (None: every recipe).
        integer_only: Every op must have an integer kernel: no float fallback, no float
            islands (the Edge TPU, microcontrollers).
        io_types: Input/output dtypes the device takes (None: what the recipe allows).
        default_io_type: The I/O dtype used when the user names none (None: the recipe's).
        batch_size: A static batch the file must have (None: the model's own).

    Example:
        >>> RecipeRules(recipes=("int8",), integer_only=True).integer_only
        True
    """

    recipes: tuple[str, ...] | None = None
    integer_only: bool = False
    io_types: tuple[str, ...] | None = None
    default_io_type: str | None = None
    batch_size: int | None = None

    def admits(self, recipe_name: str) -> bool:
        """Whether the device runs artifacts of this recipe."""
        return self.recipes is None or recipe_name in self.recipes


class TargetVerdict(Protocol):
    """What a target's :attr:`Target.check` returns: its judgement of one artifact."""

    @property
    def compatible(self) -> bool:
        """Whether the whole artifact runs on the device."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports."""
        ...

    def save_beside(self, out: Any, *, overwrite: bool = False) -> dict[str, Any]:
        """Write the target's own files next to ``out``; their paths as JSON fields."""
        ...


@dataclass(frozen=True)
class BudgetField:
    """A budget a target adds to model selection, measured on each candidate's int8 file.

    Every budget field is an upper limit: a candidate whose measured value is above it is
    over budget and never trained.

    Attributes:
        name: Key in :attr:`tfcompress.selection.Budgets.target_limits`
            (``max_edgetpu_segments``).
        flag: The ``tfcompress select`` flag (``--max-edgetpu-segments``).
        label: What is measured, in reports (``Edge TPU segments``).
        help: One line for ``--help``.
        measure: ``.tflite`` bytes -> the measured value (pure Python: it runs on workers).

    Example:
        >>> field = get_target("edgetpu").budget_fields[0]
        >>> field.name, field.flag
        ('max_edgetpu_segments', '--max-edgetpu-segments')
    """

    name: str
    flag: str
    label: str
    help: str
    measure: Callable[[bytes], float]


@dataclass(frozen=True)
class Target:
    """One deployment target.

    Attributes:
        name: Registered name (``cpu``, ``gpu``, ``edgetpu``).
        summary: One line for listings and ``--help``.
        display_name: How messages name the device (``the Edge TPU``); default: the name.
        rules: What it demands of a recipe (see :class:`RecipeRules`).
        latency_backend: The runtime backend compress and select time artifacts on.
        gate_backend: The backend compress gates on (the Edge TPU's integer model gives the
            same outputs on the CPU, so its gate runs there when no Edge TPU is attached).
        check: ``check(content, **options) -> TargetVerdict``: the target's own verdict on a
            made artifact (the Edge TPU linter and compiler); None for targets with none.
        check_options: Keyword options ``check`` takes (``compiler`` for the Edge TPU); any
            other option given with the target is refused.
        validate: ``validate(**check_options)``: refuse bad check options before any work
            (a ``--compiler`` that is not an executable); None when there is nothing to check.
        side_outputs: ``side_outputs(out, **check_options) -> paths``: files the verdict
            writes next to the artifact (``verdict.save_beside(out)``: the Edge TPU's compiled
            model and log), known before any work so the CLI checks them first.
        verdict_key: The JSON key a result files the verdict under (``edgetpu``).
        rank: ``rank(attempt) -> int``, 0 best: how compress orders passing candidates before
            their size or latency (one Edge TPU segment first); None ranks all alike.
        summarize: ``summarize(verdict) -> dict``: the numbers a compress attempt keeps.
        refusal: ``refusal(summary, float_nodes) -> str | None``: why a candidate whose gate
            passed still does not qualify for the device.
        budget_fields: Budgets it adds to model selection.
    """

    name: str
    summary: str
    display_name: str = ""
    rules: RecipeRules = field(default_factory=RecipeRules)
    latency_backend: str = "cpu"
    gate_backend: str = "cpu"
    check: Callable[..., TargetVerdict] | None = None
    check_options: tuple[str, ...] = ()
    validate: Callable[..., None] | None = None
    side_outputs: Callable[..., tuple[Path, ...]] | None = None
    verdict_key: str | None = None
    rank: Callable[[Any], int] | None = None
    summarize: Callable[[Any], dict[str, Any]] | None = None
    refusal: Callable[[Mapping[str, Any], tuple[str, ...]], str | None] | None = None
    budget_fields: tuple[BudgetField, ...] = ()

    def __post_init__(self) -> None:
        if not self.display_name:
            object.__setattr__(self, "display_name", f"the {self.name} target")

    @property
    def shapes_artifact(self) -> bool:
        """Whether quantizing for this target differs from quantizing for none.

        A target with recipe rules or a check is recorded with the recipe it shaped, so a
        replay makes the same artifact; one without (the CPU) leaves the recipe as it was.
        """
        return self.rules != RecipeRules() or self.check is not None

    def admits_recipe(self, recipe_name: str) -> bool:
        """Whether compress may try a rung made with this recipe for this target."""
        return self.rules.admits(recipe_name)

    def recipe_options(
        self,
        recipe: Any,
        *,
        input_type: str | None,
        output_type: str | None,
        integer_only: bool | None = None,
        batch_size: int | None = None,
    ) -> dict[str, Any]:
        """Recipe options this target needs (``Recipe.with_options`` keywords).

        Args:
            recipe: The recipe asked for (a name or a ``Recipe``).
            input_type: The input dtype the user asked for, if any.
            output_type: The output dtype the user asked for, if any (default: the input's).
            integer_only: What the user asked for (None: nothing; False, i.e. float fallback
                asked for, is refused by an integer-only target).
            batch_size: The static batch the user asked for, if any.

        Returns:
            The I/O types, ``integer_only=True`` for an integer-only device (every later
            integer-only target follows the Edge TPU's rule), and its fixed batch; otherwise
            what the user asked for.

        Raises:
            InvalidInputError: A recipe, float fallback, batch or I/O type the device cannot
                run.

        Example:
            >>> get_target("edgetpu").recipe_options("int8", input_type=None, output_type=None)
            {'input_type': 'uint8', 'output_type': 'uint8', 'integer_only': True, 'batch_size': 1}
        """
        rules, device = self.rules, self.display_name
        name = str(getattr(recipe, "name", recipe))
        if not rules.admits(name):
            kind = "full-integer models" if rules.integer_only else "these recipes"
            raise InvalidInputError(
                f"{device} runs {kind} only: use the {' or '.join(rules.recipes or ())} recipe, "
                f"not {name!r}."
            )
        if rules.integer_only and integer_only is False:
            raise InvalidInputError(
                f"float fallback leaves ops in float, which {device} cannot run: target "
                f"{self.name!r} is integer-only; drop integer_only=False (the target's check "
                "then names the op to replace)."
            )
        options: dict[str, Any] = {
            "integer_only": True if rules.integer_only else integer_only,
            "batch_size": batch_size,
        }
        if rules.batch_size is not None:
            for asked in (batch_size, getattr(recipe, "batch_size", None)):
                if asked not in (None, rules.batch_size):
                    raise InvalidInputError(
                        f"{device} needs a static batch of {rules.batch_size}, not batch_size="
                        f"{asked}; drop it (--target {self.name} fixes the batch at "
                        f"{rules.batch_size})."
                    )
            options["batch_size"] = rules.batch_size
        chosen_input = input_type or _own_type(recipe, "input_type") or rules.default_io_type
        chosen_output = output_type or _own_type(recipe, "output_type") or chosen_input
        if rules.io_types is not None:
            default = f" ({rules.default_io_type} by default)" if rules.default_io_type else ""
            for option, value in (("input_type", chosen_input), ("output_type", chosen_output)):
                if value not in rules.io_types:
                    raise InvalidInputError(
                        f"{option}={value!r}: {device} takes {' or '.join(rules.io_types)} "
                        f"inputs and outputs{default}."
                    )
        return {"input_type": chosen_input, "output_type": chosen_output, **options}

    def check_setup(self, **options: Any) -> None:
        """Refuse options this target does not take, then let it check the ones it does.

        Called before any conversion, so a bad ``--compiler`` fails in a second.

        Raises:
            InvalidInputError: An option given that this target has no use for
                (``--compiler`` without ``--target edgetpu``).
            BackendUnavailableError: An option the target checks and refuses (a compiler
                that is not an executable).

        Example:
            >>> get_target("cpu").check_setup(compiler=None)
        """
        for option, value in options.items():
            if value is not None and option not in self.check_options:
                owners = [n for n in list_targets() if option in _TARGETS[n].check_options]
                flag = "--" + option.replace("_", "-")
                raise InvalidInputError(
                    f"{option} ({flag}) applies to --target {' or '.join(owners) or '?'} only."
                )
        given = {k: v for k, v in options.items() if v is not None}
        if self.validate is not None and given:
            self.validate(**given)


def resolve_target(name: str | None, **options: Any) -> Target | None:
    """The target ``name`` (None: no target), with its options checked before any work.

    Raises:
        InvalidInputError: An unknown target, or an option no target given takes
            (``--compiler`` without ``--target edgetpu``).
        BackendUnavailableError: An option the target refuses (see :meth:`Target.check_setup`).

    Example:
        >>> resolve_target(None) is None
        True
    """
    if name is None:
        _NO_TARGET.check_setup(**options)
        return None
    target = get_target(name)
    target.check_setup(**options)
    return target


def verdicts_by_key(target: str | None, verdict: Any) -> dict[str, Any]:
    """JSON for a result: every target's verdict key, filled for the target that checked.

    A report keeps the same keys whatever the target (``"edgetpu": null`` without one).

    Example:
        >>> verdicts_by_key(None, None)
        {'edgetpu': None}
    """
    keys = {t.verdict_key: None for t in (get_target(n) for n in list_targets()) if t.verdict_key}
    if target is not None and verdict is not None:
        key = get_target(target).verdict_key
        if key is not None:
            keys[key] = verdict.to_dict()
    return keys


def verdict_under(target: str | None, verdict: Any, key: str) -> Any:
    """``verdict`` when ``target`` files its verdicts under ``key``, else None.

    Example:
        >>> verdict_under("cpu", None, "edgetpu") is None
        True
    """
    if target is None or get_target(target).verdict_key != key:
        return None
    return verdict


def _own_type(recipe: Any, option: str) -> str | None:
    """A Recipe's own I/O type, unless it is the float default every recipe starts from."""
    value = getattr(recipe, option, None)
    return None if value in (None, "float32") else str(value)


_TARGETS: dict[str, Target] = {}
_NO_TARGET = Target("none", "no target: a recipe as it is")  # takes no options (not registered)


def register_target(target: Target) -> Target:
    """Make ``target`` available by name to quantize, compress, select and the CLI.

    Returns:
        The target (so a module can keep a reference to what it registered).

    Example:
        >>> TARGET = register_target(Target("mcu", "microcontrollers"))  # doctest: +SKIP
    """
    _TARGETS[target.name] = target
    return target


def get_target(name: str) -> Target:
    """The registered target ``name``.

    Raises:
        InvalidInputError: No such target (the message lists the registered ones).
    """
    _load_builtin()
    if not isinstance(name, str) or name not in _TARGETS:
        raise InvalidInputError(
            f"unknown target {name!r}; choose one of {', '.join(list_targets())}."
        )
    return _TARGETS[name]


def list_targets() -> list[str]:
    """Names of the registered targets, sorted."""
    _load_builtin()
    return sorted(_TARGETS)


def _load_builtin() -> None:
    # The built-in targets register on import; importing them here (not at the top) keeps
    # base.py importable by the modules those targets import.
    from tfcompress.targets import cpu, gpu  # noqa: F401
    from tfcompress.targets.edgetpu import target  # noqa: F401
