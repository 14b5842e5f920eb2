"""Runtime backends behind one :class:`Runner` interface."""

from __future__ import annotations

from typing import Any

from tfcompress.models.loading import ModelLike, TFLiteModel, resolve_model
from tfcompress.models.onnx import OnnxModel

# Importing a backend module registers it; none imports its runtime library before use.
from tfcompress.runtime import edgetpu, gpu, keras, litert, onnxruntime  # noqa: F401
from tfcompress.runtime.base import Runner, backend_class, list_backends, register_backend

__all__ = ["Runner", "create_runner", "default_backend", "list_backends", "register_backend"]


def default_backend(model: Any) -> str:
    """'cpu' (LiteRT) for a ``.tflite``, 'onnxruntime' for an ``.onnx``, else 'keras'."""
    if isinstance(model, TFLiteModel):
        return litert.LiteRTRunner.backend
    if isinstance(model, OnnxModel):
        return onnxruntime.OnnxRuntimeRunner.backend
    return "keras"


def create_runner(model: ModelLike, *, backend: str | None = None, **options: Any) -> Runner:
    """Load ``model`` on ``backend`` (default: the natural one for its format).

    Args:
        model: A loaded model, ``.tflite`` bytes or a path.
        backend: A registered backend name (see :func:`list_backends`).
        **options: Backend options, e.g. ``threads=2`` or ``use_xnnpack=False`` for 'cpu'.

    Returns:
        A ready runner; close it (or use ``with``) when done.

    Example:
        >>> with create_runner("model_int8.tflite", threads=2) as runner:  # doctest: +SKIP
        ...     outputs = runner.predict(x)
    """
    loaded = resolve_model(model)
    return backend_class(backend or default_backend(loaded))(loaded, **options)
