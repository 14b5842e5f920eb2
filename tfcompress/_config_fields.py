"""What every config of tfcompress shares: its format version, its options and their checks.

An option is declared once, as a config field made by :func:`option`: its default, its
help, its unit, its check and how a command line spells a value live there; the config's
``__post_init__`` runs the checks (:func:`check_fields`). The CLI reads those
declarations with :func:`declared_options` (:mod:`ast`, nothing imported: ``--help`` stays
light) and makes one flag per field, named as the field (``calibration_samples`` is
``--calibration-samples``); the verb's keyword is the field's name too.

The post-training config (:class:`tfcompress.quantization.config.PTQConfig`) and the
fine-tuning configs (:mod:`tfcompress.training.configs`) sit on different layers; both
read the version they write and check their integers here, so a report's ``version`` and
a seed mean the same thing in each.

Example:
    >>> check_version("qat", CONFIG_VERSION)
    >>> require_int("seed", 3, 0, MAX_SEED, "a seed")
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from tfcompress.errors import InvalidArgumentTypeError, InvalidInputError

C = TypeVar("C")

#: The config format this tfcompress writes; ``from_dict`` refuses a newer one.
CONFIG_VERSION = 1
MAX_SEED = 2**32 - 1
"""The largest seed NumPy's legacy seeding (which Keras uses) accepts."""


@dataclass(frozen=True)
class DeclaredOption:
    """One option as its config field declares it (read by :func:`declared_options`).

    Attributes:
        name: The field's name: the verb's keyword; the flag is it with dashes.
        annotation: The field's type as written (``"int | None"``).
        default: The field's default (None: decided later, as ``help`` says).
        help: What it does, for ``--help`` and docs.
        unit: The unit of a number (``"s"``), or None.
        metavar: The flag's placeholder, or None (the type's).
        parse: Name of the argparse ``type`` in :mod:`tfcompress.cli.common` that reads
            the flag's text (``"duration"``: ``10m``), or None (the annotation's type).
        choices: The values a string option takes, or None (the config checks it).
        names: The list in :mod:`tfcompress.cli._choices` (``"BACKENDS"``) of the names a
            registry knows, shown by ``--help``; the ``parse`` and the check refuse others.
    """

    name: str
    annotation: str
    default: Any
    help: str
    unit: str | None = None
    metavar: str | None = None
    parse: str | None = None
    choices: tuple[str, ...] | None = None
    names: str | None = None

    @property
    def flag(self) -> str:
        """``--calibration-samples`` for ``calibration_samples``."""
        return "--" + self.name.replace("_", "-")


_OPTION_KEYS = ("help", "unit", "metavar", "parse", "choices", "names")


def option(
    default: Any = MISSING,
    *,
    help: str,
    unit: str | None = None,
    metavar: str | None = None,
    parse: str | None = None,
    choices: tuple[str, ...] | None = None,
    names: str | None = None,
    check: Callable[[str, Any], Any] | None = None,
) -> Any:
    """A config field that declares an option: its default, help, unit and check.

    The arguments but ``check`` are literals, so :func:`declared_options` reads them from
    the source. ``check(name, value)`` returns the value (normalized) or raises the one
    message of the option; :func:`check_fields` runs every field's in the config's
    ``__post_init__``.

    Example:
        >>> from dataclasses import dataclass
        >>> @dataclass
        ... class C:
        ...     seed: int = option(0, help="seed")
        >>> C().seed
        0
    """
    metadata = {"help": help, "unit": unit, "metavar": metavar, "parse": parse, "choices": choices}
    metadata.update(names=names, check=check)
    return field(default=default, metadata=metadata)


def new_default(base: type, name: str, default: Any) -> Any:
    """A subclass's own ``default`` for the option ``name`` of ``base``: same help and check."""
    return field(default=default, metadata=base.__dataclass_fields__[name].metadata)


@functools.cache
def declared_options(module: str, cls: str) -> dict[str, DeclaredOption]:
    """The :func:`option` fields of config class ``cls`` in ``module``, read from its source.

    Args:
        module: ``"quantization.config"`` (under ``tfcompress/``).
        cls: ``"PTQConfig"``.

    Raises:
        LookupError: No such class (a bug in tfcompress, caught by ``tests/test_cli_options.py``).
        ValueError: An ``option(...)`` whose arguments are not literals (the same).

    Example:
        >>> declared_options("compression.config", "CompressConfig")["seed"].flag
        '--seed'
    """
    path, tree = _source(module)
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
    if node is None:
        raise LookupError(f"{path}: no class {cls}")
    constants = _constants(module)
    found: dict[str, DeclaredOption] = {}
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    for base in node.bases:  # a base class in the same module declares options too
        if getattr(base, "id", "") in classes:
            found.update(declared_options(module, base.id))  # type: ignore[attr-defined]
    for item in node.body:
        call = item.value if isinstance(item, ast.AnnAssign) else None
        name = getattr(getattr(item, "target", None), "id", "")
        kind = getattr(getattr(call, "func", None), "id", "")
        if kind == "new_default" and name in found:  # a subclass's own default
            default = _literal(call.args[2], constants)  # type: ignore[union-attr]
            found[name] = dataclasses.replace(found[name], default=default)
            continue
        if kind != "option":
            continue
        keywords = {k.arg: k.value for k in call.keywords}
        try:
            default = _literal(call.args[0], constants) if call.args else None
            declared = {k: _literal(keywords[k], constants) for k in _OPTION_KEYS if k in keywords}
        except ValueError:
            raise ValueError(f"{path}: {cls}.{name}: option() takes literals only") from None
        found[name] = DeclaredOption(name, ast.unparse(item.annotation), default, **declared)
    return found


