"""What built-in plug-ins declare, read from their source, not imported; and where they are.

Every registry (:class:`tfcompress._registry.Registry`: targets, runtime backends, PTQ
methods, metrics, recipes, compress handlers, zoo models) finds its plug-ins by one rule,
:func:`plugin_modules`: the modules of its folder with a line that starts with its decorator
(``@register_backend("name")``). The decorator is the registration. Importing the plug-ins
costs numpy and a good part of the library (0.2-0.4 s on two cores): too much for ``--help``.
The parser only needs what they *declare* (a backend's name and flags; a target's name, its
option and budget flags; a method's name and order; a metric's name and gate threshold; a
recipe's name), and those are literals, so this module reads them with :mod:`ast` (about
30 ms). Adding a plug-in therefore edits nothing here.

The declarations must be literals (strings, numbers, ``str``/``int``/``float``, tuples of
``TargetOption``, ``BudgetField`` or ``BackendFlag`` calls, a ``ThresholdDef`` call);
``tests/test_cli_help.py`` compares what this module reads with the imported registries, so
a declaration it cannot read fails a test, naming the class, never a user.
"""

from __future__ import annotations

import ast
import builtins
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_PACKAGE = Path(__file__).resolve().parent  # tfcompress/
_TYPES = {"str": str, "int": int, "float": float}
_OPTION_FIELDS = ("name", "flag", "help", "type", "metavar")
_BUDGET_FIELDS = ("name", "flag", "label", "help", "measure", "type")
_FLAG_FIELDS = ("option", "flag", "help", "value", "metavar")
_THRESHOLD_FIELDS = ("name", "meaning", "default", "low", "high", "metavar", "suite_default")


@dataclass(frozen=True)
class DeclaredTarget:
    """A built-in target as its class declares it.

    Attributes:
        name: Its registered name.
        options: ``(name, flag, help, type, metavar)`` of each option its check takes.
        budgets: ``(name, flag, help, type)`` of each budget it adds to selection.
    """

    name: str
    options: tuple[tuple[str, str, str, type, str | None], ...]
    budgets: tuple[tuple[str, str, str, type], ...]


@dataclass(frozen=True)
class DeclaredBackend:
    """A built-in runtime backend as its runner class declares it.

    Attributes:
        name: Its registered name (``@register_backend("cpu")``).
        flags: ``(option, flag, help, value, metavar)`` of each ``tfcompress benchmark`` flag
            it declares (:class:`~tfcompress.runtime.base.BackendFlag`).
    """

    name: str
    flags: tuple[tuple[str, str, str, Any, str | None], ...]


class DeclarationError(Exception):
    """A registered class whose declaration is not a literal (a bug in tfcompress)."""


@functools.cache
def declared_targets() -> tuple[DeclaredTarget, ...]:
    """Every ``@register_target`` class under ``tfcompress/targets/``, sorted by name."""
    return targets_in(_PACKAGE / "targets")


def targets_in(root: Path) -> tuple[DeclaredTarget, ...]:
    """Every ``@register_target`` class in the ``.py`` files under ``root``, sorted by name.

    Raises:
        DeclarationError: A registered class whose name, options or budgets are not literals.
    """
    found = [_target(node, path) for path, node in _registered(root, "register_target")]
    return tuple(sorted(found, key=lambda t: t.name))


@functools.cache
def declared_backends() -> tuple[DeclaredBackend, ...]:
    """Every ``@register_backend(NAME)`` class under ``tfcompress/runtime/``, sorted by name."""
    found = []
    for path, node in _registered(_PACKAGE / "runtime", "register_backend"):
        decorator = _decorator(node, "register_backend", path)
        body = _class_constants(node, path)
        flags = tuple(
            (f["option"], f["flag"], f["help"], f.get("value"), f.get("metavar"))
            for f in _calls(body.get("flags", ()), "BackendFlag", _FLAG_FIELDS, node, path)
        )
        found.append(DeclaredBackend(_literal(decorator.args[0], "backend", node, path), flags))
    return tuple(sorted(found, key=lambda b: b.name))


