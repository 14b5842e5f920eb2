"""Lazy TensorFlow import: it takes seconds, so only code that needs it pays for it.

TensorFlow is not part of the base install (the ``tf`` extra adds it; the ``device`` install
runs ``.tflite`` files without it). Importing it, or a Keras or tfmot that needs it, where it
is missing raises :class:`~tfcompress.errors.MissingDependencyError` naming the install that
adds it: one line in the CLI (exit 2), never a ``ModuleNotFoundError`` from deep inside.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any

from tfcompress._compat.heap import settled_import
from tfcompress.errors import MissingDependencyError

#: The command that adds TensorFlow, tf-keras and tfmot to an install without them.
TF_INSTALL_HINT = "pip install 'tfcompress[tf]'"
#: Top-level packages the ``tf`` extra brings (Keras 3 comes with TensorFlow).
TF_PACKAGES = frozenset({"tensorflow", "keras", "tf_keras", "tensorflow_model_optimization"})


def tensorflow() -> ModuleType:
    """Import TensorFlow on first use and return the module.

    Raises:
        MissingDependencyError: TensorFlow is not installed (a device install).
    """
    return import_heavy("tensorflow")


def import_heavy(name: str) -> ModuleType:
    """Import ``name`` (TensorFlow, a Keras); right after a first import, settle the heap.

    The objects such an import leaves live as long as the process (``_compat/heap.py``).

    Raises:
        MissingDependencyError: ``name`` (or TensorFlow, which it needs) is not installed.
    """
    if name not in sys.modules:
        try:
            with settled_import():
                importlib.import_module(name)
        except ModuleNotFoundError as error:
            if not is_missing_tensorflow(error):
                raise
            raise missing_tensorflow(f"this step (it imports {name})") from error
    _autograph_leaves_no_bytecode()  # also where the caller imported TensorFlow first
    return sys.modules[name]


def _autograph_leaves_no_bytecode() -> None:
    """Autograph's modules write no bytecode (as Python's ``-B``): none is left in $TMPDIR.

    Autograph writes each function it converts to ``$TMPDIR`` as a module and imports it; it
    removes the source at exit, but Python has cached its bytecode beside it: a
    ``__pycache__`` left in the user's temporary folder by every command that traced a
    Keras model (``benchmark``, ``gate``, ``export-onnx``).
    """
    loader = sys.modules.get("tensorflow.python.autograph.pyct.loader")
    load = getattr(loader, "load_source", None)
    if load is None or getattr(load, "without_bytecode", False):
        return

    @functools.wraps(load)
    def load_source(*args: Any, **kwargs: Any) -> Any:
        before = sys.dont_write_bytecode
        sys.dont_write_bytecode = True
        try:
            return load(*args, **kwargs)
        finally:
            sys.dont_write_bytecode = before

    load_source.without_bytecode = True  # type: ignore[attr-defined]
    loader.load_source = load_source  # type: ignore[union-attr]


def has_tensorflow() -> bool:
    """Whether TensorFlow is installed, without importing it (a device install has none)."""
    return "tensorflow" in sys.modules or importlib.util.find_spec("tensorflow") is not None


def require_tensorflow(what: str) -> None:
    """Raise the one-line error of a device install when ``what`` needs TensorFlow.

    Checked where a command starts work that needs TensorFlow for sure (training, converting
    a Keras model), so that it fails before anything else happens rather than per attempt.

    Raises:
        MissingDependencyError: TensorFlow is not installed.
    """
    if not has_tensorflow():
        raise missing_tensorflow(what)


def is_missing_tensorflow(error: BaseException) -> bool:
    """Whether ``error`` says TensorFlow, a Keras or tfmot is not installed.

    Example:
        >>> is_missing_tensorflow(ModuleNotFoundError("no", name="tf_keras.models"))
        True
    """
    name = getattr(error, "name", None) or ""
    return isinstance(error, ModuleNotFoundError) and name.split(".")[0] in TF_PACKAGES


def missing_tensorflow(what: str) -> MissingDependencyError:
    """The error of a command that needs TensorFlow in an install without it.

    Example:
        >>> str(missing_tensorflow("reading a .keras model"))[:48]
        'reading a .keras model needs TensorFlow, which i'
    """
    return MissingDependencyError(
        f"{what} needs TensorFlow, which is not installed here (the device install runs "
        f".tflite files only); add it with: {TF_INSTALL_HINT}"
    )
