"""One registry type for everything tfcompress finds by name.

Targets, runtime backends, PTQ methods, metrics, recipes, compress handlers and zoo models
are each a :class:`Registry`: a decorator next to the definition registers it, the registry
finds the modules that hold one by the one rule of
:func:`tfcompress._declared.plugin_modules` (the modules of its folder with a line that
starts with the decorator) and imports them on the first question, and an unknown name is
one :class:`~tfcompress.errors.UnknownNameError` that lists the registered names. Tests and
notebooks add and remove entries with :meth:`Registry.register`,
:meth:`Registry.unregister`, :meth:`Registry.registered` or as a mapping
(``monkeypatch.setitem(BACKENDS, "mine", MyRunner)``), never a private dict.

Pure Python (no numpy): importing this module imports nothing of the library but the errors.

Example:
    >>> colours = Registry("colour")
    >>> colours.register("red", 0xFF0000)
    16711680
    >>> colours.get("blue")
    Traceback (most recent call last):
    ...
    tfcompress.errors.UnknownNameError: unknown colour 'blue'; choose one of red.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from tfcompress.errors import UnknownNameError

__all__ = ["Registry"]

T = TypeVar("T")
_MISSING = object()


class Registry(Generic[T]):
    """Names -> entries of one kind, discovered from one folder of the package.

    Args:
        kind: What an entry is, for messages (``"backend"``, ``"zoo model"``).
        folder: The folder under ``tfcompress/`` whose modules register entries
            (``"runtime"``); None: nothing to discover.
        decorator: The decorator that registers one (``"register_backend"``).
        ordered: :meth:`names` in registration order (recipes) instead of sorted.
        hint: Appended to the unknown-name message (names the registry cannot list).
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
        self._discovered = True  # set first: a module that asks the registry does not recurse
        from tfcompress._declared import plugin_modules

        try:
            for module in plugin_modules(str(self.folder), str(self.decorator)):
                importlib.import_module(module)
        except BaseException:
            self._discovered = False
            raise

    def rediscover(self) -> None:
        """Scan the folder again on the next question (a module added since)."""
        self._discovered = self.folder is None

    def register(self, name: str, entry: T, *, replace: bool = False) -> T:
        """Add ``entry`` under ``name``; returns it.

        Raises:
            ValueError: No name, or the name is taken and ``replace`` is False.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} needs a name, got {name!r}")
        if not replace and self._entries.get(name, entry) is not entry:
            raise ValueError(f"{self.kind} {name!r} is registered already; pick another name")
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> None:
        """Remove ``name`` (nothing happens when it is not registered)."""
        self._entries.pop(name, None)

    @contextmanager
    def registered(self, name: str, entry: T) -> Iterator[T]:
        """``entry`` registered as ``name`` inside the ``with`` block, as it was after it."""
        self.discover()
        previous = self._entries.get(name, _MISSING)
        self.register(name, entry, replace=True)
        try:
            yield entry
        finally:
            if previous is _MISSING:
                self.unregister(name)
            else:
                self._entries[name] = previous  # type: ignore[assignment]

    def get(self, name: str, default: Any = _MISSING) -> T:
        """The entry ``name`` (``default`` when given and there is none).

        Raises:
            UnknownNameError: No such entry; the message lists the registered names (and the
                close ones first).
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

    # The mapping protocol, so ``monkeypatch.setitem(REGISTRY, name, entry)`` works in tests.
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

    def __len__(self) -> int:
        return len(self.names())
