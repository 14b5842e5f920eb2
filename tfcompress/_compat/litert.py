"""LiteRT interpreter resolution: ai-edge-litert, then tflite_runtime, then tf.lite."""

from __future__ import annotations

import functools
import importlib
from types import ModuleType
from typing import Any

from tfcompress._compat.tf import tensorflow


@functools.cache
def interpreter_module() -> tuple[ModuleType, str]:
    """Return the module that holds ``Interpreter`` and the name of the package it came from.

    ai-edge-litert is the maintained runtime. ``tflite_runtime`` (frozen at 2.14, numpy 1)
    is kept for old devices, and ``tf.lite`` (deprecated) as the last resort.
    """
    for name in ("ai_edge_litert.interpreter", "tflite_runtime.interpreter"):
        try:
            return importlib.import_module(name), name.split(".")[0]
        except ImportError:
            continue
    return tensorflow().lite, "tensorflow.lite"


def make_interpreter(model_content: bytes, *, num_threads: int, use_xnnpack: bool) -> Any:
    """Create an interpreter over ``model_content``.

    Args:
        model_content: The ``.tflite`` flatbuffer.
        num_threads: CPU threads for the kernels and XNNPACK.
        use_xnnpack: False builds the op resolver without default delegates, i.e. the
            reference/optimized built-in kernels only (useful for comparisons).

    Returns:
        An un-allocated interpreter.
    """
    module, _ = interpreter_module()
    kwargs: dict[str, Any] = {"model_content": model_content, "num_threads": num_threads}
    if not use_xnnpack:
        kwargs["experimental_op_resolver_type"] = (
            module.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        )
    return module.Interpreter(**kwargs)


@functools.cache
def flatbuffer_utils() -> ModuleType:
    """The flatbuffer helpers that read a ``.tflite`` into Python objects."""
    try:
        return importlib.import_module("ai_edge_litert.tools.flatbuffer_utils")
    except ImportError:
        tensorflow()
        return importlib.import_module("tensorflow.lite.tools.flatbuffer_utils")
