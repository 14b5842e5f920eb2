"""LiteRT interpreter resolution: ai-edge-litert, then tflite_runtime, then tf.lite."""

from __future__ import annotations

import functools
import importlib
from types import ModuleType
from typing import Any

from tfcompress._compat.tf import has_tensorflow, tensorflow
from tfcompress.errors import MissingDependencyError

#: Interpreter modules tried in order; each holds ``Interpreter``, ``OpResolverType`` and
#: ``load_delegate`` at its top level.
INTERPRETER_MODULES = ("ai_edge_litert.interpreter", "tflite_runtime.interpreter")


@functools.cache
def interpreter_module() -> tuple[ModuleType, str]:
    """Return the module that holds ``Interpreter`` and the name of the package it came from.

    ai-edge-litert is the maintained runtime. ``tflite_runtime`` (frozen at 2.14, numpy 1)
    is kept for old devices, and ``tf.lite`` (deprecated) as the last resort. Whichever is
    found, the module returned has the same three names at its top level: ``Interpreter``,
    ``OpResolverType`` and ``load_delegate``, so callers never need to know which it is.
    The answer is cached for the process; tests that force a fallback call
    ``interpreter_module.cache_clear()``.
    """
    for name in INTERPRETER_MODULES:
        try:
            return importlib.import_module(name), name.split(".")[0]
        except ImportError as error:
            _raise_if_dependency(error, name.split(".")[0], "LiteRT's interpreter")
    if not has_tensorflow():
        raise MissingDependencyError(
            "running a .tflite needs LiteRT's interpreter: none of ai-edge-litert, "
            "tflite-runtime or TensorFlow is installed; pip install ai-edge-litert (it comes "
            "with every tfcompress install: pip install 'tfcompress[device]')."
        )
    return _tf_lite_interpreter_module(), "tensorflow.lite"


def _tf_lite_interpreter_module() -> ModuleType:
    # tf.lite spreads the interpreter's names over two namespaces: in TF 2.21
    # ``OpResolverType`` and ``load_delegate`` live only in ``tf.lite.experimental``, not on
    # ``tf.lite`` (returning ``tf.lite`` itself made every XNNPACK-off or Edge TPU call fail
    # with AttributeError). Gather the public names into one module shaped like the others.
    lite = tensorflow().lite
    module = ModuleType("tensorflow.lite", "tf.lite's interpreter names, gathered by tfcompress.")
    module.Interpreter = lite.Interpreter  # type: ignore[attr-defined]
    module.OpResolverType = lite.experimental.OpResolverType  # type: ignore[attr-defined]
    module.load_delegate = lite.experimental.load_delegate  # type: ignore[attr-defined]
    return module


def make_interpreter(model_content: bytes, *, num_threads: int, use_xnnpack: bool) -> Any:
    """Create an interpreter over ``model_content``.

    Args:
        model_content: The ``.tflite`` flatbuffer.
        num_threads: CPU threads for the kernels and XNNPACK.
        use_xnnpack: False builds the op resolver without default delegates, i.e. the
            reference/optimized built-in kernels only (useful for comparisons).
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
    """The flatbuffer helpers that read a ``.tflite`` into Python objects.

    ai-edge-litert ships them; without it, TensorFlow's copy (same functions, same
    ``schema_fb``) is used. Cached like :func:`interpreter_module`.
    """
    try:
        return importlib.import_module("ai_edge_litert.tools.flatbuffer_utils")
    except ImportError as error:
        _raise_if_dependency(error, "ai_edge_litert", "LiteRT's flatbuffer_utils")
        tensorflow()
        return importlib.import_module("tensorflow.lite.tools.flatbuffer_utils")


def compiled_model_module() -> ModuleType:
    """LiteRT's ``CompiledModel`` API (ai-edge-litert >= 2 only: the GPU route in Python).

    Raises:
        MissingDependencyError: ai-edge-litert is missing or older than 2, or a module it
            imports is missing (named: ``ml_dtypes``, which its tensor buffers import).
    """
    try:
        return importlib.import_module("ai_edge_litert.compiled_model")
    except ImportError as error:
        _raise_if_dependency(error, "ai_edge_litert", "LiteRT's CompiledModel API")
        raise MissingDependencyError(
            "the LiteRT CompiledModel API needs ai-edge-litert >= 2: pip install -U ai-edge-litert"
        ) from error


#: Modules ai-edge-litert 2.3 imports whose distribution is spelled otherwise.
_DISTRIBUTIONS = {"backports": "backports.strenum", "google": "protobuf"}


def _raise_if_dependency(error: ImportError, package: str, what: str) -> None:
    """Name the module when ``package`` is installed but a module it imports is not.

    Without this a missing ``ml_dtypes`` (which ai-edge-litert's tensor buffers import) or
    ``flatbuffers`` read as "ai-edge-litert is missing" or "needs TensorFlow".

    Raises:
        MissingDependencyError: ``error`` is about another top-level module than ``package``.
    """
    missing = (error.name or "").split(".")[0]
    if missing and missing != package:
        raise MissingDependencyError(
            f"{what} cannot be imported: no module named {missing!r}, which "
            f"{package.replace('_', '-')} needs; pip install {_DISTRIBUTIONS.get(missing, missing)}"
        ) from error
