"""Judge a candidate on every output of a model, with the metric each output needs.

A gate over many outputs is a list of :class:`Check` (output, metric, threshold): a class head
keeps its top-1 accuracy drop, a box head is judged by mse against labels or by its fidelity
to the reference (snr) when there are none, a mask by mIoU. With no checks, every output gets
the metric :func:`~tfcompress.bench.metrics.choose_metric` picks, and the report says why.
This module plans the checks (which metric, on which output, against which threshold);
:func:`~tfcompress.testing.verdicts.judge_check` judges each one.

Thresholds are in each metric's unit (:mod:`tfcompress.bench.thresholds`); without one, a
fraction task metric takes the settings' ``max_drop`` and a fidelity metric its default
(:mod:`tfcompress.bench.fidelity` says why); mse, mae, rmse and max_abs have no unit-free
default and must be given one. Importing this module imports no TensorFlow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tfcompress.bench.metrics import MetricDef, choose_metric, get_metric, task_metric_names
from tfcompress.bench.thresholds import check_threshold_names, get_threshold, implied_metric
from tfcompress.errors import InvalidDataError, InvalidInputError
from tfcompress.testing.report import GateReport
from tfcompress.testing.settings import GateSettings, parse_max_drop
from tfcompress.testing.verdicts import judge_check

__all__ = ["Check", "build_checks", "judge_outputs_by_name", "plan_checks"]


@dataclass(frozen=True)
class Check:
    """One thing a gate checks: a metric on an output (None: every one) against a threshold.

    ``metric`` is a name (canonicalised, e.g. ``"top1"`` -> ``"accuracy"``), a
    :class:`~tfcompress.bench.metric_def.MetricDef` of the caller's own (a metric function,
    see :func:`tfcompress.bench.task_metrics.function_metric`), or None to let
    :func:`~tfcompress.bench.metrics.choose_metric` pick one per output. ``threshold`` is in
    the metric's unit, for its :attr:`MetricDef.threshold_name` (None: the default); with
    ``metric=None`` it is a ``max_drop`` and applies where the chosen metric is a task metric.

    Raises:
        InvalidInputError: An unknown metric, or a threshold out of the metric's range.

    Example:
        >>> Check("class", "top1", 0.02)
        Check(output='class', metric='accuracy', threshold=0.02)
    """

    output: str | None = None
    metric: str | MetricDef | None = None
    threshold: float | None = None

    def __post_init__(self) -> None:
        if self.output is not None and (not isinstance(self.output, str) or not self.output):
            raise InvalidInputError(
                f"an output is named by a non-empty string, got {self.output!r}."
            )
        if self.metric is not None:
            definition = get_metric(self.metric)
            if not isinstance(self.metric, MetricDef):  # a name: keep the canonical one
                object.__setattr__(self, "metric", definition.name)
            if self.threshold is not None:
                option = get_threshold(definition.threshold_name).flag
                value = definition.check_threshold(self.threshold, source=option)
                object.__setattr__(self, "threshold", value)
        elif self.threshold is not None:
            # a max_drop for a metric chosen later: its unit's range is checked once it is known
            drop = get_threshold("max_drop").check(
                self.threshold, source="--max-drop", metric="the chosen task metric"
            )
            object.__setattr__(self, "threshold", drop)

    @property
    def threshold_name(self) -> str:
        """``max_drop``, ``min_snr``... (``max_drop`` when the metric is chosen later)."""
        return "max_drop" if self.metric is None else get_metric(self.metric).threshold_name


def build_checks(
    outputs: Sequence[str] | None = None,
    metrics: Sequence[str] | None = None,
    **thresholds: float | None,
) -> tuple[Check, ...]:
    """Checks from CLI-style options: ``--output``, ``--metric`` and the threshold flags.

    Every option given is used or refused. With ``metrics``, each threshold applies to the
    metrics it belongs to (``max_drop`` to every task metric) and one that fits none is
    refused. Without ``metrics``, a fidelity threshold asks for its metric (``min_snr`` ->
    snr...) and the remaining check lets :func:`choose_metric` pick per output, with
    ``max_drop`` for the task metrics it picks (omitted when only fidelity thresholds are
    given). No ``outputs`` checks every output; no ``metrics`` lets the judge choose.
    ``thresholds`` holds one keyword per row of the threshold table
    (:func:`tfcompress.bench.thresholds.thresholds`), each in its metric's unit; None values
    are ignored. One :class:`Check` per (output, metric) comes back.

    Raises:
        InvalidInputError: A threshold no requested metric uses (``min_snr`` with only
            ``accuracy``; ``max_drop`` with only fidelity metrics), an unknown metric or
            threshold keyword, or a threshold out of range (cosine > 1, agreement > 1,
            negative max_drop).

    Example:
        >>> [(c.metric, c.threshold) for c in build_checks(metrics=["top1", "snr"], max_drop=0.02)]
        [('accuracy', 0.02), ('snr', None)]
    """
    given = check_threshold_names(thresholds, where="build_checks")
    names: list[str | None] = list(dict.fromkeys(outputs or ())) or [None]
    named = [get_metric(m) for m in metrics or ()]
    if "max_drop" in given and not any(
        d.threshold_name == "max_drop" and d.unit != "fraction" for d in named
    ):
        # Only fraction metrics can take it (a metric chosen for you always is one): refuse a
        # percentage now, before any model runs, rather than after a conversion.
        parse_max_drop(given["max_drop"], source="--max-drop")
    if metrics:
        definitions = list({d.name: d for d in (get_metric(m) for m in metrics)}.values())
        for option in given:
            if not any(d.threshold_name == option for d in definitions):
                raise InvalidInputError(_unused_option(option, definitions))
        return tuple(
            Check(name, d.name, given.get(d.threshold_name)) for name in names for d in definitions
        )
    implied = [(option, implied_metric(option)) for option in given if implied_metric(option)]
    checks: list[Check] = []
    for name in names:
        if "max_drop" in given or not implied:
            checks.append(Check(name, None, given.get("max_drop")))
        checks += [Check(name, metric, given[option]) for option, metric in implied]
    return tuple(checks)


def judge_outputs_by_name(
    labels: Mapping[str, Any] | None,
    reference_outputs: Mapping[str, Any],
    candidate_outputs: Mapping[str, Any],
    *,
    checks: Sequence[Check] | None,
    settings: GateSettings,
    reference: str = "reference",
    candidate: str = "candidate",
    reference_backend: str = "",
    backend: str = "",
) -> GateReport:
    """Judge a candidate from both models' outputs, output by output, metric by metric.

    Task metrics compare each model to the labels and judge the drop (McNemar for per-sample
    correctness, a seeded paired bootstrap otherwise); fidelity metrics compare the candidate
    to the reference and judge the value (Clopper-Pearson for agreement, bootstrap for snr
    and cosine, no interval for max_abs). ``settings.mode`` applies to every verdict: strict
    judges the point value, tolerant the favourable end of the interval, proven the
    unfavourable end; a verdict without an interval uses the point value in every mode.

    The three mappings go from output name to arrays, sample axis first (an output without
    labels has none). ``checks`` None lets :func:`~tfcompress.bench.metrics.choose_metric`
    pick one metric per output. ``settings.max_drop`` is the default threshold of fraction
    task metrics; its ``metric`` is not used (the checks name the metrics). The names and
    backends label the report, which comes back without raising when a check fails.

    Raises:
        InvalidInputError: Different output names or shapes, an unknown output in a check,
            a metric that cannot mean anything for an output, a metric without a default
            threshold given none, an option that nothing uses.
        InvalidDataError: A task metric on an output without labels, labels that do not fit
            (wrong shape, class ids out of range, masks not whole numbers).

    Example:
        >>> labels = {"class": np.array([0, 1, 1])}
        >>> ref = {"class": np.eye(2)[[0, 1, 1]], "box": np.array([[1.0, 2.0]] * 3)}
        >>> cand = {"class": np.eye(2)[[0, 1, 0]], "box": np.array([[1.0, 2.1]] * 3)}
        >>> report = judge_outputs_by_name(labels, ref, cand, checks=None, settings=GateSettings())
        >>> [(v.output, v.metric, v.passed) for v in report.verdicts]
        [('class', 'accuracy', False), ('box', 'snr', True)]
    """
    refs = _outputs(reference_outputs, "reference")
    cands = _outputs(candidate_outputs, "candidate")
    label_map = {str(k): v for k, v in (labels or {}).items() if v is not None}
    samples = _check_outputs(refs, cands, label_map)
    plan = _plan(tuple(checks) if checks else (Check(),), refs, label_map, settings)
    verdicts = [
        judge_check(
            out, definition, threshold, reason, label_map.get(out), refs[out], cands[out], settings
        )
        for out, definition, threshold, reason in plan
    ]
    if settings.interval == "mcnemar" and not any(v.method == "mcnemar" for v in verdicts):
        raise InvalidInputError(
            "interval='mcnemar' compares both models' per-sample correctness against labels, "
            "but no check here is such a metric; use interval='auto' or 'bootstrap'."
        )
    return GateReport(
        tuple(verdicts), reference, candidate, reference_backend, backend, settings, samples
    )


def plan_checks(
    labels: Mapping[str, Any] | None,
    reference_outputs: Mapping[str, Any],
    *,
    checks: Sequence[Check] | None,
    settings: GateSettings,
) -> tuple[tuple[str, str, float], ...]:
    """What :func:`judge_outputs_by_name` would check, from the reference's outputs alone.

    The refusals of a gate that cannot run on this data (``--max-drop`` where no output has
    labels, a task metric without them, a metric without a default threshold) come before
    any candidate is made: a search checks its gate with this first.

    Returns:
        ``(output, metric, threshold)`` per verdict the gate would give.

    Raises:
        InvalidInputError: As :func:`judge_outputs_by_name` would, on any candidate.
        InvalidDataError: Likewise.

    Example:
        >>> plan_checks({"class": np.array([0, 1, 1])}, {"class": np.eye(2)[[0, 1, 1]]},
        ...     checks=None, settings=GateSettings())
        (('class', 'accuracy', 0.01),)
    """
    refs = _outputs(reference_outputs, "reference")
    label_map = {str(k): v for k, v in (labels or {}).items() if v is not None}
    plan = _plan(tuple(checks) if checks else (Check(),), refs, label_map, settings)
    return tuple((out, definition.name, threshold) for out, definition, threshold, _ in plan)


def _outputs(outputs: Mapping[str, Any], what: str) -> dict[str, np.ndarray]:
    if not isinstance(outputs, Mapping) or not outputs:
        raise InvalidInputError(
            f"the {what} outputs must be a non-empty mapping of output name -> array, got "
            f"{type(outputs).__name__}."
        )
    return {str(name): np.asarray(array) for name, array in outputs.items()}


def _check_outputs(
    refs: dict[str, np.ndarray], cands: dict[str, np.ndarray], labels: dict[str, Any]
) -> int:
    if set(refs) != set(cands):
        raise InvalidInputError(
            f"the reference has outputs {', '.join(refs)} but the candidate "
            f"{', '.join(cands)}; gate a compressed variant of the same model."
        )
    unknown = sorted(set(labels) - set(refs))
    if unknown:
        raise InvalidInputError(
            f"labels for {', '.join(map(repr, unknown))}, which the model does not output; its "
            f"outputs are {', '.join(map(repr, refs))}."
        )
    counts = set()
    for name, ref in refs.items():
        cand = cands[name]
        if ref.shape != cand.shape or ref.ndim == 0:
            raise InvalidInputError(
                f"output {name!r}: the reference outputs shape {ref.shape[1:]} but the candidate "
                f"{cand.shape[1:]} (over {ref.shape[:1]} vs {cand.shape[:1]} samples); gate a "
                "compressed variant of the same model on the same samples."
            )
        counts.add(len(ref))
    if len(counts) != 1 or 0 in counts:
        raise InvalidInputError(
            f"the outputs cover different numbers of samples ({sorted(counts)}); run both "
            "models on the same samples."
        )
    return counts.pop()


def _plan(
    checks: tuple[Check, ...],
    refs: dict[str, np.ndarray],
    labels: dict[str, Any],
    settings: GateSettings,
) -> list[tuple[str, MetricDef, float, str | None]]:
    # (output, metric) -> (definition, threshold, reason, named by the user)
    entries: dict[tuple[str, str], tuple[MetricDef, float | None, str | None, bool]] = {}
    # (reason, the threshold that fits) of outputs where a max_drop found no task metric
    skipped_max_drop: list[tuple[str, str]] = []
    max_drop_used = False
    for check in checks:
        if check.output is not None and check.output not in refs:
            raise InvalidInputError(
                f"no output named {check.output!r}; the model's outputs are "
                f"{', '.join(map(repr, refs))}."
            )
        for out in [check.output] if check.output is not None else list(refs):
            threshold, reason, named = check.threshold, None, check.metric is not None
            if check.metric is None:
                definition, reason = choose_metric(
                    refs[out].shape, labels.get(out), output=out, reference_outputs=refs[out]
                )
                if threshold is not None and definition.kind != "task":
                    fits = get_threshold(definition.threshold_name).flag
                    if check.output is not None:
                        raise InvalidInputError(
                            f"--max-drop applies to task metrics, but {reason}; give labels "
                            f"for it, or the threshold that fits it: {fits}."
                        )
                    skipped_max_drop.append((reason, f"{fits} for {out!r}"))
                    threshold = None
                elif threshold is not None:
                    threshold = definition.check_threshold(threshold, source="--max-drop")
                    max_drop_used = True
            else:
                definition = get_metric(check.metric)
            key = (out, definition.name)
            if key in entries:
                _, old_threshold, _, old_named = entries[key]
                if old_named and not named:
                    continue  # a metric the user named wins over the same metric chosen
                clash = old_named == named and None not in (old_threshold, threshold)
                if clash and old_threshold != threshold:
                    raise InvalidInputError(
                        f"two thresholds for {definition.name} on output {out!r}: "
                        f"{old_threshold:g} and {threshold:g}; give one."
                    )
                if old_named == named and threshold is None:
                    continue
            entries[key] = (definition, threshold, reason, named)
    if skipped_max_drop and not max_drop_used:
        raise InvalidInputError(
            "--max-drop applies to task metrics, but no output has labels to score one ("
            + "; ".join(reason for reason, _ in skipped_max_drop)
            + "); give labels, or the thresholds that fit: "
            + ", ".join(fits for _, fits in skipped_max_drop)
            + "."
        )
    order = {name: index for index, name in enumerate(refs)}
    plan = []
    for (out, _), (definition, threshold, reason, _) in sorted(
        entries.items(), key=lambda item: order[item[0][0]]
    ):
        if definition.kind == "task" and out not in labels:
            raise InvalidDataError(
                f"{definition.name} on output {out!r} compares it to labels, but there are none "
                "for it; pass its labels, or judge it by fidelity to the reference (e.g. "
                "--metric snr)."
            )
        plan.append((out, definition, _threshold(definition, threshold, out, settings), reason))
    return plan


def _threshold(
    definition: MetricDef, threshold: float | None, output: str, settings: GateSettings
) -> float:
    if threshold is not None:
        return threshold
    if definition.kind == "task" and definition.unit == "fraction":
        return settings.max_drop
    if definition.default_threshold is not None:
        return definition.default_threshold
    option = get_threshold(definition.threshold_name).flag
    unit = (
        f"the largest allowed increase of {definition.name}"
        if definition.kind == "task"
        else "the largest allowed absolute difference"
    )
    raise InvalidInputError(
        f"{definition.name} on output {output!r} is in the output's own unit, so it has no "
        f"default threshold; pass {option} ({unit}, in that unit)."
    )


def _unused_option(option: str, definitions: list[MetricDef]) -> str:
    flag = get_threshold(option).flag
    asked = ", ".join(d.name for d in definitions)
    metric = implied_metric(option)
    if metric is None:  # max_drop
        flags = ", ".join(get_threshold(d.threshold_name).flag for d in definitions)
        tasks = ", ".join(task_metric_names())
        return (
            f"{flag} applies to task metrics ({tasks}), but --metric names only fidelity "
            f"metrics ({asked}); use {flags} for those."
        )
    return (
        f"{flag} applies to the {metric} metric, but --metric names {asked}; add "
        f"{metric} to --metric or drop {flag}."
    )