def _source(module: str) -> tuple[Path, ast.Module]:
    path = Path(__file__).resolve().parent.joinpath(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    return path, ast.parse(path.read_text(encoding="utf-8"))


@functools.cache
def _constants(module: str) -> dict[str, Any]:
    """Module-level names an option may name: a node, or an imported one's origin."""
    found: dict[str, Any] = {}
    for n in _source(module)[1].body:
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("tfcompress."):
            origin = n.module.removeprefix("tfcompress.")  # type: ignore[union-attr]
            found.update({a.asname or a.name: (origin, a.name) for a in n.names})
        elif isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name):
            found[n.targets[0].id] = n.value
    return found


def _literal(node: ast.expr, constants: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Name) and node.id in constants:
        named = constants[node.id]
        if isinstance(named, tuple):  # imported: read in its module
            return _literal(ast.Name(named[1]), _constants(named[0]))
        node = named
    return ast.literal_eval(node)


def require_int(name: str, value: Any, low: int, high: int, expected: str) -> None:
    """Refuse anything but an integer (not a bool) from ``low`` to ``high``.

    Raises:
        InvalidInputError: ``"<name> must be <expected>, got <value>."``

    Example:
        >>> require_int("seed", 3, 0, MAX_SEED, "a seed")
    """
    if not (isinstance(value, int) and not isinstance(value, bool) and low <= value <= high):
        raise InvalidInputError(f"{name} must be {expected}, got {shown(value)}.")


def check_fields(config: Any) -> None:
    """Run the check of each :func:`option` field of ``config``, keeping what it returns.

    A config's ``__post_init__`` calls it once; what is left there checks fields together.
    """
    for f in fields(config):
        check = f.metadata.get("check")
        if check is not None:
            object.__setattr__(config, f.name, check(f.name, getattr(config, f.name)))


def integer(
    low: int, high: int = 2**63 - 1, expected: str | None = None, *, optional: bool = False
) -> Callable:
    """An :func:`option` check: an integer (not a bool) from ``low`` to ``high`` (or None)."""
    said = expected or f"an integer {low} to {high}"

    def check(name: str, value: Any) -> Any:
        if not (optional and value is None):
            require_int(name, value, low, high, said)
        return value

    return check


def number(low: float, high: float, expected: str, *, optional: bool = False) -> Callable:
    """An :func:`option` check: a finite number in the open interval (``low``, ``high``)."""

    def check(name: str, value: Any) -> Any:
        if optional and value is None:
            return value
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not (ok and math.isfinite(value) and low < value < high):
            raise InvalidInputError(f"{name} must be {expected}, got {shown(value)}.")
        return value

    return check


def boolean(name: str, value: Any) -> Any:
    """An :func:`option` check: True or False."""
    if not isinstance(value, bool):
        raise InvalidInputError(f"{name} must be true or false, got {shown(value)}.")
    return value


def maybe_boolean(name: str, value: Any) -> Any:
    """An :func:`option` check: True, False or None (decided later)."""
    if value is not None and not isinstance(value, bool):
        raise InvalidInputError(f"{name} must be true, false or None, got {shown(value)}.")
    return value


def one_of(choices: tuple[str, ...]) -> Callable:
    """An :func:`option` check: None or one of ``choices``."""

    def check(name: str, value: Any) -> Any:
        if value is not None and not (isinstance(value, str) and value in choices):
            said = ", ".join(map(repr, choices))
            raise InvalidInputError(f"{name} must be null or one of {said}, got {shown(value)}.")
        return value

    return check


def names(what: str) -> Callable:
    """An :func:`option` check: a list or tuple of ``what`` (strings), kept as a tuple."""

    def check(name: str, value: Any) -> Any:
        if not (isinstance(value, list | tuple) and all(isinstance(n, str) for n in value)):
            raise InvalidInputError(f"{name} must be a list of {what}, got {shown(value)}.")
        return tuple(value)

    return check


