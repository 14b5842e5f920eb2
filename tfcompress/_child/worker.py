"""``Worker``: a child of its own that keeps what one call leaves for the next.

A measurement runner holds one model for all its timed calls; a load probe runs one
model once. Each is a worker: a process of its own that never imports TensorFlow, forked
on Linux from the :mod:`zygote <tfcompress._child.zygote>` that imported NumPy and LiteRT
once (52 ms a worker instead of 357 ms, docs/benchmarks.md ``isolation-cost``), else a
fresh interpreter. Calls to it are the same calls as :func:`tfcompress._child.call`, with
the same answers and the same typed errors; after a crash or a time-out the worker is
gone, and its owner starts another if it needs one.

Example:
    >>> with Worker() as worker:  # doctest: +SKIP
    ...     worker.call("os:getpid", what="asking its pid")
"""

from __future__ import annotations

from typing import Any

from tfcompress._child import wire
from tfcompress._child.answers import ChildTransferError, result
from tfcompress._child.process import Child, Process, start_fresh
from tfcompress._child.zygote import fork_child

__all__ = ["Worker"]


class Worker:
    """A worker process: forked from the zygote where there is one, else a fresh interpreter.

    Args:
        fork: ``"start"``: fork from this process's zygote, starting it if needed (a
            benchmark starts dozens of workers); ``"running"``: only from one that runs
            already, else a fresh interpreter (a single probe, which a zygote's start
            would slow down); ``"never"``: a fresh interpreter.

    Raises:
        ResourceLimitError: No process could be started.
        InvalidInputError: ``TFCOMPRESS_MEMORY_LIMIT`` is not a valid limit.
    """

    def __init__(self, *, fork: str = "start") -> None:
        from tfcompress._limits import CHILD_MEMORY

        self.memory = CHILD_MEMORY.value()
        child = None if fork == "never" else fork_child(memory=self.memory, start=fork == "start")
        self._child: Child | None = child or start_fresh(role="worker", memory=self.memory)

    @property
    def process(self) -> Process | None:
        """The worker's process (None once it is gone)."""
        return None if self._child is None else self._child.process

    @property
    def alive(self) -> bool:
        """Whether the worker can take another call."""
        return self._child is not None and not self._child.closed

    def call(
        self,
        target: str,
        /,
        *args: Any,
        what: str,
        timeout: float | None = None,
        whole_memory: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Run ``module:function(*args, **kwargs)`` in the worker; see :func:`~.warm.call`.

        What the function raised there is raised here as it was (a runtime's own refusal
        is its caller's to word), a ``MemoryError`` as a ``ResourceLimitError``.
        ``whole_memory``: the call may use the worker's whole memory limit (training, whose
        memory grows with the model and the batch), not a share scaled to what it is handed.

        Raises:
            NativeCrashError: The worker died (it is gone).
            ChildTimeoutError: The call ran past ``timeout`` (``TFCOMPRESS_TIMEOUT`` when
                None); the worker was killed.
            ChildTransferError: An argument cannot be handed to the worker, or read there.
        """
        from tfcompress._limits import CHILD_MEMORY, CHILD_TIMEOUT

        limit_s = CHILD_TIMEOUT.given(timeout)
        if self._child is None or self._child.closed:
            raise RuntimeError("this worker is gone; start another")  # pragma: no cover
        try:
            request = wire.encode_request(target, args, kwargs)
        except wire.TransferError as error:
            raise ChildTransferError(f"cannot hand {what} to a worker ({error})") from error
        scaled = not whole_memory and not CHILD_MEMORY.is_set()
        applied = self._child.limit_call(request, scaled=scaled)
        reply = self._child.exchange(request, limit_s)
        if reply.answer is None:
            self._child = None  # closed by the exchange
        return result(reply, what=what, seconds=limit_s, memory=applied, keep_errors=True)

    def close(self, *, kill: bool = False) -> None:
        """End the worker (closing its pipe ends it; a stuck one is killed)."""
        child, self._child = self._child, None
        if child is not None:
            child.close(kill=kill)

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, _type: object, exc: BaseException | None, *_: object) -> None:
        """Close; when a Ctrl-C or a signal unwinds the block, kill the worker at once."""
        self.close(kill=exc is not None and not isinstance(exc, Exception))
