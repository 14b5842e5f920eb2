"""A user's own metric function as a task metric the gates judge like any other.

``check_accuracy_drop(..., metric=fn)`` and ``@pytest.mark.accuracy_gate(metrics=fn)`` take
``fn(labels, outputs) -> float`` (higher is better, a fraction such as an accuracy). The gate
needs the metric on random subsets of the samples (its bootstrap interval) and per class, so
:func:`function_metric` wraps ``fn`` in a :class:`~tfcompress.bench.metric_def.MetricDef`
whose per-sample rows are sample indices into the arrays it was prepared with.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tfcompress.bench.metric_def import MetricDef, Prepared
from tfcompress.errors import InvalidDataError


def function_metric(function: Callable[[np.ndarray, np.ndarray], float]) -> MetricDef:
    """``function(labels, outputs) -> float`` as a task metric (higher is better, a fraction).

    Args:
        function: The user's metric over labels and outputs of some samples.

    Returns:
        A metric the gates judge on its drop, with a bootstrap interval.
    """
    name = getattr(function, "__name__", "") or "metric"
    if name == "<lambda>":
        name = "metric"
    # Each model's (labels, outputs) are kept once; a per-sample row is (which, index), so
    # any subset of rows still knows which arrays it indexes.
    prepared: list[Prepared] = []

    def prepare(labels: np.ndarray, outputs: np.ndarray, output: str) -> Prepared:
        labels, outputs = np.asarray(labels), np.asarray(outputs)
        if labels.ndim == 0 or outputs.ndim == 0 or len(labels) != len(outputs):
            raise InvalidDataError(
                f"{name} on output {output!r}: {labels.shape[:1]} labels for "
                f"{outputs.shape[:1]} outputs; pass one output row per labelled sample."
            )
        return labels, outputs

    def per_sample(labels: np.ndarray, outputs: np.ndarray) -> np.ndarray:
        prepared.append((labels, outputs))
        which = np.full(len(labels), len(prepared) - 1)
        return np.stack([which, np.arange(len(labels))], axis=1)

    def aggregate(rows: np.ndarray) -> float:
        labels, outputs = prepared[int(rows[0, 0])]
        indices = rows[:, 1]
        return float(function(labels[indices], outputs[indices]))

    return MetricDef(
        name,
        "task",
        "higher",
        "fraction",
        f"{name}: the metric function given, scored on both models against the labels",
        "max_drop",
        None,
        "bootstrap",
        prepare,
        per_sample,
        aggregate,
    )
