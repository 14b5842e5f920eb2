"""One SavedModel load per TFLite converter, where TensorFlow's converter makes several.

``TFLiteConverter.from_saved_model`` loads the SavedModel to read its signatures, and then
every ``convert()`` of that converter loads the same folder again only to read the graph's
debug info (TensorFlow 2.21, ``tensorflow/lite/python/lite.py``). A load restores every
function and variable: about 0.1 s for the MNIST CNN and 2 s for MobileNetV2 on the CI's
2-core machine, two or three times per :func:`~tfcompress.quantize`.

:func:`loads_shared` hands a converter's later loads the object its first load made. The
scope is one converter: ``from_saved_model`` edits the object it loaded (it renames a
``model.export`` endpoint), so a second converter must load its own. Where TensorFlow's
converter module has no ``_load`` to hand over (another TensorFlow release), nothing changes
and every load happens as before.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

from tfcompress._compat.tf import tensorflow

Loads = dict[tuple[str, frozenset[str]], Any]

_SHARED: contextvars.ContextVar[Loads | None] = contextvars.ContextVar("tflite_loads", default=None)
_INSTALL = threading.Lock()
_installed: bool | None = None  # None: not tried yet; False: this TensorFlow has no _load


@contextlib.contextmanager
def loads_shared(loads: Loads) -> Iterator[None]:
    """Inside, a SavedModel the converter loaded before (recorded in ``loads``) is not loaded again.

    Args:
        loads: One dict per converter, empty when the converter is made; the loads it records
            live as long as the dict.
    """
    if not _install():
        yield
        return
    token = _SHARED.set(loads)
    try:
        yield
    finally:
        _SHARED.reset(token)


def _install() -> bool:
    """Put a sharing ``load`` in the converter module's place of TensorFlow's; False if none."""
    global _installed
    if _installed is not None:
        return _installed
    tensorflow()
    from tensorflow.lite.python import lite

    with _INSTALL:
        if _installed is None:
            original = getattr(lite, "_load", None)
            _installed = callable(original)
            if _installed:
                lite._load = _sharing(original)
    return _installed


def _sharing(original: Callable[..., Any]) -> Callable[..., Any]:
    """TensorFlow's ``load``, answered from the current converter's loads when it has one."""

    def load(export_dir: Any, tags: Any = None, options: Any = None) -> Any:
        loads = _SHARED.get()
        if loads is None:  # a conversion that is not tfcompress's, or outside one
            return original(export_dir, tags, options)
        key = (os.fspath(export_dir), frozenset(tags or ()))
        if key not in loads:
            loads[key] = original(export_dir, tags, options)
        return loads[key]

    return load
