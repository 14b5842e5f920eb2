"""Judge one candidate with the project's gate (check_gate); the target judges the rest."""

from __future__ import annotations

from typing import Any


def judge(
    reference: Any,
    content: bytes,
    eval_set: Any,
    *,
    name: str,
    checks: Any,
    settings: Any,
    threads: int,
) -> dict[str, Any]:
    """Run :func:`tfcompress.testing.output_gates.check_gate` on the artifact; attempt fields.

    The gate is the same check as ``tfcompress gate`` and the pytest plugin, so an artifact
    that passes here passes the user's CI gate on the same data.

    Returns:
        ``Attempt`` keyword fields: status, why, the deciding verdict's numbers, the report.
    """
    from tfcompress.models import TFLiteModel
    from tfcompress.testing.output_gates import check_gate

    candidate = TFLiteModel(content, label=name, verified=True)
    report = check_gate(
        reference, candidate, eval_set, checks=checks, settings=settings, threads=threads
    )
    deciding = report.failures[0] if report.failures else report.verdicts[0]
    return {
        "status": "passed" if report.passed else "failed",
        "why": report.headline(),
        "metric": deciding.metric,
        "kind": deciding.kind,
        "reference_score": deciding.reference_score,
        "score": deciding.candidate_score,
        "value": deciding.value,
        "ci_low": deciding.ci_low,
        "ci_high": deciding.ci_high,
        "threshold": deciding.threshold,
        "gate": report.to_dict(),
    }
