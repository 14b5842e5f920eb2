"""One interface for every runtime backend: float data in, float outputs out."""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from tqdm.auto import tqdm

from tfcompress._registry import Registry
from tfcompress.errors import InvalidDataError, InvalidInputError, UnsupportedModelError
from tfcompress.models.feeding import FeedLayout, feed_layout
from tfcompress.models.signature import ModelSignature

#: Every backend: a Runner subclass with ``@register_backend(NAME)`` in a module of runtime/.
BACKENDS: Registry[type[Runner]] = Registry("backend", "runtime", "register_backend")


Feed = dict[str, np.ndarray]  # one array per input name, batch dimension first
Outputs = dict[str, np.ndarray]  # one array per output name


@dataclass(frozen=True)
class BackendFlag:
    """A ``tfcompress benchmark`` flag that sets one option of one backend's runner.

    Declared on the runner class (``flags = (BackendFlag(...),)``) as literals: the CLI reads
    it from the source (:mod:`tfcompress._declared`) without importing the backend.

    Attributes:
        option: The runner's keyword (``use_xnnpack``).
        flag: The CLI flag (``--no-xnnpack``).
        help: One line for ``--help`` (the CLI prefixes the backend's name).
        value: The option's value when the flag is given without one (``False`` for
            ``--no-xnnpack``); None: the flag takes a value.
    """

    option: str
    flag: str
    help: str
    value: Any = None
    metavar: str | None = None