@functools.cache
def declared_methods() -> tuple[str, ...]:
    """Every ``@register_method`` class's name, in the registry's order (``order``, name)."""
    rows = []
    for path, node in _registered(_PACKAGE / "quantization" / "methods", "register_method"):
        body = _class_constants(node, path)
        # The registry applies weight rewrites before range edits, each stage by order.
        stage = 0 if "WeightMethod" in _ancestors(node, path) else 1
        name = _required(body, "name", node, path)
        rows.append((stage, _required(body, "order", node, path), name))
    return tuple(name for *_, name in sorted(rows))


@functools.cache
def declared_metrics() -> tuple[str, ...]:
    """The metric names :func:`tfcompress.bench.metrics.metric_names` gives, read from source.

    ``accuracy`` and ``top5`` first (``topN`` for any N), then every
    ``@register_metric`` under ``tfcompress/bench/``: those judged on their drop (no
    threshold of their own) before those with one, each group in file order.
    """
    rows = _metric_rows()
    names = [n for n, t in rows if t is None] + [n for n, t in rows if t is not None]
    return ("accuracy", "top5", *(n for n in names if n != "accuracy"))


@functools.cache
def declared_thresholds() -> tuple[tuple[str, dict[str, Any]], ...]:
    """(metric, the keywords of its ``threshold=ThresholdDef(...)``) of each metric with one."""
    return tuple((name, t) for name, t in _metric_rows() if t is not None)


@functools.cache
def _metric_rows() -> tuple[tuple[str, dict[str, Any] | None], ...]:
    rows = []
    for path, node in _registered(_PACKAGE / "bench", "register_metric"):
        call = _decorator(node, "register_metric", path)
        given = {k.arg: k.value for k in call.keywords if k.arg}
        threshold = None
        if "threshold" in given:
            declared = ast.Tuple([given["threshold"]])
            (threshold,) = _calls(declared, "ThresholdDef", _THRESHOLD_FIELDS, node, path)
        rows.append((_literal(call.args[0], "metric", node, path), threshold))
    return tuple(rows)


@functools.cache
def declared_recipes() -> tuple[str, ...]:
    """Every ``@register_recipe(NAME)`` under ``tfcompress/quantization/``, in registry order.

    As :func:`tfcompress.quantization.recipes.list_recipes` orders them: ``recipes.py``'s own
    first (it registers them on import), then the other files' in path order. Read with a
    pattern, not parsed: the name is the decorator's first argument, a string literal.
    """
    found = _marked(_PACKAGE / "quantization", "register_recipe")
    found.sort(key=lambda item: item[0].name != "recipes.py")  # stable: file order kept
    names = []
    for path, text in found:
        calls = re.findall(r"^@register_recipe\b(\(\s*[\"']([^\"']+)[\"'])?", text, re.MULTILINE)
        if not all(name for _, name in calls):
            raise DeclarationError(f"{path}: a recipe is registered without a literal name")
        names += [name for _, name in calls]
    return tuple(names)


def plugin_modules(folder: str, decorator: str) -> tuple[str, ...]:
    """The discovery rule of every registry: modules of a folder that use its decorator.

    Those under ``tfcompress/FOLDER`` with a line that starts with ``@DECORATOR``.

    Example:
        >>> plugin_modules("runtime", "register_backend")[:2]
        ('tfcompress.runtime.compiled_model', 'tfcompress.runtime.edgetpu')
    """
    return tuple(
        ".".join(("tfcompress", *path.relative_to(_PACKAGE).with_suffix("").parts))
        for path, _ in _marked(_PACKAGE / folder, decorator)
    )


def _marked(root: Path, decorator: str) -> list[tuple[Path, str]]:
    """(file, text) of every ``.py`` file under ``root`` with a line starting ``@decorator``."""
    marker = re.compile(rf"^@{decorator}\b", re.MULTILINE)
    texts = ((path, path.read_text(encoding="utf-8")) for path in sorted(root.rglob("*.py")))
    return [(path, text) for path, text in texts if marker.search(text)]


