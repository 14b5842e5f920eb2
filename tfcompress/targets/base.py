"""Deployment targets, found rather than listed: register, discover, look up.

A target is a :class:`~tfcompress.targets.contract.Target` subclass decorated with
:func:`register_target`: in a module of this package (found by the one discovery rule of
every registry, :data:`TARGETS`), in another installed package under the entry point group
``tfcompress.targets``, or registered by anything before the lookup (a test, a notebook;
docs/architecture.md, "Add a target"). Everything that depends on where an artifact goes
(``quantize``, ``compress``, ``select_model``, the CLI's ``--target``) reads the target
from here. Importing this module imports no TensorFlow; the first lookup imports the
built-in targets.

Example:
    >>> get_target("edgetpu").rules.static_batch
    1
    >>> list_targets()
    ['cpu', 'edgetpu', 'gpu', 'mcu']
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

from tfcompress._registry import Registry
from tfcompress.errors import InvalidInputError
from tfcompress.targets.contract import (
    BudgetField,
    RecipeRules,
    Target,
    TargetOption,
    TargetVerdict,
    Verdict,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "TARGETS",
    "BudgetField",
    "RecipeRules",
    "Target",
    "TargetOption",
    "TargetVerdict",
    "Verdict",
    "builtin_targets",
    "get_target",
    "list_targets",
    "register_target",
    "resolve_target",
    "verdict_keys",
    "verdict_under",
    "verdicts_by_key",
]

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "tfcompress.targets"
_PACKAGE = "tfcompress.targets"

#: Every target: a Target subclass with ``@register_target`` in a module of targets/.
TARGETS: Registry[Target] = Registry("target", "targets", "register_target")
_BROKEN: dict[str, str] = {}  # entry point name -> why it could not be loaded
_entry_points_loaded = False

T = TypeVar("T", bound="type[Target] | Target")


def register_target(target: T) -> T:
    """Make a target available by name to quantize, compress, select and the CLI.

    Use it as a class decorator (the class is instantiated once, with no arguments) or pass
    an instance. Registering a name again replaces the earlier target.

    Returns:
        What was given (so the decorator leaves the class as it was).

    Raises:
        InvalidInputError: Not a Target, or a Target without a name.

    Example:
        >>> @register_target  # doctest: +SKIP
        ... class Mcu(Target):
        ...     name = "mcu"
        ...     summary = "microcontrollers: full int8"
    """
    instance = target() if isinstance(target, type) and issubclass(target, Target) else target
    if not isinstance(instance, Target):
        raise InvalidInputError(f"register_target takes a Target subclass, not {target!r}.")
    if not instance.name or not isinstance(instance.name, str):
        raise InvalidInputError(f"{type(instance).__name__} has no name: set name = '...'.")
    TARGETS.register(instance.name, instance, replace=True)
    return target


def get_target(name: str) -> Target:
    """The registered target ``name``.

    Raises:
        InvalidInputError: No such target (the message lists the registered ones), or an
            installed package's target that failed to load (the message says why).
    """
    _discover()
    if isinstance(name, str) and name in _BROKEN and name not in TARGETS:
        raise InvalidInputError(f"target {name!r} could not be loaded: {_BROKEN[name]}")
    return TARGETS.get(name)


def list_targets() -> list[str]:
    """Names of every target: built in, installed and registered, sorted."""
    _discover()
    return TARGETS.names()


def builtin_targets() -> list[str]:
    """Names of the targets this package defines, sorted (the CLI's plain-data list)."""
    return [n for n in TARGETS if type(TARGETS.get(n)).__module__.startswith(_PACKAGE + ".")]


def resolve_target(name: str | None, **options: Any) -> Target | None:
    """The target ``name`` (None: no target), with its options checked before any work.

    Raises:
        InvalidInputError: An unknown target, or an option no target given takes
            (``--compiler`` without ``--target edgetpu``).
        BackendUnavailableError: An option the target refuses (see
            :meth:`Target.check_setup`).

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
    """JSON for a result: every checking target's key, filled for the target that checked.

    A report keeps the same keys whatever the target (``"edgetpu": null`` without one).

    Example:
        >>> verdicts_by_key(None, None)
        {'edgetpu': None, 'gpu': None, 'mcu': None}
    """
    keys: dict[str, Any] = dict.fromkeys(verdict_keys())
    if target is not None and verdict is not None:
        key = get_target(target).verdict_key
        if key is not None:
            keys[key] = verdict.to_dict()
    return keys


def verdict_keys() -> list[str]:
    """The JSON keys results file verdicts under: the names of the targets that check.

    Example:
        >>> verdict_keys()
        ['edgetpu', 'gpu', 'mcu']
    """
    return [t.verdict_key for t in map(get_target, list_targets()) if t.verdict_key]


def verdict_under(target: str | None, verdict: Any, key: str) -> Any:
    """``verdict`` when ``target`` files its verdicts under ``key``, else None.

    Example:
        >>> verdict_under("cpu", None, "edgetpu") is None
        True
    """
    return None if target is None or get_target(target).verdict_key != key else verdict


class _NoTarget(Target):
    """No target: a recipe as it is (takes no options; not registered)."""

    name = "none"
    summary = "no target: a recipe as it is"


_NO_TARGET = _NoTarget()


# -- installed packages' targets -------------------------------------------------------------


def _discover() -> None:
    """The package's targets (:data:`TARGETS`), then the installed packages' entry points."""
    global _entry_points_loaded
    TARGETS.discover()
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for name, load in _entry_points():
        if name in builtin_targets():
            logger.warning("entry point target %r ignored: a built-in target has that name", name)
            continue
        try:
            loaded = load()
            is_class = isinstance(loaded, type) and issubclass(loaded, Target)
            if not (isinstance(loaded, Target) or is_class):
                raise InvalidInputError(f"it names {loaded!r}, not a Target subclass")
            if name not in TARGETS.loaded():  # its module may have registered it already
                register_target(loaded)
        except Exception as error:  # a broken plugin must not break every other target
            _BROKEN[name] = f"{type(error).__name__}: {error}"
            logger.warning("target %r (entry point) could not be loaded: %s", name, error)


def _entry_points() -> list[tuple[str, Any]]:
    """(name, load) of each installed ``tfcompress.targets`` entry point."""
    from importlib.metadata import entry_points

    return [(ep.name, ep.load) for ep in entry_points(group=ENTRY_POINT_GROUP)]
