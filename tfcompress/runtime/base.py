"""One interface for every runtime backend: float data in, float outputs out."""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import ClassVar

import numpy as np
from tqdm.auto import tqdm

from tfcompress.errors import InvalidInputError
from tfcompress.models.signature import ModelSignature

_REGISTRY: dict[str, type[Runner]] = {}


Feed = dict[str, np.ndarray]  # one array per input name, batch dimension first
Outputs = dict[str, np.ndarray]  # one array per output name


class Runner(abc.ABC):
    """A loaded model on one backend. Use as a context manager, or call :meth:`close`.

    Subclasses load in ``__init__``, set :attr:`signature` (every input and output, named),
    implement :meth:`predict_batch` and may override :meth:`close`. Every runner takes float
    samples and returns float outputs, whatever the artifact's own input/output types, so
    one dataset feeds every variant. Inputs are matched by name: pass one array for a
    single-input model, or a dict keyed by input name.

    Example:
        >>> with create_runner(model, backend="cpu", threads=2) as runner:  # doctest: +SKIP
        ...     logits = runner.predict(x_test)  # one output: an array
        ...     heads = runner.run({"image": images, "scale": scales})  # dict by output name
    """

    backend: ClassVar[str]
    formats: ClassVar[tuple[type, ...]] = ()  # artifact types this backend runs
    runs: ClassVar[str] = ".tflite"  # what it runs, in words, for "skipped: ..." report rows
    signature: ModelSignature

    @classmethod
    def accepts(cls, model: object) -> bool:
        """Whether this backend can run ``model`` (a loaded model)."""
        return isinstance(model, cls.formats)

    @abc.abstractmethod
    def predict_batch(self, feed: Feed) -> Outputs:
        """Run one batch (any size; every input in ``feed``) and return the float outputs."""

    @property
    def preferred_batch_size(self) -> int:
        """The batch size :meth:`predict` uses by default."""
        return 64

    def feed(self, x: np.ndarray | Mapping[str, np.ndarray]) -> Feed:
        """Name the inputs: one array for a single-input model, else a dict by input name.

        Raises:
            InvalidInputError: One array for several inputs, or names that are not the
                model's inputs.
        """
        names = self.signature.input_names
        if not isinstance(x, Mapping):
            if len(names) != 1:
                raise InvalidInputError(
                    f"the model has {len(names)} inputs ({', '.join(names)}); pass a dict of "
                    "arrays keyed by input name."
                )
            return {names[0]: x}
        if set(x) != set(names):
            raise InvalidInputError(
                f"got inputs {', '.join(map(repr, x))} but the model's inputs are "
                f"{', '.join(map(repr, names))}; key the arrays by input name."
            )
        return {name: x[name] for name in names}

    def run(
        self,
        x: np.ndarray | Mapping[str, np.ndarray],
        *,
        batch_size: int | None = None,
        progress: bool = False,
    ) -> Outputs:
        """Run all samples in batches and return every output, keyed by output name.

        Args:
            x: Samples: one array (single-input model) or a dict keyed by input name.
            batch_size: Samples per call; default :attr:`preferred_batch_size`.
            progress: Draw a progress bar (the CLI turns it on for long runs).

        Returns:
            One array per output, rows in sample order.
        """
        feed = self.feed(x)
        count = len(next(iter(feed.values())))
        size = batch_size or self.preferred_batch_size
        starts = range(0, count, size)
        bar = tqdm(starts, desc=f"{self.backend} inference", unit="batch", disable=not progress)
        parts = [self.predict_batch(slice_feed(feed, start, start + size)) for start in bar]
        return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}

    def predict(
        self,
        x: np.ndarray | Mapping[str, np.ndarray],
        *,
        batch_size: int | None = None,
        progress: bool = False,
    ) -> np.ndarray | Outputs:
        """Like :meth:`run`, but a single-output model returns its one array (as Keras does).

        Args:
            x: Samples: one array (single-input model) or a dict keyed by input name.
            batch_size: Samples per call; default :attr:`preferred_batch_size`.
            progress: Draw a progress bar.

        Returns:
            The outputs of a single-output model, else a dict keyed by output name.
        """
        outputs = self.run(x, batch_size=batch_size, progress=progress)
        return next(iter(outputs.values())) if len(outputs) == 1 else outputs

    def bind(self, x: np.ndarray | Mapping[str, np.ndarray]) -> Callable[[], object]:
        """Prepare one batch and return a call that runs just the inference on it.

        The benchmark harness times the returned call, the way LiteRT's benchmark_model
        times ``Invoke()``: input conversion and copies happen here, once, not in the loop.
        The default runs :meth:`predict_batch`; backends override it to time less.

        Args:
            x: One batch of float samples (an array, or a dict keyed by input name).

        Returns:
            A callable without arguments; each call runs the model once on ``x``.
        """
        feed = self.feed(x)
        return lambda: self.predict_batch(feed)

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


def slice_feed(feed: Feed, start: int, stop: int) -> Feed:
    """Samples ``start:stop`` of every input."""
    return {name: array[start:stop] for name, array in feed.items()}


def pad_feed(feed: Feed, size: int) -> Feed:
    """Zero-pad every input to ``size`` samples (for models with a fixed batch size)."""
    padded = {}
    for name, array in feed.items():
        missing = size - len(array)
        zeros = np.zeros((missing, *array.shape[1:]), array.dtype)
        padded[name] = np.concatenate([array, zeros]) if missing else array
    return padded


def run_in_chunks(feed: Feed, size: int, run: Callable[[Feed], Outputs]) -> Outputs:
    """Run a fixed-batch model on any number of samples: chunks of ``size``, last one padded.

    Example:
        >>> double = lambda f: {"y": f["x"] * 2}
        >>> run_in_chunks({"x": np.arange(3)}, 2, double)["y"]
        array([0, 2, 4])
    """
    count = len(next(iter(feed.values())))
    parts = []
    for start in range(0, count, size):
        chunk = slice_feed(feed, start, start + size)
        rows = len(next(iter(chunk.values())))
        parts.append({name: out[:rows] for name, out in run(pad_feed(chunk, size)).items()})
    return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}


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