def name_list(name: str, value: Any) -> tuple[str, ...]:
    """An :func:`option` check: None (no names), one name, or a sequence of names, as a tuple."""
    if value is None:
        return ()
    names = (value,) if isinstance(value, str) else value
    if not isinstance(names, Sequence) or not all(isinstance(n, str) and n for n in names):
        raise InvalidInputError(f"{name} must be names (strings), got {shown(value)}.")
    return tuple(names)


def check_version(kind: str, version: Any) -> None:
    """Refuse a config ``version`` that is not an integer, or newer than this tfcompress reads.

    Raises:
        InvalidInputError: The version is wrong, or says to upgrade tfcompress.

    Example:
        >>> check_version("qat", CONFIG_VERSION)
    """
    require_int("version", version, 1, 2**31 - 1, f"an integer 1 to {CONFIG_VERSION}")
    if version > CONFIG_VERSION:
        raise InvalidInputError(
            f"this {kind} config is version {version}, newer than this "
            f"tfcompress reads (up to {CONFIG_VERSION}): upgrade tfcompress to read it."
        )


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for a message about untrusted data.

    Example:
        >>> shown("x" * 100, 10)
        "'xxxxxx..."
    """
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def config_or_options(
    config: Any,
    cls: type[C],
    options: Mapping[str, Any],
    build: Callable[..., C],
    *,
    holds: str,
    example: str,
    put_it: str,
) -> C:
    """A verb's config: the one given, or the one its keyword options build, never both.

    Args:
        config: What the caller passed as ``config=`` (None: build it).
        cls: The config class the verb takes.
        options: The verb's keyword options, None where not given.
        build: Builds the config from the given options (``cls.from_options``).
        holds: What the config holds, for the message (``the artifact``).
        example: How to build one, for the message (``PTQConfig(recipe=...)``).
        put_it: Where else an option goes, for the message.

    Raises:
        InvalidInputError: ``config`` is not a ``cls``, or keyword options came with it.
    """
    given = {name: value for name, value in options.items() if value is not None}
    if config is None:
        return build(**given)
    if not isinstance(config, cls):
        raise InvalidInputError(
            f"config must be a tfcompress.{cls.__name__}, got {type(config).__name__}; build "
            f"one with {example} or pass the options as keywords."
        )
    if given:
        raise InvalidInputError(
            f"config= holds every option of {holds}: drop {', '.join(given)} (or put it in "
            f"the config: {put_it})."
        )
    return config


def check_option_names(
    options: Mapping[str, Any],
    typed: Any,
    *,
    taker: str,
    renamed: Mapping[str, str] | None = None,
) -> None:
    """Refuse a keyword option that the TypedDict ``typed`` does not declare, naming the valid.

    A TypeError too, as Python's own unexpected keyword is; a ``renamed`` key gets its advice.

    Raises:
        InvalidArgumentTypeError: ``"quantize takes no option 'x' (it takes a, b, ...)."``
    """
    known = typed.__required_keys__ | typed.__optional_keys__
    unknown = sorted((k for k in options if k not in known), key=str)
    for key in unknown:
        if renamed and key in renamed:
            raise InvalidArgumentTypeError(f"{taker} takes no option {key!r}: {renamed[key]}")
    if unknown:
        raise InvalidArgumentTypeError(
            f"{taker} takes no option {', '.join(map(shown, unknown))} (it takes "
            f"{', '.join(sorted(known))})."
        )


def checked_fields(
    cls: type,
    data: Any,
    *,
    what: str,
    taker: str,
    leave_out: tuple[str, ...] = (),
    also: tuple[str, ...] = (),
) -> dict[str, Any]:
    """``data`` as keyword arguments of the config ``cls``: a mapping of its fields only.

    One check and one pair of messages for every config's ``from_dict`` and
    ``from_options``, so a stray key reads the same whichever config refuses it.

    Args:
        cls: The config dataclass.
        data: What was read (JSON) or given (keywords).
        what: What a valid ``data`` is, for the message (``"a compress config"``).
        taker: Who refuses an unknown key (``"compress"``, ``"check_gate"``).
        leave_out: Fields that ``data`` may not set (``version`` for keywords).
        also: Keys ``data`` may hold beside the fields (compress's gate thresholds).

    Raises:
        InvalidInputError: ``data`` is not a mapping, or names a key ``cls`` has not.

    Example:
        >>> from tfcompress.compression.config import CompressConfig
        >>> checked_fields(CompressConfig, {"objective": "size"}, what="a compress config",
        ...                taker="compress")
        {'objective': 'size'}
    """
    if not isinstance(data, Mapping):
        raise InvalidInputError(f"{what} is a JSON object, not a {type(data).__name__}.")
    known = ({f.name for f in fields(cls)} - set(leave_out)) | set(also)
    unknown = sorted((k for k in data if k not in known), key=str)
    if unknown:
        raise InvalidInputError(
            f"{taker} takes no option {', '.join(map(shown, unknown))} (it takes "
            f"{', '.join(sorted(known))})."
        )
    return dict(data)
