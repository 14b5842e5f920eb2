"""What the benchmark's accuracy column scores: one output, one task metric, against labels.

A benchmark row scores each artifact on its own against the labels (fidelity to a reference
is the gate's job: ``tfcompress gate``). For a single-output model the column scores that
output; for several outputs the user names one (``output=``). With no metric named, the
metric :func:`~tfcompress.bench.metrics.choose_metric` picks from the labels is used when
it is a task metric; otherwise there is no column, and a note says why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfcompress.bench.metrics import MetricDef, MetricLike, choose_metric, get_metric
from tfcompress.bench.task_metrics import function_metric
from tfcompress.data import Dataset
from tfcompress.errors import InvalidInputError
from tfcompress.models.feeding import feed_layout
from tfcompress.models.matching import match_tensors
from tfcompress.models.signature import ModelSignature

Score = Callable[[dict[str, np.ndarray]], float]  # an artifact's outputs by name -> score


@dataclass(frozen=True)
class Scoring:
    """The accuracy column: which output of the reference, which metric, which labels.

    A metric function is scored as :func:`~tfcompress.bench.task_metrics.function_metric`.
    """

    metric: str
    output: str
    labels: np.ndarray = field(repr=False)
    definition: MetricDef = field(repr=False)

    def for_artifact(self, reference: ModelSignature, signature: ModelSignature) -> Score:
        """The score function of one artifact, reading the output that is the reference's.

        Raises:
            UnsupportedModelError: The artifact's outputs cannot be matched to the reference's.
        """
        mapping = match_tensors(reference.outputs, signature.outputs)
        mine = next(name for name, theirs in mapping.items() if theirs == self.output)

        def score(outputs: dict[str, np.ndarray]) -> float:
            definition = self.definition.for_reference(outputs[mine])
            return definition.score(self.labels, outputs[mine], output=self.output)

        return score


def plan_scoring(
    metric: MetricLike | None,
    output: str | None,
    reference: ModelSignature,
    data: Dataset | None,
) -> tuple[Scoring | None, list[str]]:
    """Decide the accuracy column from the options and the data (matched to the reference).

    Raises:
        InvalidInputError: An unknown output, a fidelity metric (it needs a reference: use
            ``tfcompress gate``), or a metric that means nothing for the output.
    """
    names = reference.output_names
    if output is not None and output not in names:
        raise InvalidInputError(
            f"the model has no output {output!r}; its outputs are {', '.join(names)}."
        )
    if isinstance(metric, str):
        check_task_metric(metric)
    labels: dict[str, Any] = data.y if data is not None and isinstance(data.y, dict) else {}
    if not labels:
        return None, []
    if output is None and len(names) > 1:
        return None, [
            f"no accuracy column: the model has {len(names)} outputs ({', '.join(names)}); "
            "name the one to score with --output NAME (output= in Python)."
        ]
    chosen = output or names[0]
    if chosen not in labels:
        return None, [f"no accuracy column: the data has no labels for output {chosen!r}."]
    target = np.asarray(labels[chosen])
    if metric is not None:
        definition = function_metric(metric) if callable(metric) else get_metric(metric)
        return Scoring(definition.name, chosen, target, definition), []
    # The output's shape batch first, its batch open (a static batch of 1 scores any count).
    tensor = feed_layout(reference).output(chosen)
    shape = (None, *tensor.sample_shape)
    definition, reason = choose_metric(shape, target, output=chosen)
    if definition.kind != "task":
        return None, [f"no accuracy column for output {chosen!r}: {reason}."]
    return Scoring(definition.name, chosen, target, definition), []


def check_task_metric(metric: str) -> None:
    """Refuse a metric name that is unknown, or that compares with a reference (a gate's).

    Raises:
        InvalidInputError: ``metric`` is not a task metric a benchmark row can score.
    """
    if get_metric(metric).kind != "task":
        raise InvalidInputError(
            f"{metric} compares a model with a reference; a benchmark row scores each "
            "artifact against labels: use a task metric here, and `tfcompress gate` for "
            f"{metric}."
        )
