"""What ``tfcompress quantize`` prints: the table and details, or the JSON keys of ``--eval``."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tfcompress.bench.accuracy import Evaluation
    from tfcompress.quantization.artifact import QuantizedArtifact
    from tfcompress.testing.report import GateReport


def evaluation_fields(
    evaluation: Evaluation | None, gate: GateReport | None, args: argparse.Namespace
) -> dict[str, Any]:
    """The JSON keys of ``--eval`` (the first scored output's numbers) and of the gate."""
    if evaluation is None:
        return {}
    reference, quantized = evaluation.rows
    fields: dict[str, Any] = {
        "metric": evaluation.metric,
        "accuracy": _rounded(quantized.score),
        "reference_accuracy": _rounded(reference.score),
        "accuracy_drop": _rounded(evaluation.drop(quantized.name)),
        "eval_samples": evaluation.samples,
        "evaluation": evaluation.to_dict(),
    }
    if gate is not None:
        fields |= {"max_drop": args.max_drop, "mode": gate.settings.mode, "passed": gate.passed}
        fields["gate"] = gate.to_dict()
    return fields


def quantize_text(
    result: QuantizedArtifact,
    name: str,
    evaluation: Evaluation | None,
    gate: GateReport | None,
    saved: Path,
    beside: dict[str, Any],
) -> str:
    """The table (with the accuracy column when that is the one metric), then the details."""
    from tfcompress.quantization.float_ops import describe_float_ops
    from tfcompress.report.comparison import VariantRow, comparison_table

    only_accuracy = evaluation is not None and [c.metric for c in evaluation.columns] == [
        "accuracy"
    ]
    scores: tuple[float | None, float | None] = (None, None)
    if evaluation is not None and only_accuracy:
        scores = (evaluation.rows[0].score, evaluation.rows[1].score)
    rows = [
        VariantRow("float32", result.reference_size_bytes, scores[0]),
        VariantRow(name, result.size_bytes, scores[1]),
    ]
    text = comparison_table(rows)
    if evaluation is not None and not only_accuracy:
        text += f"\n\n{evaluation}"
    layer_errors = getattr(result, "layer_errors", None)
    sections = (
        getattr(result, "methods", None),
        getattr(result, "calibration", None),  # LiteRT Quantizer: which calibration, why
        f"stayed float: {describe_float_ops(result.float_ops)}" if result.float_ops else None,
        _notes(getattr(result, "notes", ())),
        None if layer_errors is None else layer_errors.table(),
        getattr(result, "target_verdict", None),
        None if gate is None else gate.headline(),
    )
    text += "".join(f"\n\n{section}" for section in sections if section is not None)
    wrote = " and ".join([str(saved), *(str(v) for v in beside.values() if v)])
    return text + f"\n\nwrote {wrote}"


def _notes(notes: tuple[str, ...]) -> str | None:
    return "notes:" + "".join(f"\n- {note}" for note in notes) if notes else None


def _rounded(value: float) -> float | None:
    return round(value, 6) if math.isfinite(value) else None


def recipes_table() -> str:
    """Every recipe with its engines and summary (``quantize --list-recipes``).

    Example:
        >>> print(recipes_table())  # doctest: +ELLIPSIS
        recipe        engines                      what
        ...
    """
    from tfcompress.quantization.recipes import list_recipes, recipe_spec
    from tfcompress.report.table import format_table

    rows = [
        [name, ", ".join(recipe_spec(name).engines), recipe_spec(name).summary]
        for name in list_recipes(include_float=True)
    ]
    return format_table(["recipe", "engines", "what"], rows)
