"""One registry type for everything tfcompress finds by name.

Targets, runtime backends, PTQ methods, metrics, recipes, compress handlers and zoo models are
each a :class:`Registry`. A decorator next to the definition registers it; the registry
imports, on its first question, the modules of its folder that use the decorator (the one
rule of :func:`tfcompress._declared.plugin_modules`); an unknown name is one
:class:`~tfcompress.errors.UnknownNameError` listing the registered ones. Tests add and remove
entries with :meth:`Registry.register` and :meth:`Registry.unregister`, or as a mapping
(``monkeypatch.setitem(BACKENDS, "mine", MyRunner)``), never through a private dict.
Pure Python: importing it imports nothing of the library but the errors.

Example:
    >>> colours = Registry("colour")
    >>> colours.register("red", 0xFF0000)
    16711680
    >>> colours.get("rad")
    Traceback (most recent call last):
    ...
    tfcompress.errors.UnknownNameError: unknown colour 'rad'; choose one of red; did you mean red?
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from tfcompress.errors import UnknownNameError

__all__ = ["Registry"]

T = TypeVar("T")
_MISSING: Any = object()


class Registry(Generic[T]):
    """Names -> entries of one kind, discovered in one folder of the package.

    Args:
        kind: What an entry is, for messages (``"backend"``, ``"zoo model"``).
        folder: The folder under ``tfcompress/`` whose modules register entries; None: none.
        decorator: The decorator that registers one (``"register_backend"``).
        ordered: :meth:`names` in registration order (recipes) instead of sorted.
        hint: Appended to the unknown-name message (names it cannot list: ``topK``).
    """

    def __init__(
        self,
        kind: str,
        folder: str | None = None,
        decorator: str | None = None,
        *,
        ordered: bool = False,
        hint: str = "",
    ) -> None:
        self.kind, self.folder, self.decorator = kind, folder, decorator
        self.ordered, self.hint = ordered, hint
        self._entries: dict[str, T] = {}
        self._discovered = folder is None

    def discover(self) -> None:
        """Import every module of the folder that registers an entry (once)."""
        if self._discovered:
            return
        self._discovered = True  # first: a module that asks the registry does not recurse
        from tfcompress._declared import plugin_modules

        try:
            for module in plugin_modules(str(self.folder), str(self.decorator)):
                importlib.import_module(module)
        except BaseException:
            self._discovered = False
            raise

    def register(self, name: str, entry: T, *, replace: bool = False) -> T:
        """Add ``entry`` as ``name`` and return it (ValueError: no name, or a taken one)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} needs a name, got {name!r}")
        if not replace and self._entries.get(name, entry) is not entry:
            raise ValueError(f"{self.kind} {name!r} is registered already; pick another name")
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> None:
        """Remove ``name`` (nothing happens when it is not registered)."""
        self._entries.pop(name, None)

    def get(self, name: str, default: Any = _MISSING) -> T:
        """The entry ``name`` (``default`` when given and there is none).

        Raises:
            UnknownNameError: No such entry; the message lists the registered names.
        """
        self.discover()
        if isinstance(name, str) and name in self._entries:
            return self._entries[name]
        if default is not _MISSING:
            return default
        import difflib

        close = difflib.get_close_matches(str(name), self.names(), n=3, cutoff=0.6)
        guess = f"; did you mean {', '.join(close)}?" if close else "."
        raise UnknownNameError(
            f"unknown {self.kind} {name!r}; choose one of {', '.join(self.names())}"
            f"{self.hint}{guess}"
        )

    def names(self) -> list[str]:
        """Every registered name, sorted (or in registration order when ``ordered``)."""
        self.discover()
        return list(self._entries) if self.ordered else sorted(self._entries)

    def loaded(self) -> dict[str, T]:
        """The entries registered so far, without discovering any (the CLI's cheap look)."""
        return dict(self._entries)

    # The mapping protocol: ``monkeypatch.setitem(REGISTRY, name, entry)`` in tests.
    __getitem__ = get

    def __setitem__(self, name: str, entry: T) -> None:
        self.register(name, entry, replace=True)

    def __delitem__(self, name: str) -> None:
        self.unregister(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, name: object) -> bool:
        self.discover()
        return name in self._entries
