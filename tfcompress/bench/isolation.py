"""Run a native runtime in a worker process, where a crash or a hang cannot take the caller down.

LiteRT aborts with ``malloc_consolidate(): invalid chunk size`` on some int8 LSTMs at their
second invoke; an ONNX ``Loop`` whose trip count comes from the input can run for hours on
random values. LiteRT's own benchmark tool runs one model per process for this reason, and
so does tfcompress: an :class:`IsolatedRunner` holds its runner in a worker process
(``_worker.py``; on Linux forked from a process that imported it once, :mod:`.zygote`). A
crash there becomes a :class:`RuntimeCrashedError` naming the signal, a request that runs
past its time limit a :class:`MeasurementTimeoutError`; the worker is stopped and the next
request starts a fresh one, so the other measurements go on.

Timing runs inside the worker (the loop of :func:`~tfcompress.bench.stats.measure`, as
in-process), so the pipe between the processes is never inside a timed call.

Example:
    >>> with IsolatedRunner(model, backend="cpu") as runner:  # doctest: +SKIP
    ...     outputs = runner.run(x_test)
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Any

import numpy as np

from tfcompress._lifetime import signal_name
from tfcompress.bench.zygote import Worker, death_wish, start_worker
from tfcompress.errors import NativeCrashError, TFCompressError
from tfcompress.models.feeding import FeedLayout
from tfcompress.models.loading import model_name
from tfcompress.runtime.base import Feed, Outputs, Runner, backend_class

logger = logging.getLogger(__name__)

#: What the worker runs: the parent's import path first, then the worker's main loop.
_BOOTSTRAP = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from tfcompress.bench._worker import main; sys.exit(main(sys.argv))"
)


class RuntimeCrashedError(NativeCrashError):
    """The native runtime died (a signal, an abort) while running a model in its worker.

    One kind of :class:`~tfcompress.errors.NativeCrashError`: a crash in a child is one
    typed error wherever the child runs.
    """


class MeasurementTimeoutError(TFCompressError):
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
        timeout: Seconds one request may take (loading, a run, a timing); None: the
            child-process default (``TFCOMPRESS_TIMEOUT``, six hours). The worker may allocate
            up to ``TFCOMPRESS_MEMORY_LIMIT`` (:data:`tfcompress._limits.CHILD_MEMORY`).

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
        self.timeout = CHILD_TIMEOUT.seconds() if timeout is None else timeout
        # benchmark passes its --timeout; the other verbs take the environment's limit.
        self._limit_option = f"{CHILD_TIMEOUT.env}=SECONDS" if timeout is None else "--timeout"
        CHILD_MEMORY.value()
        self._class = backend_class(backend)
        self.runtime = self._class.runtime_name
        self._process: subprocess.Popen[bytes] | Worker | None = None
        self._stderr: Any = None
        self._requests: Connection | None = None
        self._answers: Connection | None = None
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
        return self._request("timing the model", "time", feed, dict(timing))

    def details(self) -> dict[str, object]:
        """The backend's details, from the worker, plus ``process: worker``."""
        details = self._request("reading its details", "details")
        return {**details, "process": "worker"}

    def close(self) -> None:
        """Stop the worker (closing its pipe ends it; a stuck one is killed)."""
        self._stop()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close; when a Ctrl-C or a signal unwinds the block, kill the worker at once.

        The worker may be in the middle of a timing that runs for seconds: it would see its
        pipe close only after it, with nobody waiting for the answer.
        """
        interrupted = exc is not None and not isinstance(exc, Exception)
        self._stop(kill=interrupted)

    # -- the worker --------------------------------------------------------------------------

    def _open(self) -> tuple[Any, FeedLayout, float, float | None]:
        self._start()
        return self._request(
            "loading the model",
            "open",
            self.model,
            self._class,
            self.options,
            self.batch_dims or None,
            reopen=False,
        )

    def _start(self) -> None:
        parent_in, child_out = os.pipe()
        child_in, parent_out = os.pipe()
        # Ours first, so that _stop closes them whatever stops the start.
        self._requests = Connection(parent_out, readable=False)
        self._answers = Connection(parent_in, writable=False)
        # The worker's stderr, read back for the last words of a crash; closed in _stop.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115
        command = [
            sys.executable,
            "-P",
            "-c",
            _BOOTSTRAP,
            json.dumps([p for p in sys.path if p]),
            str(death_wish()),
            str(child_in),
            str(child_out),
        ]
        try:
            self._process = start_worker(command, fds=(child_in, child_out), stderr=self._stderr)
        except OSError as failure:
            raise TFCompressError(
                f"cannot start the worker process that measures models safely "
                f"({failure.strerror}); free memory or processes."
            ) from failure
        finally:
            os.close(child_in)
            os.close(child_out)

    def _request(self, doing: str, op: str, *args: Any, reopen: bool = True) -> Any:
        if self._process is None and reopen:
            logger.debug("%s: starting a new worker after the last one stopped", self.backend)
            self._open()
        requests, answers = self._requests, self._answers
        if requests is None or answers is None:
            raise self._crashed(doing)
        try:
            payload = pickle.dumps((op, *args))
        except (pickle.PicklingError, AttributeError, TypeError) as error:
            self._stop(kill=True)
            raise WorkerTransferError(
                f"cannot hand {model_name(self.model)} on {self.backend} to a worker process "
                f"({' '.join(str(error).split())[:200]})."
            ) from error
        try:
            requests.send_bytes(payload)
            ready = answers.poll(self.timeout)
            if not ready:
                self._stop(kill=True)
                raise MeasurementTimeoutError(
                    f"{model_name(self.model)}: {self.runtime} ({self.backend} backend) did not "
                    f"finish {doing} within {self.timeout:g} s and was stopped; a model whose "
                    "work depends on its inputs (a loop bound, a sequence length) may need "
                    f"real data, or a longer limit ({self._limit_option})."
                )
            status, value = answers.recv()
        except (EOFError, OSError) as failure:  # the worker died: its pipe closed
            raise self._crashed(doing) from failure
        if status == "transfer":
            self._stop(kill=True)
            raise WorkerTransferError(
                f"a worker process cannot receive {model_name(self.model)} on {self.backend} "
                f"({value}); define the backend in an importable module to measure it there."
            )
        if status == "error":
            raise value
        return value

    def _crashed(self, doing: str) -> RuntimeCrashedError:
        process = self._process
        code = None
        if process is not None:
            try:
                code = process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                code = process.wait()
        last = _last_words(self._stderr)
        self._stop()
        if code is not None and code < 0:
            how = f"was killed by {signal_name(-code)}"
        else:
            how = f"exited with status {code}"
        said = f"; its last words: {last}" if last else ""
        return RuntimeCrashedError(
            f"{model_name(self.model)}: {self.runtime} ({self.backend} backend) crashed while "
            f"{doing}: the worker process {how}{said}. The rest of the run went on; this is "
            "a bug of the runtime with this model (an int8 LSTM is a known case): try another "
            "recipe or backend."
        )

    def _stop(self, *, kill: bool = False) -> None:
        process, self._process = self._process, None
        for connection in (self._requests, self._answers):
            if connection is not None:
                connection.close()
        self._requests = self._answers = None
        if process is not None:
            if kill:
                process.kill()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def __del__(self) -> None:
        if getattr(self, "_process", None) is not None:
            self._stop(kill=True)


def _last_words(stream: Any) -> str:
    if stream is None:
        return ""
    stream.seek(0)
    lines = stream.read()[-4000:].decode("utf-8", errors="replace").strip().splitlines()
    useful = [line.strip() for line in lines if line.strip() and "INFO:" not in line]
    return " ".join(useful[-1].split())[:200] if useful else ""
