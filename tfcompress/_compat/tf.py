"""Lazy TensorFlow import, and a switch that keeps native (C++) log noise off the terminal."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterator
from types import ModuleType

_quiet = False


def set_native_quiet(quiet: bool) -> None:
    """Hide TensorFlow/LiteRT C++ log lines while tfcompress converts or loads models.

    Only the CLI turns this on: a library must not touch the process's file descriptors
    unless asked. Python exceptions are unaffected, so no error is ever hidden.

    Args:
        quiet: True to silence native stderr output inside :func:`native_quiet` blocks.
    """
    global _quiet
    _quiet = quiet
    if quiet:
        # Must be set before TensorFlow is imported to have any effect.
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@contextlib.contextmanager
def native_quiet() -> Iterator[None]:
    """Redirect file descriptor 2 to /dev/null for the block when quiet mode is on."""
    if not _quiet:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def tensorflow() -> ModuleType:
    """Import TensorFlow on first use (it takes seconds and prints native noise)."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    with native_quiet():
        return importlib.import_module("tensorflow")
