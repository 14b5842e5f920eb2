"""TensorFlow Lite for Microcontrollers (the ``tflite-micro`` package), imported on first use.

The package ships TFLM's interpreter built for the host; tfcompress only ever calls it inside
a child process (:mod:`tfcompress.targets.mcu.probe`), because a too-small arena can
segfault it. It publishes nightly versions only, so the ``mcu`` extra pins one; when it is
missing, every caller gets one :class:`~tfcompress.errors.MissingDependencyError` whose
message is the one line to run.

Facts read from the installed package (0.dev20261023182759): the interpreter is
``tflite_micro.python.tflite_micro.runtime.Interpreter`` (``tflite_micro.runtime`` is an
alias); it allocates its tensors in the constructor and raises ``RuntimeError('TFLM failed
to allocate tensors')`` when it cannot; TFLM's own messages (``Didn't find op for builtin
opcode 'SIGN'``, ``Failed to resize buffer. Requested: ...``) and ``print_allocations()``
are written by C code to standard error, not through Python.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from tfcompress.errors import MissingDependencyError

#: The pinned distribution (setup.cfg's ``mcu`` extra) and the one line to run without it.
PACKAGE = "tflite-micro"
INSTALL_HINT = "pip install 'tfcompress[mcu]'"
_RUNTIME = "tflite_micro.python.tflite_micro.runtime"
_SCHEMA = "tflite_micro.tensorflow.lite.micro.python.schema_py_generated"


def installed() -> bool:
    """Whether ``tflite_micro`` can be imported (nothing is imported to find out).

    Example:
        >>> isinstance(installed(), bool)
        True
    """
    try:
        return importlib.util.find_spec("tflite_micro") is not None
    except (ImportError, ValueError):
        return False


def require() -> None:
    """Raise the one-line install hint unless ``tflite_micro`` can be imported.

    Raises:
        MissingDependencyError: ``tflite-micro`` is not installed.
    """
    if not installed():
        raise MissingDependencyError(_missing())


def _missing() -> str:
    return f"TensorFlow Lite for Microcontrollers ({PACKAGE}) is not installed; run: {INSTALL_HINT}"


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise MissingDependencyError(_missing()) from error


def tflm_runtime() -> ModuleType:
    """TFLM's Python runtime module (``Interpreter.from_bytes(model, arena_size=...)``).

    Raises:
        MissingDependencyError: ``tflite-micro`` is not installed.
    """
    return _import(_RUNTIME)


def tflm_schema() -> ModuleType:
    """The flatbuffer schema module ``tflite-micro`` ships (object API: ``ModelT``).

    Raises:
        MissingDependencyError: ``tflite-micro`` is not installed.
    """
    return _import(_SCHEMA)


def tflm_version() -> str | None:
    """The installed ``tflite-micro`` version, None when it is not installed.

    Read from the distribution's metadata, so nothing native is loaded.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(PACKAGE)
    except PackageNotFoundError:
        return None
