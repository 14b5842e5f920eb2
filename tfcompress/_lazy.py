"""Public names of a package that load on first use (PEP 562), so importing it costs nothing.

A package ``__init__`` that imported its public names eagerly made every import of one of
its modules (``tfcompress.compression.candidates``) import the whole package, and with it
numpy, the converter and the runtimes. With :func:`lazy_exports` the package maps each name
to the module that defines it and imports that module when the name is first read.

Example:
    >>> _LAZY = {"compress": "tfcompress.compression.api"}  # in a package's __init__.py
    >>> __getattr__, __dir__ = lazy_exports(__name__, _LAZY)  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any, ClassVar


def lazy_exports(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` for ``names`` (public name -> module).

    The first read of a name imports its module and keeps the value in the package, so
    later reads are plain attribute lookups. A public name that is also a submodule's name
    (``compression.replay``, the function, in ``compression/replay.py``) stays the public
    name when the submodule is imported: the import system would otherwise set the
    package's attribute to the module.
    """
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


class _Package(types.ModuleType):
    """A package whose public names are not replaced by submodules of the same name."""

    exported: ClassVar[dict[str, frozenset[str]]] = {}  # package -> its public names

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and name in self.exported.get(self.__name__, ()):
            return
        super().__setattr__(name, value)
