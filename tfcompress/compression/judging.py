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


def check_gate_first(reference: Any, eval_set: Any, *, config: Any) -> None:
    """Refuse, before the first attempt, a gate that cannot run on this data.

    The reference runs once on ``eval_set`` and the gate's checks are planned on its outputs
    and the data's labels (:func:`tfcompress.testing.judge.plan_checks`): ``--max-drop``
    where no output has labels is refused now, naming the threshold that fits each output
    (``--min-agreement`` for class scores, ``--min-snr`` for others), not after a conversion.

    Raises:
        InvalidInputError: What the gate would refuse on every attempt.
        InvalidDataError: A task metric on an output without labels.
    """
    from tfcompress.bench.paired import run_model
    from tfcompress.models import model_name, model_signature
    from tfcompress.testing.judge import plan_checks

    run = run_model(
        reference,
        eval_set,
        model_signature(reference),
        name=model_name(reference),
        threads=config.threads,
        batch_dims=config.batch_dims,
    )
    labels = eval_set.y if isinstance(eval_set.y, dict) else None
    plan_checks(labels, run.outputs, checks=config.checks, settings=config.settings)
