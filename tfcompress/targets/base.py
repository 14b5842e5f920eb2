"""Deployment targets, found rather than listed: register, discover, look up.

A target is a :class:`~tfcompress.targets.contract.Target` subclass decorated with
:func:`register_target`, in one of three places:

- a module of this package (``targets/cpu.py``) or a folder with a ``target.py``
  (``targets/edgetpu/target.py``): found by scanning the package, no list to edit;
- another installed package that names it under the entry point group
  ``tfcompress.targets`` (``mcu = my_package.targets:Mcu``);
- anything that calls :func:`register_target` before the lookup (a test, a notebook).

Everything that depends on where an artifact goes reads the target from here:
``quantize(target=)`` applies its recipe rules and runs its check, ``compress(target=)``
keeps the rungs it admits, gates on its gate backend, times on its latency backend and ranks
with its rank, ``select_model`` measures on its latency backend and applies its budget
fields, and the CLI makes ``--target`` choices and flags of the declarations
(``tests/test_targets.py`` runs every target through the same contract,
``tests/test_target_template.py`` adds one in a single file).

Importing this module imports no TensorFlow; the first lookup imports the built-in targets.

Example:
    >>> get_target("edgetpu").rules.static_batch
    1
    >>> list_targets()
    ['cpu', 'edgetpu', 'gpu', 'mcu']
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from pathlib import Path
from typing import Any, TypeVar

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
_NOT_TARGETS = {"base", "contract"}  # this package's modules that define no target

_TARGETS: dict[str, Target] = {}
_BUILTIN: set[str] = set()  # names registered by a module of this package
_BROKEN: dict[str, str] = {}  # entry point name -> why it could not be loaded
_discovered = False

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
    _TARGETS[instance.name] = instance
    if type(instance).__module__.startswith(_PACKAGE + "."):
        _BUILTIN.add(instance.name)
    return target


def get_target(name: str) -> Target:
    """The registered target ``name``.

    Raises:
        InvalidInputError: No such target (the message lists the registered ones), or an
            installed package's target that failed to load (the message says why).
    """
    _discover()
    if isinstance(name, str) and name in _TARGETS:
        return _TARGETS[name]
    if isinstance(name, str) and name in _BROKEN:
        raise InvalidInputError(f"target {name!r} could not be loaded: {_BROKEN[name]}")
    raise InvalidInputError(f"unknown target {name!r}; choose one of {', '.join(list_targets())}.")


def list_targets() -> list[str]:
    """Names of every target: built in, installed and registered, sorted."""
    _discover()
    return sorted(_TARGETS)


def builtin_targets() -> list[str]:
    """Names of the targets this package defines, sorted (the CLI's plain-data list)."""
    _discover()
    return sorted(_BUILTIN)


def registered_targets() -> dict[str, Target]:
    """The targets registered so far, without discovering any (the CLI's cheap look)."""
    return dict(_TARGETS)


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
    if target is None or get_target(target).verdict_key != key:
        return None
    return verdict


class _NoTarget(Target):
    """No target: a recipe as it is (takes no options; not registered)."""

    name = "none"
    summary = "no target: a recipe as it is"


_NO_TARGET = _NoTarget()


# -- discovery ------------------------------------------------------------------------------


def builtin_modules() -> list[str]:
    """The modules of this package that may define a target, found by listing it.

    A module ``targets/NAME.py`` or a folder ``targets/NAME/`` with a ``target.py``
    (``targets/onnx/``, a transform with no target.py, is not one). Nothing is imported.

    Example:
        >>> builtin_modules()  # doctest: +NORMALIZE_WHITESPACE
        ['tfcompress.targets.cpu', 'tfcompress.targets.edgetpu.target',
         'tfcompress.targets.gpu.target', 'tfcompress.targets.mcu.target']
    """
    here = Path(__file__).parent
    found = []
    for info in pkgutil.iter_modules([str(here)]):
        if info.name.startswith("_") or info.name in _NOT_TARGETS:
            continue
        if not info.ispkg:
            found.append(f"{_PACKAGE}.{info.name}")
        elif (here / info.name / "target.py").is_file():
            found.append(f"{_PACKAGE}.{info.name}.target")
    return sorted(found)


def _discover() -> None:
    """Import the package's target modules and load the installed packages' entry points."""
    global _discovered
    if _discovered:
        return
    _discovered = True  # set first: a target module that looks targets up does not recurse
    try:
        for module in builtin_modules():
            importlib.import_module(module)  # each registers its targets on import
    except BaseException:
        _discovered = False
        raise
    for name, load in _entry_points():
        if name in _BUILTIN:
            logger.warning("entry point target %r ignored: a built-in target has that name", name)
            continue
        try:
            loaded = load()
            if not (isinstance(loaded, Target) or _is_target_class(loaded)):
                raise InvalidInputError(f"it names {loaded!r}, not a Target subclass")
            if name not in _TARGETS:  # its module may have registered it already
                register_target(loaded)
        except Exception as error:  # a broken plugin must not break every other target
            _BROKEN[name] = f"{type(error).__name__}: {error}"
            logger.warning("target %r (entry point) could not be loaded: %s", name, error)


def _is_target_class(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, Target)


def _entry_points() -> list[tuple[str, Any]]:
    """(name, load) of each installed ``tfcompress.targets`` entry point."""
    from importlib.metadata import entry_points

    return [(ep.name, ep.load) for ep in entry_points(group=ENTRY_POINT_GROUP)]


def _rediscover() -> None:
    """Forget what discovery found, so the next lookup scans again (tests, new installs)."""
    global _discovered
    _discovered = False
    _BROKEN.clear()
