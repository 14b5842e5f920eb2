"""ONNX, ONNX Runtime and tf2onnx, imported on first use with an install hint when missing.

tf2onnx 1.17 converts this project's models under numpy 2 without shims (checked with
numpy 2.4); should a later numpy/tf2onnx pair need one, it belongs here and nowhere else.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType

from tfcompress._compat.tf import tensorflow
from tfcompress.errors import MissingDependencyError

_HINT = "pip install 'tfcompress[onnx]'"


def _require(name: str) -> ModuleType:
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

    Raises:
        MissingDependencyError: onnxruntime is not installed.
    """
    return _require("onnxruntime")


@functools.cache
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
