"""Lazy TensorFlow import: it takes seconds, so only code that needs it pays for it."""

from __future__ import annotations

import importlib
from types import ModuleType


def tensorflow() -> ModuleType:
    """Import TensorFlow on first use and return the module.

    Example:
        >>> tf = tensorflow()  # doctest: +SKIP
    """
    return importlib.import_module("tensorflow")
