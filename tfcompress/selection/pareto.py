"""The Pareto front in any number of objectives (accuracy up, latency down, size down)."""

from __future__ import annotations

from collections.abc import Sequence

from tfcompress.selection.result import TRAINED, CandidateRecord


def pareto_indices(points: Sequence[Sequence[float]]) -> list[int]:
    """Indices of the points no other point dominates, every coordinate to be minimised.

    A point is dominated when another is <= on every coordinate and < on at least one (the
    2-D :func:`tfcompress.report.plots.pareto_front`, generalised). Equal points are all
    kept. Returned in lexicographic order of the points.

    Example:
        >>> pareto_indices([(1, 1, 1), (2, 2, 2), (0, 3, 1), (1, 1, 1)])
        [2, 0, 3]
    """
    front = [
        i
        for i, point in enumerate(points)
        if not any(
            all(o <= p for o, p in zip(other, point, strict=True))
            and any(o < p for o, p in zip(other, point, strict=True))
            for j, other in enumerate(points)
            if j != i
        )
    ]
    return sorted(front, key=lambda i: (tuple(points[i]), i))


def pareto_names(records: Sequence[CandidateRecord]) -> list[str]:
    """Names of the trained records on the (accuracy up, latency down, size down) front.

    Records without a measured accuracy, latency or size take no part; where no record has
    a latency (a GPU target on a machine without one), the front is accuracy and size.
    """
    trained = [
        r
        for r in records
        if r.status == TRAINED and r.accuracy is not None and r.size_bytes is not None
    ]
    timed = [r for r in trained if r.latency_ms is not None]
    if timed or not trained:
        points = [(-float(r.accuracy), float(r.latency_ms), float(r.size_bytes)) for r in timed]  # type: ignore[arg-type]
        return [timed[i].name for i in pareto_indices(points)]
    points = [(-float(r.accuracy), float(r.size_bytes)) for r in trained]  # type: ignore[arg-type, misc]
    return [trained[i].name for i in pareto_indices(points)]
