"""Runtime backends behind one :class:`Runner` interface."""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from typing import Any

from tfcompress.errors import (
    InvalidInputError,
    SettingUnavailableError,  # re-exported: raised by runners
)
from tfcompress.models.loading import ModelLike, TFLiteModel, resolve_model
from tfcompress.models.onnx import OnnxModel
from tfcompress.runtime import litert, onnxruntime  # default_backend names them
from tfcompress.runtime.base import (
    BACKENDS,
    BackendFlag,
    Runner,
    backend_class,
    backend_flags,
    list_backends,
    register_backend,
)

# BACKENDS imports every module of this package with a @register_backend class on its first
# question (nothing lists them); none imports its runtime library before use.

__all__ = [
    "BACKENDS",
    "BackendFlag",
    "Runner",
    "SettingUnavailableError",
    "backend_flags",
    "backend_option_names",
    "check_backend_options",
    "create_runner",
    "default_backend",
    "list_backends",
    "register_backend",
]

# What Python says when a keyword reaches a signature without it (the runner's own or, through
# a subclass that forwards ``**kwargs``, a parent's).
_UNEXPECTED_KEYWORD = re.compile(r"unexpected keyword argument '(\w+)'")


def default_backend(model: Any) -> str:
    """'cpu' (LiteRT) for a ``.tflite``, 'onnxruntime' for an ``.onnx``, else 'keras'."""
    if isinstance(model, TFLiteModel):
        return litert.LiteRTRunner.backend
    return onnxruntime.OnnxRuntimeRunner.backend if isinstance(model, OnnxModel) else "keras"


def backend_option_names(backend: str) -> tuple[str, ...]:
    """The keyword options ``backend``'s runner takes, in its ``__init__`` signature's order.

    Example:
        >>> backend_option_names("cpu")
        ('threads', 'use_xnnpack')
    """
    parameters = list(inspect.signature(backend_class(backend).__init__).parameters.values())
    named = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    # The first two are ``self`` and the model; everything a caller can name comes after.
    return tuple(p.name for p in parameters[2:] if p.kind in named)


def check_backend_options(backend: str, options: Mapping[str, Any]) -> None:
    """Refuse options ``backend`` does not take, naming the backends that do take them.

    Every backend honours the options it accepts; one it cannot honour is not in its
    signature, so it is refused here instead of being dropped (``use_xnnpack`` on
    ``cpu-compiled``, ``device`` on ``cpu``...): InvalidInputError, as for an unknown backend.

    Example:
        >>> check_backend_options("cpu-compiled", {"use_xnnpack": False})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        tfcompress.errors.InvalidInputError: the 'cpu-compiled' backend has no option ...
    """
    if _forwards_keywords(backend):
        return  # its options are its parent's: create_runner turns the TypeError into this error
    accepted = backend_option_names(backend)
    unknown = [name for name in options if name not in accepted]
    if unknown:
        raise _unknown_option(backend, unknown[0], accepted)


def _forwards_keywords(backend: str) -> bool:
    parameters = inspect.signature(backend_class(backend).__init__).parameters.values()
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _unknown_option(backend: str, option: str, accepted: tuple[str, ...]) -> InvalidInputError:
    takers = [name for name in list_backends() if option in backend_option_names(name)]
    plural = "s" if len(takers) > 1 else ""
    where = f"{option!r} is an option of the {', '.join(takers)} backend{plural}"
    if not takers:
        where = f"no backend has an option {option!r}"
    return InvalidInputError(
        f"the {backend!r} backend has no option {option!r} (its options: "
        f"{', '.join(accepted) or 'none'}); {where}."
    )


def create_runner(model: ModelLike, *, backend: str | None = None, **options: Any) -> Runner:
    """Load ``model`` on ``backend`` (default: the natural one for its format).

    Args:
        model: A loaded model, ``.tflite`` bytes or a path.
        backend: A registered backend name (see :func:`list_backends`).
        **options: Backend options, e.g. ``threads=2`` or ``use_xnnpack=False`` for 'cpu'.
            An option the backend does not take is refused, never ignored.

    Returns:
        A ready runner; close it (or use ``with``) when done.

    Raises:
        InvalidInputError: Unknown backend, or an option it does not take (the message
            names the backends that take it).
        SettingUnavailableError: The backend runs here, but not with these options in this
            process (e.g. ``keras`` with another thread count than TensorFlow runs).
        BackendUnavailableError: The backend is missing here.

    Example:
        >>> with create_runner("model_int8.tflite", threads=2) as runner:  # doctest: +SKIP
        ...     outputs = runner.predict(x)
    """
    if backend is not None:
        check_backend_options(backend, options)  # before loading: a typo costs nothing
    loaded = resolve_model(model)
    name = backend or default_backend(loaded)
    check_backend_options(name, options)
    try:
        return backend_class(name)(loaded, **options)
    except TypeError as error:
        # A backend whose signature cannot be read fully (one that forwards **kwargs to a
        # parent) still refuses an unknown option with Python's TypeError: give it the same
        # clear message. Any other TypeError is not about options and propagates unchanged.
        match = _UNEXPECTED_KEYWORD.search(str(error))
        if match is None or match.group(1) not in options:
            raise
        raise _unknown_option(name, match.group(1), backend_option_names(name)) from error
