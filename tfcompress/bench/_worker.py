"""What a measurement worker runs: one runner in a :class:`tfcompress._child.Worker`.

:class:`tfcompress.bench.isolation.IsolatedRunner` calls these functions in its worker
(``worker.call("tfcompress.bench._worker:open_runner", ...)``): the first creates the
runner, which stays in this module for the next calls, until the worker ends. Timing runs
here, inside the worker, so the pipe between the processes is never inside a timed call.
"""

from __future__ import annotations

import time
from typing import Any


class _State:
    """The one runner this worker holds."""

    runner: Any = None


def open_runner(
    model: Any,
    runner_class: type,
    options: dict[str, Any],
    batch_dims: dict[str, int] | None,
) -> tuple[Any, Any, float, float | None]:
    """Create the runner: ``(signature, layout, created_ms, rss_mb before)``.

    The parent resolved the backend name and checked the options: the class itself came
    through the pipe (unpickling imported its module, a plugin's backend included).
    """
    from tfcompress.bench.memory import current_rss_mb

    before = current_rss_mb()
    start = time.perf_counter()
    _State.runner = runner_class(model, **options)
    created_ms = (time.perf_counter() - start) * 1000.0
    if batch_dims:
        _State.runner.declare_batch_dims(batch_dims)
    return _State.runner.signature, _State.runner.layout, created_ms, before


def run(feed: dict[str, Any], batch_size: int | None) -> dict[str, Any]:
    """Every sample (batch first), as :meth:`Runner.run`."""
    return _State.runner.run(feed, batch_size=batch_size)


def predict_batch(feed: dict[str, Any]) -> dict[str, Any]:
    """One call in the model's layout."""
    return _State.runner.predict_batch(feed)


def time_batch(
    feed: dict[str, Any], timing: dict[str, float]
) -> tuple[Any, dict[str, object], float | None, float | None]:
    """``(Timing, details, rss_mb, peak_rss_mb)`` of one batch, timed here."""
    from tfcompress.bench.memory import current_rss_mb, peak_rss_mb
    from tfcompress.bench.stats import measure

    measured = measure(_State.runner.bind(feed), **timing)
    return measured, _State.runner.details(), current_rss_mb(), peak_rss_mb()


def profile_ops(feed: dict[str, Any], timing: dict[str, float], whole: Any) -> dict[str, Any]:
    """The per-op profile of one batch, timed here (:mod:`tfcompress.bench.op_profile`)."""
    from tfcompress.bench.op_profile import profile_runner

    return profile_runner(_State.runner, feed, timing, whole)


def details() -> dict[str, object]:
    """The runner's details."""
    return _State.runner.details()
