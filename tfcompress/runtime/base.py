"""One interface for every runtime backend: float data in, float outputs out."""

from __future__ import annotations

import abc
from collections.abc import Callable
from types import TracebackType
from typing import ClassVar

import numpy as np
from tqdm.auto import tqdm

from tfcompress.errors import InvalidInputError

_REGISTRY: dict[str, type[Runner]] = {}


class Runner(abc.ABC):
    """A loaded model on one backend. Use as a context manager, or call :meth:`close`.

    Subclasses load in ``__init__``, implement :meth:`predict_batch` and may override
    :meth:`close`. Every runner takes float samples and returns float outputs, whatever the
    artifact's own input/output types, so one dataset feeds every variant.

    Example:
        >>> with create_runner(model, backend="cpu", threads=2) as runner:  # doctest: +SKIP
        ...     logits = runner.predict(x_test)
    """

    backend: ClassVar[str]
    formats: ClassVar[tuple[type, ...]] = ()  # artifact types this backend runs
    runs: ClassVar[str] = ".tflite"  # what it runs, in words, for "skipped: ..." report rows

    @classmethod
    def accepts(cls, model: object) -> bool:
        """Whether this backend can run ``model`` (a loaded model)."""
        return isinstance(model, cls.formats)

    @abc.abstractmethod
    def predict_batch(self, x: np.ndarray) -> np.ndarray:
        """Run one batch (any size) and return the float outputs."""

    @property
    def preferred_batch_size(self) -> int:
        """The batch size :meth:`predict` uses by default."""
        return 64

    def predict(
        self, x: np.ndarray, *, batch_size: int | None = None, progress: bool = False
    ) -> np.ndarray:
        """Run all of ``x`` in batches and concatenate the outputs.

        Args:
            x: Samples, batch dimension first.
            batch_size: Samples per call; default :attr:`preferred_batch_size`.
            progress: Draw a progress bar (the CLI turns it on for long runs).

        Returns:
            Outputs for every sample, in order.
        """
        size = batch_size or self.preferred_batch_size
        starts = range(0, len(x), size)
        bar = tqdm(starts, desc=f"{self.backend} inference", unit="batch", disable=not progress)
        return np.concatenate([self.predict_batch(x[start : start + size]) for start in bar])

    def bind(self, x: np.ndarray) -> Callable[[], object]:
        """Prepare one batch and return a call that runs just the inference on it.

        The benchmark harness times the returned call, the way LiteRT's benchmark_model
        times ``Invoke()``: input conversion and copies happen here, once, not in the loop.
        The default runs :meth:`predict_batch`; backends override it to time less.

        Args:
            x: One batch of float samples.

        Returns:
            A callable without arguments; each call runs the model once on ``x``.
        """
        return lambda: self.predict_batch(x)

    def details(self) -> dict[str, object]:
        """Backend facts for reports (delegated ops, accelerators, providers...)."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook, most backends hold no resources
        """Release the model's resources."""

    def __enter__(self) -> Runner:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def register_backend(name: str) -> Callable[[type[Runner]], type[Runner]]:
    """Class decorator that makes a runner available as ``backend=name``."""

    def decorate(cls: type[Runner]) -> type[Runner]:
        cls.backend = name
        _REGISTRY[name] = cls
        return cls

    return decorate


def backend_class(name: str) -> type[Runner]:
    """The runner class registered as ``name``.

    Raises:
        InvalidInputError: No such backend.
    """
    if name not in _REGISTRY:
        raise InvalidInputError(
            f"unknown backend {name!r}; choose one of {', '.join(sorted(_REGISTRY))}."
        )
    return _REGISTRY[name]


def list_backends() -> list[str]:
    """Names of all registered backends."""
    return sorted(_REGISTRY)
