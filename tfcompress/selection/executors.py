"""Where candidates run: local child processes, any ``concurrent.futures`` executor, or Dask."""

from __future__ import annotations

import concurrent.futures
import queue
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from tfcompress._compat.dask import TLSFiles, connect, is_dask_client, workers_now
from tfcompress.errors import InvalidInputError

__all__ = ["ChildPool", "InlineExecutor", "Runner", "connect_scheduler", "is_dask_client"]


class InlineExecutor(concurrent.futures.Executor):
    """Runs each task at ``submit`` in the caller's process (records say ``worker: local``).

    Useful for debugging and for small searches where starting worker processes costs more
    than the work; latency is then measured in the caller's process.

    Example:
        >>> InlineExecutor().submit(pow, 2, 3).result()
        8
    """

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn`` now and return a finished future holding its result or exception."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:  # delivered through the future, as any executor does
            future.set_exception(error)
        return future


class ChildPool(concurrent.futures.Executor):
    """The default executor: ``workers`` child processes of :mod:`tfcompress._child`.

    Each task runs in a worker that keeps its imports (TensorFlow) for the next task, under
    the one time limit (``TFCOMPRESS_TIMEOUT``) and the one memory limit (training gets the
    whole of it, as fine-tuning does). A crash or a time-out fails that task alone (its
    future holds the typed error) and the next task gets a fresh worker; every worker dies
    with this process.

    Args:
        workers: Tasks run at once, each in its own child.
        timeout: Seconds one task may take; None: ``TFCOMPRESS_TIMEOUT`` or its default.
    """

    def __init__(self, workers: int = 1, *, timeout: float | None = None) -> None:
        self._threads = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="tfcompress-select"
        )
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._started: list[Any] = []  # every worker, busy or idle, for shutdown
        self._timeout = timeout

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` (a top-level function) in a child; a future of its result."""
        return self._threads.submit(self._run, fn, args, kwargs)

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        from tfcompress._child import Worker

        try:
            worker = self._idle.get_nowait()
        except queue.Empty:
            worker = Worker(fork="never")  # TensorFlow's work: a fresh interpreter
            self._started.append(worker)
        target = f"{fn.__module__}:{fn.__qualname__}"
        try:
            return worker.call(target, *args, what=fn.__name__, timeout=self._timeout,
                               whole_memory=True, **kwargs)  # fmt: skip
        finally:
            if worker.alive:
                self._idle.put(worker)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking tasks and end the children (not waiting: killed, busy ones too)."""
        if not wait:  # Ctrl-C or an error: the tasks' results would be dropped anyway
            for worker in list(self._started):
                worker.close(kill=True)
        self._threads.shutdown(wait=wait, cancel_futures=cancel_futures)
        for worker in list(self._started):
            worker.close()


#: Arrays of a task at least this large travel to each Dask worker once, not with each task.
SHARE_BYTES = 1 << 20


class Runner:
    """One interface over a ``concurrent.futures.Executor`` and a ``dask.distributed.Client``.

    On Dask, tasks submitted together spread over the workers: each goes to the worker with
    the fewest of this runner's tasks in flight per thread (a loose restriction: if that
    worker leaves, another runs it, and an idle worker may steal it), and a task's large
    arrays (the training images, the same for every candidate) are scattered once to every
    worker and passed as futures, so they travel once per worker and pin no task to the
    worker that happens to hold them. Each task's result says which worker ran it.

    Args:
        executor: An executor, a Dask client, or None for a :class:`ChildPool` of
            ``workers`` child processes.
        workers: Child processes of the default pool.
    """

    def __init__(self, executor: Any = None, *, workers: int = 1) -> None:
        self._owned = executor is None
        self._workers = workers
        if executor is None:
            executor = ChildPool(workers)
        elif not is_dask_client(executor) and not isinstance(executor, concurrent.futures.Executor):
            raise InvalidInputError(
                f"executor must be a concurrent.futures.Executor or a dask.distributed.Client, "
                f"got {type(executor).__name__}."
            )
        self.executor = executor
        self.dask = is_dask_client(executor)
        self._scattered: dict[int, tuple[Any, Any]] = {}  # id(array) -> (array, its future)
        self._in_flight: dict[str, str] = {}  # task key -> the worker it was sent to

    def describe(self) -> str:
        """Words for the report: which executor ran the candidates."""
        if self.dask:
            workers = workers_now(self.executor)
            return f"Dask scheduler {self.executor.scheduler.address} ({len(workers)} workers)"
        if self._owned:
            return f"local child processes ({self._workers} at a time)"
        return type(self.executor).__name__

    def submit(self, fn: Callable[[dict[str, Any]], dict[str, Any]], task: dict[str, Any]) -> Any:
        """Start ``fn(task)``; returns a future with ``.result()``."""
        if self.dask:
            worker = self._free_worker()
            # pure=False: the same task run twice is two runs (latency is a measurement).
            future = self.executor.submit(
                fn,
                self._shared(task),
                pure=False,
                workers=None if worker is None else [worker],
                allow_other_workers=True,
            )
            if worker is not None:
                self._in_flight[future.key] = worker
            return future
        return self.executor.submit(fn, task)

    def _free_worker(self) -> str | None:
        """The worker with the fewest of this runner's tasks in flight per thread."""
        workers = workers_now(self.executor)
        if not workers:
            return None
        load = dict.fromkeys(workers, 0)
        for worker in self._in_flight.values():
            if worker in load:
                load[worker] += 1
        return min(
            sorted(workers), key=lambda w: load[w] / max(1, int(workers[w].get("nthreads", 1)))
        )

    def _shared(self, task: dict[str, Any]) -> dict[str, Any]:
        """``task`` with its large arrays replaced by futures of copies on every worker."""
        import numpy as np

        shared = dict(task)
        for name, value in task.items():
            if isinstance(value, np.ndarray) and value.nbytes >= SHARE_BYTES:
                if id(value) not in self._scattered:
                    future = self.executor.scatter(value, broadcast=True, hash=False)
                    self._scattered[id(value)] = (value, future)  # the array kept: id stays
                shared[name] = self._scattered[id(value)][1]
        return shared

    def _done(self, future: Any) -> Any:
        self._in_flight.pop(getattr(future, "key", None), None)
        return future

    def as_completed(self, futures: Iterable[Any]) -> Iterator[Any]:
        """The futures in the order they finish."""
        futures = list(futures)
        if not futures:
            return iter(())
        if self.dask:
            from distributed import as_completed

            # Without a loop it asks for the default client, and connect_scheduler's client
            # is not the default one (set_as_default=False): "No clients found".
            return map(self._done, as_completed(futures, loop=self.executor.loop))
        return concurrent.futures.as_completed(futures)

    def cancel(self, futures: Iterable[Any]) -> None:
        """Cancel what has not started (after Ctrl-C or an error)."""
        for future in futures:
            future.cancel()
            self._done(future)

    def close(self, *, wait: bool = True) -> None:
        """Shut down the pool this runner created (a user's executor is left running).

        Args:
            wait: Wait for running tasks (False after Ctrl-C or an error: their results
                would be dropped anyway).
        """
        self._scattered.clear()  # the shared arrays' futures: released on the workers
        if self._owned:
            self.executor.shutdown(wait=wait, cancel_futures=True)


def connect_scheduler(address: str, *, timeout_s: float = 5.0, tls: TLSFiles | None = None) -> Any:
    """A Dask client connected to ``address`` (e.g. ``tcp://10.0.0.5:8786``).

    The arguments, result and errors are :func:`tfcompress._compat.dask.connect`'s.

    Example:
        >>> client = connect_scheduler("tcp://127.0.0.1:8786")  # doctest: +SKIP
    """
    return connect(address, timeout_s=timeout_s, tls=tls, flag="--scheduler")
