"""Run a native runtime in a worker process, where a crash or a hang cannot take the caller down.

LiteRT aborts with ``malloc_consolidate(): invalid chunk size`` on some int8 LSTMs at their
second invoke; an ONNX ``Loop`` whose trip count comes from the input can run for hours on
random values. LiteRT's own benchmark tool runs one model per process for this reason, and
so does tfcompress: an :class:`IsolatedRunner` holds its runner in a
:class:`~tfcompress._child.Worker` (``_worker.py`` runs there; on Linux the worker is forked
from a zygote that imported it once). A crash there becomes a :class:`RuntimeCrashedError`
naming the signal, a request that runs past its time limit a
:class:`MeasurementTimeoutError`; the worker is stopped and the next request starts a fresh
one, so the other measurements go on.

Timing runs inside the worker (the loop of :func:`~tfcompress.bench.stats.measure`, as
in-process), so the pipe between the processes is never inside a timed call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tfcompress import _child
from tfcompress.errors import ChildTimeoutError, NativeCrashError, TFCompressError
from tfcompress.models.feeding import FeedLayout
from tfcompress.models.loading import model_name
from tfcompress.runtime.base import Feed, Outputs, Runner, backend_class

logger = logging.getLogger(__name__)

_WORKER = "tfcompress.bench._worker"
# What every LiteRT worker needs, imported once by the zygote its workers are forked from;
# a runner's first run draws a (disabled) tqdm bar, whose lock imports multiprocessing.
_child.preload(
    _WORKER,
    "tfcompress.bench.memory",
    "tfcompress.bench.stats",
    "tfcompress.runtime.litert",
    "ai_edge_litert.interpreter",
    "multiprocessing.synchronize",
)


class RuntimeCrashedError(NativeCrashError):
    """The native runtime died (a signal, an abort) while running a model in its worker.

    One kind of :class:`~tfcompress.errors.NativeCrashError`: a crash in a child is one
    typed error wherever the child runs.
    """


class MeasurementTimeoutError(ChildTimeoutError):
    """A request to the worker ran past its time limit; the worker was stopped."""


class WorkerTransferError(TFCompressError):
    """The model or runner class cannot be handed to a worker process (not picklable there).

    Callers measure in their own process instead, and say so.
    """


class IsolatedRunner(Runner):
    """A runner that lives in a worker process.

    It runs what the in-process runner of ``backend`` runs (the same class, created there),
    with the same layout. :meth:`time` runs the timing loop in the worker. After a crash or
    a time-out the worker is gone; the next request starts a new one and loads the model
    again, so one bad measurement costs only itself.

    Args:
        model: A loaded ``.tflite``/``.onnx`` model (or anything the backend runs that can
            be pickled).
        backend: A registered backend name.
        options: The backend's options (``threads=2``...).
        batch_dims: Input name -> batch dimension, for the runner's layout.
        timeout: Seconds one request may take (loading, a run, a timing); None: the one
            time limit (``TFCOMPRESS_TIMEOUT``, six hours). The worker may allocate up to
            ``TFCOMPRESS_MEMORY_LIMIT`` (:data:`tfcompress._limits.CHILD_MEMORY`).

    Raises:
        RuntimeCrashedError: The worker died while loading the model.
        MeasurementTimeoutError: Loading ran past ``timeout``.
        TFCompressError: What creating the runner raised there (unavailable backend...).

    Example:
        >>> runner = IsolatedRunner(model, backend="onnxruntime", timeout=60)  # doctest: +SKIP
        >>> timing, details, rss, peak = runner.time(x[:1], runs=50)  # doctest: +SKIP
    """

    def __init__(
        self,
        model: Any,
        *,
        backend: str,
        options: Mapping[str, Any] | None = None,
        batch_dims: Mapping[str, int] | None = None,
        timeout: float | None = None,
    ) -> None:
        self.backend = backend  # type: ignore[misc]  # an instance's own backend name
        self.model = model
        self.options = dict(options or {})
        self.batch_dims = dict(batch_dims or {})
        from tfcompress._limits import CHILD_MEMORY, CHILD_TIMEOUT

        # Every measurement has a time limit (gate, evaluate, the plugin pass None), and the
        # memory limit the worker reads is checked here, where a bad value is one line.
        self.timeout = CHILD_TIMEOUT.given(timeout)
        CHILD_MEMORY.value()
        self._class = backend_class(backend)
        self.runtime = self._class.runtime_name
        self._worker: _child.Worker | None = None
        try:
            signature, layout, created_ms, rss = self._open()
        except BaseException:  # Ctrl-C or SIGTERM while it loads: no worker is left behind
            self._stop(kill=True)
            raise
        self.signature = signature
        self._layout = layout
        self.created_ms: float = created_ms
        self.rss_before_mb: float | None = rss

    @property
    def layout(self) -> FeedLayout:
        """The layout of the runner in the worker (read when it opened the model)."""
        return self._layout  # type: ignore[return-value]  # set by __init__

    def declare_batch_dims(self, batch_dims: Mapping[str, int] | None) -> None:
        """Reopen the model with this layout (see :meth:`Runner.declare_batch_dims`)."""
        self.batch_dims = dict(batch_dims or {})
        self._stop()
        _, self._layout, _, _ = self._open()

    @property
    def process(self) -> Any:
        """The worker's process (None between a crash and the next request)."""
        return None if self._worker is None else self._worker.process

    def predict_batch(self, feed: Feed) -> Outputs:
        """One call, in the model's layout, run in the worker."""
        return self._request("running the model", "predict_batch", feed)

    def run(
        self,
        x: np.ndarray | Mapping[str, np.ndarray],
        *,
        batch_size: int | None = None,
        progress: bool = False,
    ) -> Outputs:
        """Run every sample in the worker (one request); see :meth:`Runner.run`."""
        del progress  # the worker draws no bars; a request is one step here
        feed = {name: np.asarray(array) for name, array in self.feed(x).items()}
        return self._request("running the model", "run", feed, batch_size)

    def bind(self, x: np.ndarray | Mapping[str, np.ndarray]) -> Callable[[], object]:
        """Refused: a call through the pipe would time the pipe; use :meth:`time`."""
        raise NotImplementedError("an IsolatedRunner is timed with .time(), in its worker")

    def time(
        self, x: np.ndarray | Mapping[str, np.ndarray], **timing: float
    ) -> tuple[Any, dict[str, object], float | None, float | None]:
        """Time one batch in the worker with :func:`tfcompress.bench.stats.measure`.

        Args:
            x: One batch, batch first.
            **timing: ``runs``, ``min_seconds``, ``warmup_runs``, ``warmup_seconds``.

        Returns:
            ``(Timing, details, rss_mb, peak_rss_mb)``, memory measured in the worker.
        """
        feed = {name: np.asarray(array) for name, array in self.feed(x).items()}
        return self._request("timing the model", "time_batch", feed, dict(timing))

    def profile_ops(
        self, x: np.ndarray | Mapping[str, np.ndarray], timing: Mapping[str, float], whole: Any
    ) -> dict[str, Any]:
        """The per-op profile of one batch, measured in the worker (``bench.op_profile``)."""
        feed = {name: np.asarray(array) for name, array in self.feed(x).items()}
        return self._request("profiling its ops", "profile_ops", feed, dict(timing), whole)

    def details(self) -> dict[str, object]:
        """The backend's details, from the worker, plus ``process: worker``."""
        details = self._request("reading its details", "details")
        return {**details, "process": "worker"}

    def close(self) -> None:
        """Stop the worker (closing its pipe ends it; a stuck one is killed)."""
        self._stop()

    def __exit__(self, _type: object, exc: BaseException | None, *_: object) -> None:
        """Close; when a Ctrl-C or a signal unwinds the block, kill the worker at once.

        The worker may be in the middle of a timing that runs for seconds: it would see its
        pipe close only after it, with nobody waiting for the answer.
        """
        interrupted = exc is not None and not isinstance(exc, Exception)
        self._stop(kill=interrupted)

    # -- the worker --------------------------------------------------------------------------

    def _open(self) -> tuple[Any, FeedLayout, float, float | None]:
        self._worker = _child.Worker()
        return self._request(
            "loading the model",
            "open_runner",
            self.model,
            self._class,
            self.options,
            self.batch_dims or None,
            reopen=False,
        )

    def _request(self, doing: str, function: str, *args: Any, reopen: bool = True) -> Any:
        if self._worker is None and reopen:
            logger.debug("%s: starting a new worker after the last one stopped", self.backend)
            self._open()
        worker = self._worker
        if worker is None:  # pragma: no cover - _open set it
            raise RuntimeCrashedError(f"{model_name(self.model)}: the worker is gone")
        try:
            return worker.call(f"{_WORKER}:{function}", *args, what=doing, timeout=self.timeout)
        except _child.ChildTransferError as error:
            self._stop(kill=True)
            raise WorkerTransferError(
                f"cannot hand {model_name(self.model)} on {self.backend} to a worker process "
                f"({error}); define the backend in an importable module to measure it there."
            ) from error
        except ChildTimeoutError as error:
            self._stop(kill=True)
            raise MeasurementTimeoutError(
                f"{model_name(self.model)}: {self.runtime} ({self.backend} backend) did not "
                f"finish {doing} within {self.timeout:g} s and was stopped; a model whose "
                "work depends on its inputs (a loop bound, a sequence length) may need "
                "real data, or a longer limit (--timeout or TFCOMPRESS_TIMEOUT=SECONDS)."
            ) from error
        except NativeCrashError as crash:
            self._stop()
            raise self._crashed(doing, crash) from crash

    def _crashed(self, doing: str, crash: NativeCrashError) -> RuntimeCrashedError:
        code = crash.exit_status
        if crash.signal_number:
            how = f"was killed by {_child.signal_name(crash.signal_number)}"
        else:
            how = f"exited with status {code}"
        last = _child.last_words(crash.said)
        said = f"; its last words: {last}" if last else ""
        error = RuntimeCrashedError(
            f"{model_name(self.model)}: {self.runtime} ({self.backend} backend) crashed while "
            f"{doing}: the worker process {how}{said}. The rest of the run went on; this is "
            "a bug of the runtime with this model (an int8 LSTM is a known case): try another "
            "recipe or backend."
        )
        error.signal_number, error.exit_status, error.said = crash.signal_number, code, crash.said
        return error

    def _stop(self, *, kill: bool = False) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.close(kill=kill)

    def __del__(self) -> None:
        if getattr(self, "_worker", None) is not None:
            self._stop(kill=True)
