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
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    module = importlib.import_module("tensorflow")
    settle_after_import()  # its import's objects live as long as the process
    return module
