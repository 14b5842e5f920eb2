"""The command-line flags that tfcompress's error messages advise, and which commands can say them.

An error that advises a flag (``pass --unsafe``) must name one the command has. Read from
the source, not from runs: every call of an exception class (``raise XError(...)`` or
``return XError(...)``) whose message holds ``--flag``, in every module of the package; a
command can say it when the module is among those its CLI module imports, directly or
through function-level imports and the lazy names of ``tfcompress/__init__.py``.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tfcompress"
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]")


@dataclass(frozen=True)
class AdvisedFlag:
    """A flag named in an error message, and where."""

    flag: str
    module: str  # tfcompress.models.keras_safety
    line: int

    @property
    def where(self) -> str:
        return f"{self.module.replace('.', '/')}.py:{self.line}"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _modules() -> dict[str, ast.Module]:
    return {
        module_name(path): ast.parse(path.read_text(), str(path))
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def advised_flags() -> list[AdvisedFlag]:
    """Every ``--flag`` in the message of an exception created anywhere in the package."""
    found = []
    for module, tree in _modules().items():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and _exception_class(node.func)):
                continue
            for argument in node.args:
                for text in _strings(argument):
                    found += [AdvisedFlag(f, module, node.lineno) for f in FLAG.findall(text)]
    return found


def _exception_class(func: ast.expr) -> bool:
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
    return name.endswith(("Error", "Exception"))


def _strings(node: ast.AST) -> list[str]:
    return [
        part.value
        for part in ast.walk(node)
        if isinstance(part, ast.Constant) and isinstance(part.value, str)
    ]


def reachable(start: str) -> set[str]:
    """The package modules ``start`` can import, directly or not (lazy names included)."""
    modules = _modules()
    lazy = _lazy_names(modules["tfcompress"])
    seen: set[str] = set()
    stack = [start]
    while stack:
        current = stack.pop()
        if current in seen or current not in modules:
            continue
        seen.add(current)
        stack += _imports(current, modules[current], modules, lazy)
    return seen


def _imports(
    name: str, tree: ast.Module, modules: dict[str, ast.Module], lazy: dict[str, str]
) -> list[str]:
    """The modules whose code ``name`` can run: each imported name's defining module."""
    found = []
    package = name if _is_package(name) else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found += [_defining(base, alias.name, modules) for alias in node.names]
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "tfcompress"  # tfcompress.benchmark(...): a lazy name
            and node.attr in lazy
        ):
            found.append(_defining(lazy[node.attr], node.attr, modules))
    return [f for f in found if f in modules]


def _defining(package: str, name: str, modules: dict[str, ast.Module]) -> str:
    """The module that defines ``name`` imported from ``package`` (a re-export followed)."""
    if f"{package}.{name}" in modules:
        return f"{package}.{name}"
    tree = modules.get(package)
    if tree is not None and _is_package(package):
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names):
                base = node.module or ""
                if node.level:
                    base = f"{package}.{base}" if base else package
                return _defining(base, name, modules) if base != package else package
    return package


def _is_package(name: str) -> bool:
    return (PACKAGE.parent / name.replace(".", "/") / "__init__.py").exists()


def _lazy_names(tree: ast.Module) -> dict[str, str]:
    import tfcompress  # its _LAZY is read from its TYPE_CHECKING imports (nothing heavy)

    return dict(tfcompress._LAZY)
