"""ONNX, ONNX Runtime and tf2onnx, imported on first use with an install hint when missing.

numpy 2 and tf2onnx 1.17: the only numpy-1 name tf2onnx 1.17 still uses is ``np.product``
(removed in numpy 2.0), on its ``large_model=True`` path (weights as external data, for
graphs over protobuf's 2 GB). tfcompress never takes that path: an export over 2 GB is
refused (:func:`tfcompress.targets.onnx.export_onnx`), so no shim is installed and numpy is
never patched. Checked with numpy 2.4 and tf2onnx 1.17.0: every other path tfcompress uses
converts without one. Should a later numpy/tf2onnx pair need a shim, it belongs here and
nowhere else.

The libraries' habits are kept in here too: tf2onnx logs every op it cannot convert (with
a traceback) through the ``tf2onnx`` logger, and ONNX Runtime's quantizer logs through the
root logger and prints histogram progress with ``print``. :func:`quiet_onnx_tools` routes
all of that to tfcompress's debug log, so a library call stays quiet and a CLI error stays
one line.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from types import ModuleType

from tfcompress._compat.tf import tensorflow
from tfcompress.errors import MissingDependencyError

logger = logging.getLogger(__name__)

_HINT = "pip install 'tfcompress[onnx]'"
#: Where the float16 converter comes from, in order of preference: ONNX Runtime ships a
#: maintained copy of onnxconverter-common's converter; the package itself is the fallback.
FLOAT16_CONVERTERS = ("onnxruntime.transformers.float16", "onnxconverter_common.float16")


def _require(name: str) -> ModuleType:
    if name.startswith("onnxruntime.") and "onnxruntime" not in sys.modules:
        onnxruntime_module()  # its import leaves a file in $TMPDIR unless it is ours
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise MissingDependencyError(
            f"{name.split('.')[0]} is not installed; {_HINT} (installs onnx, onnxruntime and "
            "tf2onnx)."
        ) from error


@functools.cache
def onnxruntime_module() -> ModuleType:
    """``import onnxruntime``.

    ONNX Runtime's telemetry writes a session file, ``$TMPDIR/.ses``, when the module is
    imported (onnxruntime 1.32; nothing later): the import sees a ``TMPDIR`` of its own,
    removed right after, so nothing is left in the user's temporary folder.

    Raises:
        MissingDependencyError: onnxruntime is not installed.
    """
    with _own_tmpdir():
        return _require("onnxruntime")


@contextlib.contextmanager
def _own_tmpdir() -> Iterator[None]:
    """``TMPDIR`` names a fresh private folder inside the block; it is removed after."""
    folder = tempfile.mkdtemp(prefix="tfcompress-ort-")
    saved = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = folder
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved
        shutil.rmtree(folder, ignore_errors=True)


@functools.cache
def ort_errors() -> tuple[type[BaseException], ...]:
    """The exceptions ONNX Runtime raises from a session (its own derive from ``Exception``).

    Every exception class of its binding (``Fail``, ``InvalidArgument``, ``InvalidGraph``...),
    plus ``RuntimeError``, ``ValueError`` and ``MemoryError`` (an allocation it cannot make).

    Raises:
        MissingDependencyError: onnxruntime is not installed.
    """
    onnxruntime_module()
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    own = tuple(
        value
        for value in vars(state).values()
        if isinstance(value, type) and issubclass(value, Exception)
    )
    return (*own, RuntimeError, ValueError, MemoryError)


def ort_quantization() -> ModuleType:
    """``onnxruntime.quantization`` (static/dynamic quantizers and calibration readers).

    Raises:
        MissingDependencyError: onnxruntime is not installed.
    """
    return _require("onnxruntime.quantization")


@functools.cache
def onnx_module() -> ModuleType:
    """``import onnx``.

    Raises:
        MissingDependencyError: onnx is not installed.
    """
    return _require("onnx")


@functools.cache
def tf2onnx_module() -> ModuleType:
    """``import tf2onnx`` (after TensorFlow, quietly).

    Raises:
        MissingDependencyError: tf2onnx is not installed.
    """
    tensorflow()
    return _require("tf2onnx")


@functools.cache
def float16_converter() -> ModuleType:
    """A module with ``convert_float_to_float16(model, keep_io_types=...)``.

    ONNX Runtime's own copy (``onnxruntime.transformers.float16``) comes first: it installs
    with onnxruntime. Importing ``onnxruntime.transformers`` appends its folder to
    ``sys.path``; the path is restored, so its modules (``benchmark``, ``constants``...)
    never shadow anything. ``onnxconverter-common`` is the fallback.

    Raises:
        MissingDependencyError: Neither is installed; names ``onnxconverter-common``.
    """
    onnx_module()
    with contextlib.suppress(MissingDependencyError):
        onnxruntime_module()  # imported by the first converter; see onnxruntime_module
    for name in FLOAT16_CONVERTERS:
        saved = list(sys.path)
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
        finally:
            sys.path[:] = saved
    raise MissingDependencyError(
        "float16 for ONNX needs a float16 converter: this onnxruntime does not ship "
        "onnxruntime.transformers.float16 and onnxconverter-common is not installed; "
        "pip install onnxconverter-common."
    )


class _Collect(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.name}: {record.getMessage()}")


class _FromOnnxRuntime(logging.Filter):
    """Takes the root logger's records made inside onnxruntime (its quantizer's warnings)."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines

    def filter(self, record: logging.LogRecord) -> bool:
        if "onnxruntime" in record.pathname:
            self.lines.append(f"{record.levelname} onnxruntime: {record.getMessage()}")
            return False
        return True


@contextlib.contextmanager
def quiet_onnx_tools(what: str) -> Iterator[list[str]]:
    """Collect what tf2onnx and ONNX Runtime's quantizer log or print, then debug-log it.

    Inside the block the ``tf2onnx`` logger stops propagating (its records are collected),
    the root logger's records that come from onnxruntime are collected instead of shown,
    and ``print`` output (the histogram calibrators') is captured. Everything collected is
    logged at DEBUG when the block ends, and is available in the yielded list.
    """
    lines: list[str] = []
    converter_log = logging.getLogger("tf2onnx")
    saved_propagate, saved_level = converter_log.propagate, converter_log.level
    handler, root_filter = _Collect(lines), _FromOnnxRuntime(lines)
    printed = io.StringIO()
    converter_log.addHandler(handler)
    converter_log.propagate = False
    converter_log.setLevel(logging.WARNING)
    logging.getLogger().addFilter(root_filter)
    try:
        with contextlib.redirect_stdout(printed):
            yield lines
    finally:
        converter_log.removeHandler(handler)
        converter_log.propagate = saved_propagate
        converter_log.setLevel(saved_level)
        logging.getLogger().removeFilter(root_filter)
        lines.extend(line for line in printed.getvalue().splitlines() if line.strip())
        for line in lines:
            logger.debug("%s: %s", what, line)
