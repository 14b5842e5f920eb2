"""Public names of a package that load on first use (PEP 562), so importing it costs nothing.

A package ``__init__`` that imported its public names eagerly made every import of one of
its modules (``tfcompress.compression.candidates``) import the whole package, and with it
numpy, the converter and the runtimes. With :func:`lazy_exports` the package imports the
module that defines a name when the name is first read. Which module that is, the package
says once, in its ``if TYPE_CHECKING:`` imports: type checkers read them, and
:func:`declared_imports` reads them from the package's source (nothing is imported).

Example:
    >>> __getattr__, __dir__ = lazy_exports(__name__)  # a package's __init__  # doctest: +SKIP
"""

from __future__ import annotations

import ast
import importlib
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar


def lazy_exports(package: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` for its :func:`declared_imports`.

    The first read of a name imports its module and keeps the value in the package, so
    later reads are plain attribute lookups. A public name that is also a submodule's name
    (``compression.replay``, the function, in ``compression/replay.py``) stays the public
    name when the submodule is imported: the import system would otherwise set the
    package's attribute to the module.
    """
    names = declared_imports(package)
    sys.modules[package].__class__ = _Package
    _Package.exported[package] = frozenset(names)

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(names[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*names, *vars(sys.modules[package])})

    return __getattr__, __dir__


def declared_imports(package: str) -> dict[str, str]:
    """Name -> module of each ``from MODULE import name`` in ``package``'s ``if TYPE_CHECKING:``.

    Read from the package's source, so that declaration is the only list of its public
    names and their modules.
    """
    path = sys.modules[package].__file__  # the package, being imported
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))  # type: ignore[arg-type]
    return {
        alias.asname or alias.name: node.module or ""
        for block in tree.body
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


class _Package(types.ModuleType):
    """A package whose public names are not replaced by submodules of the same name."""

    exported: ClassVar[dict[str, frozenset[str]]] = {}  # package -> its public names

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and name in self.exported.get(self.__name__, ()):
            return
        super().__setattr__(name, value)
