"""Judge one candidate with the project's gate (check_gate) and the target's own rules."""

from __future__ import annotations

from typing import Any

from tfcompress.compression.attempts import Attempt


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


def edgetpu_summary(report: Any) -> dict[str, Any]:
    """The linter's numbers an attempt keeps (see tfcompress/targets/edgetpu/report.py)."""
    return {
        "compatible": bool(report.compatible),
        "ops_mapped": int(report.ops_mapped),
        "ops_total": int(report.ops_total),
        "segments_predicted": int(report.segments_predicted),
        "first_unmapped_op": _op_name(report.first_unmapped_op),
    }


def edgetpu_verdict(summary: dict[str, Any], float_nodes: tuple[str, ...]) -> str | None:
    """Why an artifact does not qualify for the Edge TPU, or None when it does.

    Only fully-integer artifacts qualify; a selective-float one is kept in the report with
    its predicted split so the price of its float layers is visible.

    Example:
        >>> edgetpu_verdict({"ops_mapped": 5, "ops_total": 8, "segments_predicted": 2,
        ...     "compatible": False, "first_unmapped_op": "DEQUANTIZE"}, ("dense",))
        ... # doctest: +ELLIPSIS
        'keeps 1 node(s) float: the Edge TPU would run 5 of 8 ops in 2 segment(s); only ...'
    """
    split = (
        f"the Edge TPU would run {summary['ops_mapped']} of {summary['ops_total']} ops in "
        f"{summary['segments_predicted']} segment(s)"
    )
    if float_nodes:
        only = "only fully-integer artifacts qualify"
        return f"keeps {len(float_nodes)} node(s) float: {split}; {only}"
    if summary["ops_mapped"] == 0:
        return f"no op maps to the Edge TPU: {split}"
    return None


def edgetpu_rank(attempt: Attempt) -> int:
    """0 for an artifact the linter predicts in one Edge TPU segment, 1 otherwise."""
    summary = attempt.edgetpu or {}
    return 0 if summary.get("segments_predicted") == 1 and summary.get("compatible") else 1


def _op_name(op: Any) -> str | None:
    """The linter's first unmapped op as plain data (its type and index)."""
    if op is None:
        return None
    kind = getattr(op, "type", None)
    index = getattr(op, "index", None)
    return f"{kind} (op {index})" if kind is not None else str(op)