class Runner(abc.ABC):
    """A loaded model on one backend. Use as a context manager, or call :meth:`close`.

    Subclasses load in ``__init__``, set :attr:`signature` (every input and output, named),
    implement :meth:`predict_batch` and may override :meth:`close`. Every runner takes float
    samples and returns float outputs, whatever the artifact's own input/output types, so
    one dataset feeds every variant. Inputs are matched by name: pass one array for a
    single-input model, or a dict keyed by input name.

    Arrays given to :meth:`run`, :meth:`predict` and :meth:`bind` are batch first, as a
    :class:`~tfcompress.data.Dataset` holds them; :attr:`layout` says where each tensor's
    batch is in the model (a ``(layers, N, units)`` state, a scalar sample rate, a static
    batch of 1) and the runner moves it there: a scalar input's one value is fed on each
    call, and a static-batch model runs as calls of its own batch size, whatever the
    number of samples. :meth:`predict_batch` is the one call, in the model's own layout.
    """

    backend: ClassVar[str]
    #: The ``tfcompress benchmark`` flags of its options, declared by this class itself (a
    #: subclass registered as another backend declares its own; they are not inherited).
    flags: ClassVar[tuple[BackendFlag, ...]] = ()
    #: The native runtime behind it, for messages ("LiteRT", "ONNX Runtime").
    runtime_name: ClassVar[str] = "its runtime"
    formats: ClassVar[tuple[type, ...]] = ()  # artifact types this backend runs
    runs: ClassVar[str] = ".tflite"  # what it runs, in words, for "skipped: ..." report rows
    #: Pad the last short batch of :meth:`run` so a resizable runtime keeps one input shape.
    pads_last_batch: ClassVar[bool] = False
    signature: ModelSignature
    _layout: FeedLayout | None = None

    @classmethod
    def accepts(cls, model: object) -> bool:
        """Whether this backend can run ``model`` (a loaded model)."""
        return isinstance(model, cls.formats)

    @abc.abstractmethod
    def predict_batch(self, feed: Feed) -> Outputs:
        """Run one call and return the float outputs, both in the model's own layout.

        ``feed`` holds every input as the model takes it: the batch where :attr:`layout`
        puts it (the model's static batch size when it has one), a scalar as a 0-d array.
        """

    @property
    def layout(self) -> FeedLayout:
        """Where each tensor's batch is, and the model's static batch (see ``feeding``)."""
        if self._layout is None:
            self._layout = feed_layout(self.layout_signature())
        return self._layout

    def layout_signature(self) -> ModelSignature:
        """The signature the layout is read from (a runtime with fixed shapes overrides it)."""
        return self.signature

    def declare_batch_dims(self, batch_dims: Mapping[str, int] | None) -> None:
        """Say which dimension is the batch for inputs whose signature cannot tell.

        Args:
            batch_dims: Input name -> dimension (``{"h": 1}``); None or empty: the rules.

        Raises:
            InvalidInputError: An unknown input, a scalar, or a dimension out of range.
        """
        self._layout = feed_layout(
            self.layout_signature(), batch_dims=batch_dims, name=str(self.backend)
        )

    @property
    def preferred_batch_size(self) -> int:
        """The batch size :meth:`predict` uses by default: the static batch, else 64."""
        return self.layout.static_batch or 64

    def feed(self, x: np.ndarray | Mapping[str, np.ndarray]) -> Feed:
        """Name the inputs: one array for a single-input model, else a dict by input name.

        A scalar input may be given as one 0-d value; it is repeated for every sample.

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
        counts = [len(x[n]) for n in names if np.ndim(x[n])]
        count = counts[0] if counts else 1
        return {
            name: np.broadcast_to(x[name], (count,)) if not np.ndim(x[name]) else x[name]
            for name in names
        }

    def run(
        self,
        x: np.ndarray | Mapping[str, np.ndarray],
        *,
        batch_size: int | None = None,
        progress: bool = False,
    ) -> Outputs:
        """Run all samples in batches; every output, batch first, keyed by output name.

        Args:
            x: Samples, batch first: one array (single-input model) or a dict keyed by
                input name.
            batch_size: Samples per call; default :attr:`preferred_batch_size`. A model
                with a static batch always runs calls of its own size (the last padded).
            progress: Draw a progress bar (the CLI turns it on for long runs).
        """
        feed = self.feed(x)
        count = feed_count(feed)
        static = self.layout.static_batch
        size = static or batch_size or self.preferred_batch_size
        if self.pads_last_batch and not static and count > size and count % size:
            padded = self.run(
                pad_feed(feed, count + size - count % size), batch_size=size, progress=progress
            )
            return {name: array[:count] for name, array in padded.items()}
        starts = range(0, count, size)
        bar = tqdm(starts, desc=f"{self.backend} inference", unit="batch", disable=not progress)
        parts = [self._call(slice_feed(feed, start, start + size)) for start in bar]
        return {name: self._joined(name, [part[name] for part in parts]) for name in parts[0]}

    def _joined(self, name: str, parts: list[np.ndarray]) -> np.ndarray:
        """One output's calls joined along its batch (the first axis, once moved there)."""
        try:
            return np.concatenate(parts)
        except ValueError:
            shapes = ", ".join(str(tuple(p.shape)) for p in parts[:3])
            raise InvalidDataError(
                f"output {name!r} came back from successive calls as {shapes} (batch first): "
                "they differ in more than the number of samples, so they cannot be joined "
                "sample by sample; if its batch is another dimension, say which with "
                f"--batch-dim {name}=DIM (batch_dims= in Python)."
            ) from None

    def predict(
        self,
        x: np.ndarray | Mapping[str, np.ndarray],
        *,
        batch_size: int | None = None,
        progress: bool = False,
    ) -> np.ndarray | Outputs:
        """Like :meth:`run`, but a single-output model returns its one array (as Keras does)."""
        outputs = self.run(x, batch_size=batch_size, progress=progress)
        return next(iter(outputs.values())) if len(outputs) == 1 else outputs

    def calls_for(self, batch: int) -> int:
        """How many calls a batch of ``batch`` samples takes (more than 1: static batch)."""
        static = self.layout.static_batch
        return 1 if static is None else -(-batch // static)

    def bind(self, x: np.ndarray | Mapping[str, np.ndarray]) -> Callable[[], object]:
        """Prepare one batch and return a call that runs just the inference on it.

        The benchmark harness times the returned call, the way LiteRT's benchmark_model
        times ``Invoke()``: input conversion happens here, once, not in the loop, and no
        output is read back. A static-batch model runs the batch as :meth:`calls_for` calls
        of its own size, bound by :meth:`bind_calls` on the same terms as a single call, so
        time per sample compares across batches. ``x``: one batch of float samples, batch
        first; each call of the returned callable runs the model once on it.
        """
        feed = self.feed(x)
        static = self.layout.static_batch
        count = feed_count(feed)
        if static is None:
            return self.bind_call(self.layout.to_model(feed))
        chunks = [
            self.layout.to_model(pad_feed(slice_feed(feed, start, start + static), static))
            for start in range(0, count, static)
        ]
        return self.bind_call(chunks[0]) if len(chunks) == 1 else self.bind_calls(chunks)

    def bind_call(self, feed: Feed) -> Callable[[], object]:
        """One call prepared in the model's layout; backends override it to time less."""
        return lambda: self.predict_batch(feed)

    def bind_calls(self, feeds: list[Feed]) -> Callable[[], object]:
        """Several calls of the same shapes prepared, each timed as :meth:`bind_call` times one.

        Each call is bound on its own: right where a bound call holds its own inputs (ONNX
        Runtime, Keras). A runtime with one set of input tensors (LiteRT's interpreter,
        TFLM) or its own buffers (CompiledModel) overrides it.
        """
        calls = [self.bind_call(feed) for feed in feeds]
        return lambda: [call() for call in calls]

    def _accept(self, model: object, threads: int, advice: str) -> None:
        """Refuse another format (``advice``: what to do instead) and fewer than 1 thread."""
        if not self.accepts(model):
            raise UnsupportedModelError(
                f"the {self.backend!r} backend runs {self.runs} models; {advice}"
            )
        if threads < 1:
            raise InvalidInputError(f"threads must be at least 1, got {threads}.")

    def details(self) -> dict[str, object]:
        """Backend facts for reports (delegated ops, accelerators, providers...)."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook, most backends hold no resources
        """Release the model's resources."""

    def _call(self, chunk: Feed) -> Outputs:
        """One call on batch-first samples: padded to a static batch, moved, run, moved back."""
        rows = feed_count(chunk)
        static = self.layout.static_batch
        fed = pad_feed(chunk, static) if static and rows < static else chunk
        outputs = self.predict_batch(self.layout.to_model(fed))
        # An output the signature cannot place (a state made in an If subgraph comes out as
        # (?, ?, ?)) is placed by where this call's samples are; later calls join the same way.
        self._layout = self.layout.fit_outputs(outputs, feed_count(fed))
        samples = self.layout.to_samples(outputs, feed_count(fed))
        return {name: array[:rows] for name, array in samples.items()}

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def copying_calls(
    prepared: list[list[tuple[Any, np.ndarray]]],
    set_input: Callable[[Any, np.ndarray], object],
    invoke: Callable[[], object],
) -> Callable[[], None]:
    """The timed run of calls on a runtime with one set of input tensors (an interpreter).

    Each call copies its inputs, converted before the loop, in with ``set_input(key, value)``
    and invokes; a single call makes the same copy, so a batch of several calls is timed on
    the same terms as one (time per sample compares across static batches).
    """

    def run() -> None:
        for values in prepared:
            for key, value in values:
                set_input(key, value)
            invoke()

    return run


def feed_count(feed: Feed) -> int:
    """The number of samples in a batch-first feed."""
    return len(next(iter(feed.values())))


def slice_feed(feed: Feed, start: int, stop: int) -> Feed:
    """Samples ``start:stop`` of every input."""
    return {name: array[start:stop] for name, array in feed.items()}


def pad_feed(feed: Feed, size: int) -> Feed:
    """Pad every input to ``size`` samples with copies of its last sample.

    The padded rows' outputs are dropped. Copies, not zeros: zeros are values some models
    refuse (an int8 normalisation that divides by the frame's peak fails on silence).
    """
    padded = {}
    for name, array in feed.items():
        missing = size - len(array)
        if not missing:
            padded[name] = array
        elif array.strides[:1] == (0,):  # one value repeated: keep repeating it
            padded[name] = np.broadcast_to(array[:1], (size, *array.shape[1:]))
        else:
            padded[name] = np.concatenate([array, np.repeat(array[-1:], missing, axis=0)])
    return padded


def register_backend(name: str) -> Callable[[type[Runner]], type[Runner]]:
    """Class decorator that makes a runner available as ``backend=name``."""

    def decorate(cls: type[Runner]) -> type[Runner]:
        cls.backend = name
        return BACKENDS.register(name, cls, replace=True)

    return decorate


def backend_class(name: str) -> type[Runner]:
    """The runner class registered as ``name`` (UnknownNameError lists them)."""
    return BACKENDS.get(name)


def backend_flags(name: str) -> tuple[BackendFlag, ...]:
    """The flags backend ``name``'s class declares (its own, not a parent's)."""
    return tuple(vars(backend_class(name)).get("flags", ()))


def list_backends() -> list[str]:
    """Names of all registered backends."""
    return BACKENDS.names()