def _decorator(node: ast.ClassDef | ast.FunctionDef, name: str, path: Path) -> ast.Call:
    (decorator,) = [d for d in node.decorator_list if _decorator_name(d) == name]
    if not (isinstance(decorator, ast.Call) and decorator.args):
        raise DeclarationError(f"{path}: {node.name} is registered without a name")
    return decorator


def _registered(root: Path, decorator: str) -> list[tuple[Path, Any]]:
    """(file, class or function) of everything decorated with ``decorator`` in ``root``."""
    return [
        (path, node)
        for path, text in _marked(root, decorator)  # most files: no parse
        for node in ast.parse(text, filename=str(path)).body
        if isinstance(node, ast.ClassDef | ast.FunctionDef)
        and any(_decorator_name(d) == decorator for d in node.decorator_list)
    ]


def _ancestors(node: ast.ClassDef, path: Path) -> set[str]:
    """The base class names of ``node``, following bases defined in the same file."""
    classes = {
        c.name: c
        for c in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(c, ast.ClassDef)
    }
    seen: set[str] = set()
    todo = [_decorator_name(b) for b in node.bases]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += [_decorator_name(b) for b in getattr(classes.get(name), "bases", [])]
    return seen


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _target(node: ast.ClassDef, path: Path) -> DeclaredTarget:
    body = _class_constants(node, path)
    options = tuple(
        (o["name"], o["flag"], o["help"], o.get("type", str), o.get("metavar"))
        for o in _calls(body.get("options", ()), "TargetOption", _OPTION_FIELDS, node, path)
    )
    budgets = tuple(
        (b["name"], b["flag"], b["help"], b.get("type", float))
        for b in _calls(body.get("budget_fields", ()), "BudgetField", _BUDGET_FIELDS, node, path)
    )
    return DeclaredTarget(_required(body, "name", node, path), options, budgets)


def _class_constants(node: ast.ClassDef, path: Path) -> dict[str, Any]:
    """The class body's ``name = <literal>`` assignments (calls kept as ast nodes)."""
    values: dict[str, Any] = {}
    for statement in node.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, value = statement.targets[0], statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            target, value = statement.target, statement.value
        else:
            continue
        if isinstance(target, ast.Name):
            values[target.id] = value
    return {
        k: (v if isinstance(v, ast.Tuple | ast.List) else _literal(v, k, node, path))
        for k, v in values.items()
        if k in {"name", "order", "options", "budget_fields", "flags"}
    }


def _calls(
    value: Any, factory: str, fields: tuple[str, ...], node: ast.ClassDef, path: Path
) -> list[dict[str, Any]]:
    """The keyword values of each ``factory(...)`` call in a tuple declaration."""
    if value == ():
        return []
    calls = []
    for item in value.elts:
        if not (isinstance(item, ast.Call) and _decorator_name(item) == factory):
            raise DeclarationError(f"{path}: {node.name} declares a non-{factory} entry")
        given = dict(zip(fields, item.args, strict=False))
        given.update({k.arg: k.value for k in item.keywords if k.arg})
        calls.append({k: _literal(v, k, node, path) for k, v in given.items() if k != "measure"})
    return calls


def _literal(value: ast.expr, what: str, node: ast.ClassDef, path: Path) -> Any:
    if isinstance(value, ast.Name) and value.id in _TYPES:
        return getattr(builtins, value.id)
    try:
        return ast.literal_eval(value)
    except ValueError:
        raise DeclarationError(
            f"{path}: {node.name}.{what} is not a literal; the CLI reads it from the source"
        ) from None


def _required(body: dict[str, Any], key: str, node: ast.ClassDef, path: Path) -> Any:
    if key not in body:
        raise DeclarationError(f"{path}: {node.name} declares no {key} in its class body")
    return body[key]
