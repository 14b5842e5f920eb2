"""What every deployment target is: the :class:`Target` base class and the data its hooks use.

A target is a subclass of :class:`Target` that sets a few class attributes (its name, recipe
rules, backends, options and budgets, each declared as data so the CLI can make flags of
them) and overrides the hooks where it differs from the default: ``check`` (its verdict on
a made artifact), ``summarize``, ``refusal`` and ``rank`` (how compress judges and orders
candidates), ``validate`` and ``side_outputs`` (its options, checked before any work). The
defaults describe a target with no check of its own, such as the CPU. Registering and
finding targets is :mod:`tfcompress.targets.base`'s job.

Importing this module imports no TensorFlow, no numpy: the CLI reads the declarations.

Example:
    >>> class Mcu(Target):
    ...     name = "mcu"
    ...     summary = "microcontrollers: full int8"
    ...     rules = RecipeRules(recipes=("int8",), integer_only=True)
    >>> Mcu().admits_recipe("float16"), Mcu().display_name
    (False, 'the mcu target')
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from tfcompress.errors import InvalidInputError


@dataclass(frozen=True)
class RecipeRules:
    """What a target demands of a recipe before anything is converted.

    Attributes:
        recipes: Recipe names the device runs (None: every recipe).
        integer_only: Every op must have an integer kernel: no float fallback, no float
            islands (the Edge TPU, microcontrollers).
        io_types: Input/output dtypes the device takes (None: what the recipe allows).
        default_io_type: The I/O dtype used when the user names none (None: the recipe's).
        static_batch: A static batch the file must have (None: the model's own).
        batch_is_default: ``static_batch`` is the default and the user may ask for another
            static batch (a GPU: any fixed batch folds the shape ops away); False: it is the
            only one the device runs (the Edge TPU's 1).

    Example:
        >>> RecipeRules(recipes=("int8",), integer_only=True).integer_only
        True
    """

    recipes: tuple[str, ...] | None = None
    integer_only: bool = False
    io_types: tuple[str, ...] | None = None
    default_io_type: str | None = None
    static_batch: int | None = None
    batch_is_default: bool = False

    def admits(self, recipe_name: str) -> bool:
        """Whether the device runs artifacts of this recipe."""
        return self.recipes is None or recipe_name in self.recipes


class TargetVerdict(Protocol):
    """What :meth:`Target.check` returns: the target's judgement of one artifact."""

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
class Verdict:
    """A ready-made :class:`TargetVerdict` for a target whose judgement is a few numbers.

    Attributes:
        compatible: Whether the whole artifact runs on the device.
        details: Plain data (JSON types) that says why: what was measured, against what.

    Example:
        >>> Verdict(True, {"arena_bytes": 2048}).to_dict()
        {'compatible': True, 'arena_bytes': 2048}
    """

    compatible: bool
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``compatible`` and the details."""
        return {"compatible": self.compatible, **self.details}

    def summary(self) -> dict[str, Any]:
        """What a compress attempt keeps: the whole verdict (it is small)."""
        return self.to_dict()

    def save_beside(self, out: Any, *, overwrite: bool = False) -> dict[str, Any]:
        """Nothing to write: the verdict lives in the JSON."""
        return {}

    def __str__(self) -> str:
        shown = ", ".join(f"{k} {v}" for k, v in self.details.items())
        return f"{'compatible' if self.compatible else 'not compatible'}" + (
            f": {shown}" if shown else ""
        )


@dataclass(frozen=True)
class TargetOption:
    """An option a target's check takes, and the CLI flag that sets it.

    ``tfcompress quantize`` and ``compress`` offer one flag per option, generated from this
    declaration; an option given with another target is refused.

    Attributes:
        name: Keyword of :meth:`Target.check` (``compiler``).
        flag: The CLI flag (``--compiler``).
        help: One line for ``--help``.
        type: Converts the flag's text (``str``, ``int``, ``float``).
        metavar: How ``--help`` shows the value (``PATH``).

    Example:
        >>> TargetOption("compiler", "--compiler", "the compiler to run", metavar="PATH").flag
        '--compiler'
    """

    name: str
    flag: str
    help: str
    type: Callable[[str], Any] = str
    metavar: str | None = None


@dataclass(frozen=True)
class BudgetField:
    """A budget a target adds to model selection, measured on each candidate's int8 file.

    Every budget field is an upper limit: a candidate whose measured value is above it is
    over budget and never trained. ``tfcompress select`` offers ``flag`` for it.

    Attributes:
        name: Key in :attr:`tfcompress.selection.Budgets.target_limits`
            (``max_edgetpu_segments``).
        flag: The ``tfcompress select`` flag (``--max-edgetpu-segments``).
        label: What is measured, in reports (``Edge TPU segments``).
        help: One line for ``--help``.
        measure: ``.tflite`` bytes -> the measured value (pure Python: it runs on workers).
        type: The flag's value type (``float``; ``int`` for a count given as one;
            ``"size"`` for bytes written as ``--max-size`` takes them, ``64KB`` or ``64KiB``,
            measured in bytes).

    Example:
        >>> from tfcompress.targets.base import get_target
        >>> budget = get_target("edgetpu").budget_fields[0]
        >>> budget.name, budget.flag
        ('max_edgetpu_segments', '--max-edgetpu-segments')
    """

    name: str
    flag: str
    label: str
    help: str
    measure: Callable[[bytes], float]
    type: Callable[[str], Any] | str = float

    def shown(self, value: float) -> str:
        """A measured value or a limit as reports write it (``65,536 B`` for a size).

        Example:
            >>> BudgetField("m", "--m", "arena", "", len, type="size").shown(65536)
            '65,536 B'
        """
        if self.type == "size":
            return f"{value:,.0f} B" if value != float("inf") else "none fits"
        return f"{value:g}"


class Target:
    """One deployment target: subclass it, set the class attributes, override what differs.

    Class attributes (the declaration, read without running anything):
        name: Registered name (``cpu``, ``gpu``, ``edgetpu``); also the JSON key its
            verdicts are filed under.
        summary: One line for listings and ``--help``.
        display_name: How messages name the device (``the Edge TPU``); default ``the NAME
            target``.
        rules: What it demands of a recipe (see :class:`RecipeRules`): what it accepts.
        default_recipe: The recipe made when none is named (None: the library's ``int8``).
        latency_backend: The runtime backend compress and select time artifacts on.
        judges_latency: Whether that backend's time is the device's own figure, which
            compress may refuse a slower artifact by (``max_slowdown``) and rank by
            (``objective="latency"``). False (TFLite Micro's reference kernels timed on this
            host): the time is shown, labelled as the host's, and never judged.
        gate_backend: The backend compress gates on (the Edge TPU's integer model gives the
            same outputs on the CPU, so its gate runs there when no Edge TPU is attached).
        default_objective: What compress ranks by when no objective is named (None:
            ``size``); ``latency`` is measured on ``latency_backend`` where it runs here.
        fallback_backend: Where compress gates when ``gate_backend`` cannot run here, and
            what lets compress and select go on without ``latency_backend`` (ranked by size,
            and said); None: they refuse the target on such a machine.
        options: Options its check takes (:class:`TargetOption`), each a CLI flag.
        budget_fields: Budgets it adds to model selection (:class:`BudgetField`), each a
            ``tfcompress select`` flag.

    Hooks (methods; the defaults are a target with no check of its own): :meth:`check`,
    :meth:`summarize`, :meth:`refusal`, :meth:`failure`, :meth:`rank`, :meth:`validate`,
    :meth:`side_outputs`, :meth:`admits_recipe`, :meth:`recipe_options`.

    Example:
        >>> from tfcompress.targets.base import get_target
        >>> get_target("edgetpu").rules.static_batch, get_target("cpu").checks
        (1, False)
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    display_name: ClassVar[str] = ""
    rules: ClassVar[RecipeRules] = RecipeRules()
    default_recipe: ClassVar[str | None] = None
    latency_backend: ClassVar[str] = "cpu"
    judges_latency: ClassVar[bool] = True
    gate_backend: ClassVar[str] = "cpu"
    default_objective: ClassVar[str | None] = None
    fallback_backend: ClassVar[str | None] = None
    options: ClassVar[tuple[TargetOption, ...]] = ()
    budget_fields: ClassVar[tuple[BudgetField, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.name and not cls.__dict__.get("display_name"):
            cls.display_name = f"the {cls.name} target"

    def __repr__(self) -> str:
        return f"<Target {self.name!r}: {self.summary}>"

    # -- the declaration, read ------------------------------------------------------------

    @property
    def checks(self) -> bool:
        """Whether this target has a check of its own (overrides :meth:`check`)."""
        return type(self).check is not Target.check

    @property
    def verdict_key(self) -> str | None:
        """The JSON key a result files this target's verdict under (its name), or None."""
        return self.name if self.checks else None

    @property
    def option_names(self) -> tuple[str, ...]:
        """The keyword options :meth:`check` takes."""
        return tuple(option.name for option in self.options)

    @property
    def shapes_artifact(self) -> bool:
        """Whether quantizing for this target differs from quantizing for none.

        A target with recipe rules or a check is recorded with the recipe it shaped, so a
        replay makes the same artifact; one without (the CPU) leaves the recipe as it was.
        """
        return self.rules != RecipeRules() or self.checks

    # -- hooks: what it accepts -----------------------------------------------------------

    def admits_recipe(self, recipe_name: str) -> bool:
        """Whether the device runs artifacts of this recipe (compress keeps only those rungs)."""
        return self.rules.admits(recipe_name)

    def recipe_options(
        self,
        recipe: Any,
        *,
        input_type: str | None,
        output_type: str | None,
        integer_only: bool | None = None,
        static_batch: int | None = None,
    ) -> dict[str, Any]:
        """Recipe options this target needs (``Recipe.with_options`` keywords).

        Args:
            recipe: The recipe asked for (a name or a ``Recipe``).
            input_type: The input dtype the user asked for, if any.
            output_type: The output dtype the user asked for, if any (default: the input's).
            integer_only: What the user asked for (None: nothing; False, i.e. float fallback
                asked for, is refused by an integer-only target).
            static_batch: The static batch the user asked for, if any.

        Returns:
            The I/O types, ``integer_only=True`` for an integer-only device, and its fixed
            batch; otherwise what the user asked for.

        Raises:
            InvalidInputError: A recipe, float fallback, batch or I/O type the device cannot
                run.

        Example:
            >>> from tfcompress.targets.base import get_target
            >>> get_target("edgetpu").recipe_options("int8", input_type=None, output_type=None)
            {'input_type': 'uint8', 'output_type': 'uint8', 'integer_only': True, 'static_batch': 1}
        """
        rules, device = self.rules, self.display_name
        name = str(getattr(recipe, "name", recipe))
        if not self.admits_recipe(name):
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
            "static_batch": static_batch,
        }
        if rules.static_batch is not None and rules.batch_is_default:
            own = getattr(recipe, "static_batch", None)
            asked = static_batch if static_batch is not None else own  # 0 is refused, not 1
            options["static_batch"] = rules.static_batch if asked is None else asked
        elif rules.static_batch is not None:
            for asked in (static_batch, getattr(recipe, "static_batch", None)):
                if asked not in (None, rules.static_batch):
                    raise InvalidInputError(
                        f"{device} needs a static batch of {rules.static_batch}, not "
                        f"static_batch={asked}; drop it (--target {self.name} fixes the batch "
                        f"at {rules.static_batch})."
                    )
            options["static_batch"] = rules.static_batch
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

    # -- hooks: its options, checked before any work ----------------------------------------

    def validate(self, **options: Any) -> None:
        """Refuse bad values of its own options (a ``--compiler`` that is not an executable).

        Called with the options given (never None ones), before any conversion.
        """

    def side_outputs(self, out: str | os.PathLike[str], **options: Any) -> tuple[Path, ...]:
        """Files the verdict's ``save_beside(out)`` will write, known before any work.

        The CLI checks them first (an existing file without ``--force`` fails in a second).
        """
        return ()

    def check_setup(self, **options: Any) -> None:
        """Refuse options this target does not take, then let it validate the ones it does.

        Raises:
            InvalidInputError: An option given that this target has no use for
                (``--compiler`` without ``--target edgetpu``).
            BackendUnavailableError: An option the target checks and refuses (a compiler
                that is not an executable).

        Example:
            >>> from tfcompress.targets.base import get_target
            >>> get_target("cpu").check_setup(compiler=None)
        """
        from tfcompress.targets.base import get_target, list_targets

        for option, value in options.items():
            if value is not None and option not in self.option_names:
                declared = {  # the flag each owner declares: the CLI has no other
                    n: o.flag
                    for n in list_targets()
                    for o in get_target(n).options
                    if o.name == option
                }
                flags = " or ".join(sorted(set(declared.values())))
                raise InvalidInputError(
                    f"{option}{f' ({flags})' if flags else ''} applies to --target "
                    f"{' or '.join(declared) or '?'} only."
                )
        given = {k: v for k, v in options.items() if v is not None}
        if given:
            self.validate(**given)

    # -- hooks: how it judges an artifact ---------------------------------------------------

    def check(self, content: bytes, **options: Any) -> TargetVerdict | None:
        """The target's own verdict on a made ``.tflite`` (None: it has none).

        Args:
            content: The artifact's bytes.
            **options: Its declared :attr:`options` that were given.
        """
        return None

    def summarize(self, verdict: Any) -> dict[str, Any] | None:
        """The numbers of a verdict a compress attempt keeps (plain data), None for none.

        The default keeps the verdict's ``summary()`` where it has one, else its
        ``to_dict()``.
        """
        if verdict is None:
            return None
        summary = getattr(verdict, "summary", None)
        return dict(summary() if callable(summary) else verdict.to_dict())

    def refusal(self, summary: Mapping[str, Any], float_nodes: tuple[str, ...]) -> str | None:
        """Why a candidate whose gate passed still does not qualify for the device.

        The default refuses one the check found incompatible.

        Args:
            summary: What :meth:`summarize` kept of its verdict.
            float_nodes: The converter nodes the candidate keeps in float.
        """
        if summary.get("compatible") is False:
            return f"{self.display_name} cannot run it"
        return None

    def failure(self, verdict: Any) -> str | None:
        """Why a made artifact fails the target's check: one line with the fix, or None.

        ``tfcompress quantize --target NAME`` prints it and exits 1 (the file is still
        written). The default fails nothing: a target whose verdict is a report (the Edge
        TPU's split into segments) leaves the judgement to the user.
        """
        return None

    def rank(self, attempt: Any) -> int:
        """How compress orders passing candidates before size or latency: 0 best.

        ``attempt.target_verdict`` holds what :meth:`summarize` kept. The default ranks
        every candidate alike.
        """
        return 0


def _own_type(recipe: Any, option: str) -> str | None:
    """A Recipe's own I/O type, unless it is the float default every recipe starts from."""
    value = getattr(recipe, option, None)
    return None if value in (None, "float32") else str(value)
