"""Accuracy metrics over model outputs: top-1, top-k, or any callable."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from tfcompress.errors import InvalidInputError

Metric = Callable[[np.ndarray, np.ndarray], float]  # (labels, outputs) -> score
MetricLike = str | Metric


def correct_top_k(labels: np.ndarray, outputs: np.ndarray, k: int = 1) -> np.ndarray:
    """Per-sample booleans: is the label among the ``k`` highest outputs?

    A single-unit output is read as a binary probability/logit (positive class when > 0.5
    for probabilities in [0, 1], > 0 otherwise).

    Example:
        >>> correct_top_k(np.array([1, 0]), np.array([[0.1, 0.9], [0.2, 0.8]]))
        array([ True, False])
    """
    outputs = outputs.reshape(len(outputs), -1)
    if outputs.shape[1] == 1:
        threshold = 0.5 if outputs.min() >= 0 and outputs.max() <= 1 else 0.0
        return (outputs[:, 0] > threshold).astype(np.int64) == labels
    if k == 1:
        return outputs.argmax(axis=1) == labels
    top = np.argpartition(-outputs, kth=min(k, outputs.shape[1]) - 1, axis=1)[:, :k]
    return (top == labels[:, np.newaxis]).any(axis=1)


def resolve_metric(metric: MetricLike) -> tuple[str, Metric]:
    """Turn ``"accuracy"``/``"top1"``, ``"top5"`` (any k) or a callable into (name, function).

    Raises:
        InvalidInputError: An unknown metric name.

    Example:
        >>> resolve_metric("top5")[0]
        'top5'
    """
    if callable(metric):
        return getattr(metric, "__name__", "custom"), metric
    name = str(metric).lower()
    if name in {"accuracy", "top1", "top-1"}:
        return "accuracy", lambda labels, outputs: float(correct_top_k(labels, outputs).mean())
    match = re.fullmatch(r"top-?(\d+)", name)
    if match and int(match.group(1)) >= 1:
        k = int(match.group(1))
        return f"top{k}", lambda labels, outputs: float(correct_top_k(labels, outputs, k).mean())
    raise InvalidInputError(
        f"unknown metric {metric!r}; use 'accuracy' (top-1), 'topK' such as 'top5', or a "
        "callable(labels, outputs) -> float."
    )
