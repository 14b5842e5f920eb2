"""Lazy TensorFlow import: it takes seconds, so only code that needs it pays for it."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

from tfcompress._compat.heap import settle_after_import


def tensorflow() -> ModuleType:
    """Import TensorFlow on first use and return the module.

    Example:
        >>> tf = tensorflow()  # doctest: +SKIP
    """
    return import_heavy("tensorflow")


def import_heavy(name: str) -> ModuleType:
    """Import ``name`` (TensorFlow, a Keras); right after a first import, settle the heap.

    The objects such an import leaves live as long as the process (``_compat/heap.py``).

    Example:
        >>> keras = import_heavy("keras")  # doctest: +SKIP
    """
    if name in sys.modules:
        return sys.modules[name]
    module = importlib.import_module(name)
    settle_after_import()
    return module
