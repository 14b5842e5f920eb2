"""Verdicts: which candidate is over budget, which meets every budget, which one is picked.

And the Pareto front of the trained ones: accuracy up, latency down, size down.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tfcompress.report.plots import pareto_indices
from tfcompress.selection.budgets import Budgets, target_budget_fields
from tfcompress.selection.candidates import Candidate
from tfcompress.selection.result import FAILED, OVER_BUDGET, TRAINED, CandidateRecord

#: MnasNet's exponent (Tan et al. 2019, "MnasNet: Platform-Aware Neural Architecture Search
#: for Mobile", soft constraint alpha = beta = -0.07).
REWARD_EXPONENT = -0.07


def reward(accuracy: float, latency_ms: float, target_ms: float) -> float:
    """MnasNet's reward: accuracy x (latency / target) ** -0.07.

    Example:
        >>> round(reward(0.9, 5.0, 5.0), 3)
        0.9
    """
    return float(accuracy * (latency_ms / target_ms) ** REWARD_EXPONENT)


def cost_misses(costs: dict[str, Any], budgets: Budgets) -> list[str]:
    """The size, latency and target budgets a measured candidate misses, in words."""
    misses = []
    size, latency = costs.get("size_bytes"), costs.get("latency_ms")
    if budgets.max_size is not None and size is not None and size > budgets.max_size:
        misses.append(f"int8 size {size:,} B > {budgets.max_size:,} B")
    if None not in (budgets.max_latency, latency) and latency > budgets.max_latency:
        misses.append(
            f"latency {latency:.3f} ms > {budgets.max_latency:g} ms "
            f"({costs.get('latency_backend')}, {costs.get('threads')} thread(s), "
            f"on {costs.get('host')})"
        )
    measured = costs.get("target_measures") or {}
    for budget in target_budget_fields(budgets):
        limit, value = budgets.target_limits[budget.name], measured.get(budget.name)
        if value is None:
            misses.append(f"{budget.label} not measured")
        elif value > limit:
            misses.append(f"{budget.label} {budget.shown(value)} > {budget.shown(limit)}")
    return misses


def within_cost_budgets(costs: dict[str, Any], budgets: Budgets) -> bool:
    """True when phase 1 succeeded and the candidate fits the size and latency budgets."""
    return bool(costs.get("ok")) and not cost_misses(costs, budgets)


def build_records(
    candidates: Sequence[Candidate],
    costs: dict[str, dict[str, Any]],
    training: dict[str, dict[str, Any]],
    budgets: Budgets,
) -> list[CandidateRecord]:
    """One record per candidate from its phases' results and the budgets."""
    return [_record(c, costs[c.name], training.get(c.name), budgets) for c in candidates]


def _record(
    candidate: Candidate,
    costs: dict[str, Any],
    trained: dict[str, Any] | None,
    budgets: Budgets,
) -> CandidateRecord:
    base: dict[str, Any] = {
        "name": candidate.name,
        "family": candidate.family,
        "width": candidate.width,
        "resolution": candidate.resolution,
        **{
            key: costs.get(key)
            for key in (
                "params",
                "macs",
                "size_bytes",
                "latency_ms",
                "latency_backend",
                "threads",
                "target_measures",
                "worker",
                "host",
                "device",
            )
        },
        "measured_at": costs.get("finished_at"),
        "reused": bool(costs.get("reused")),
    }
    if not costs.get("ok"):
        return CandidateRecord(**base, status=FAILED, reason=costs.get("reason"))
    misses = cost_misses(costs, budgets)
    if misses:
        return CandidateRecord(**base, status=OVER_BUDGET, reason="; ".join(misses))
    if trained is None or not trained.get("ok"):
        reason = (trained or {}).get("reason", "not trained")
        return CandidateRecord(**base, status=FAILED, reason=reason)
    base.update(
        size_bytes=trained.get("size_bytes", base["size_bytes"]),  # the trained artifact's
        accuracy=trained.get("accuracy"),
        train_seconds=trained.get("train_seconds"),
        train_worker=trained.get("worker"),
        train_host=trained.get("host"),
        trained_at=trained.get("finished_at"),
        reused=base["reused"] and bool(trained.get("reused")),
    )
    misses = cost_misses({**costs, "size_bytes": base["size_bytes"]}, budgets)
    accuracy = base["accuracy"]
    if budgets.min_accuracy is not None and accuracy < budgets.min_accuracy:
        misses.append(f"int8 accuracy {accuracy:.2%} < {budgets.min_accuracy:.2%}")
    if budgets.max_latency is not None and base["latency_ms"] is not None:
        base["reward"] = round(reward(accuracy, base["latency_ms"], budgets.max_latency), 6)
    return CandidateRecord(
        **base, status=TRAINED, meets_budgets=not misses, reason="; ".join(misses) or None
    )


def pick(records: Sequence[CandidateRecord], objective: str) -> CandidateRecord | None:
    """The best record meeting every budget by ``objective`` (ties: faster, then smaller)."""
    eligible = [r for r in records if r.meets_budgets and r.accuracy is not None]
    if not eligible:
        return None

    def score(record: CandidateRecord) -> tuple[float, float, float]:
        main = record.reward if objective == "reward" else record.accuracy
        return (float(main or 0.0), -(record.latency_ms or 0.0), -(record.size_bytes or 0))

    return max(eligible, key=score)


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
