"""Scores of several variants of a model on the same samples, each through its runtime.

One column per (output, metric): task metrics (accuracy, top-k, binary accuracy, MSE/MAE/
RMSE, mean IoU) score each model against the labels; fidelity metrics (SNR, cosine, max
abs, top-1 agreement) score each model against the first one, the reference, and need no
labels. With no metric named, each output gets the one
:func:`~tfcompress.bench.metrics.choose_metric` picks from its shape and labels, and the
evaluation keeps the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfcompress.bench.metrics import MetricDef, choose_metric, get_metric
from tfcompress.bench.paired import ModelRun, read_for_reference, run_model
from tfcompress.bench.task_metrics import function_metric
from tfcompress.data import DataLike
from tfcompress.data.validation import check_count
from tfcompress.errors import InvalidArgumentTypeError, InvalidDataError, InvalidInputError
from tfcompress.models.loading import ModelLike, model_name, resolve_model
from tfcompress.models.signature import model_signature
from tfcompress.report.table import format_table

MetricOption = str | Callable[[np.ndarray, np.ndarray], float] | Sequence[str] | None


@dataclass(frozen=True)
class Column:
    """One (output, metric) scored for every model.

    ``definition`` is the metric's (a user's ``callable(labels, outputs)`` is wrapped by
    :func:`~tfcompress.bench.task_metrics.function_metric`, a score where higher is
    better); ``chosen_because`` says why tfcompress chose it (None when the user named it).
    """

    output: str
    metric: str
    definition: MetricDef = field(repr=False, compare=False)
    chosen_because: str | None = None


@dataclass(frozen=True)
class EvaluationRow:
    """One model's scores (one per column) and its outputs by name, for paired analyses."""

    name: str
    backend: str
    scores: tuple[float, ...]
    size_bytes: int | None
    outputs: dict[str, np.ndarray] = field(repr=False, compare=False)

    @property
    def score(self) -> float:
        """The first column's score (the only one for a single-output model)."""
        return self.scores[0]


@dataclass(frozen=True)
class Evaluation:
    """Scores of several models on the same samples (:func:`evaluate`); row 0 is the reference."""

    columns: tuple[Column, ...]
    samples: int
    rows: tuple[EvaluationRow, ...]
    labels: dict[str, np.ndarray] | None = field(repr=False, compare=False)

    def __getitem__(self, name: str) -> EvaluationRow:
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(f"no model named {name!r}; have {[r.name for r in self.rows]}")

    @property
    def metric(self) -> str:
        """The first column's metric name."""
        return self.columns[0].metric

    @property
    def reference(self) -> EvaluationRow:
        """The first model evaluated."""
        return self.rows[0]

    def drop(self, name: str, column: int = 0) -> float:
        """How much worse ``name`` scores than the reference (positive = worse).

        For scores (accuracy) that is reference minus candidate; for errors (mse) the
        candidate minus the reference. A fidelity column (snr, agreement) already compares
        each model with the reference: its drop is only a difference of those values.
        """
        change = self.reference.scores[column] - self[name].scores[column]
        change = change if self.columns[column].definition.higher_is_better else -change
        return change + 0.0  # -0.0 reads as a loss; it is none

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports: one entry per (output, metric) for every model."""
        return {
            "metric": self.metric,
            "samples": self.samples,
            "columns": [
                {"output": c.output, "metric": c.metric, "chosen_because": c.chosen_because}
                for c in self.columns
            ],
            "rows": [
                {
                    "name": r.name,
                    "backend": r.backend,
                    self.metric: _number(r.score),
                    "drop": None if _fidelity(self.columns[0]) else _number(self.drop(r.name)),
                    "size_bytes": r.size_bytes,
                    "scores": [
                        {
                            "output": c.output,
                            "metric": c.metric,
                            "value": _number(r.scores[i]),
                            "drop": None if _fidelity(c) else _number(self.drop(r.name, i)),
                        }
                        for i, c in enumerate(self.columns)
                    ],
                }
                for r in self.rows
            ],
        }

    def __str__(self) -> str:
        several = len({c.output for c in self.columns}) > 1
        header = ["model", "backend"]
        for column in self.columns:
            title = f"{column.output} {column.metric}" if several else column.metric
            header += [title, "drop"]
        rows = []
        for row in self.rows:
            cells = [row.name, row.backend]
            for i, column in enumerate(self.columns):
                fmt = column.definition
                change = "" if _fidelity(column) else fmt.format_change(self.drop(row.name, i))
                cells += [fmt.format_value(row.scores[i]), change]
            rows.append(cells)
        lines = [format_table(header, rows), f"{self.samples} samples"]
        lines += [f"{c.output}: {c.chosen_because}" for c in self.columns if c.chosen_because]
        return "\n".join(lines)


def evaluate(
    models: ModelLike | Sequence[ModelLike] | Mapping[str, ModelLike],
    data: DataLike,
    *,
    metric: MetricOption = None,
    outputs: Sequence[str] | None = None,
    backend: str | None = None,
    threads: int = 1,
    batch_size: int | None = None,
    progress: bool = False,
    batch_dims: Mapping[str, int] | None = None,
    input_values: Mapping[str, float] | None = None,
    safe_mode: bool = True,
) -> Evaluation:
    """Score models and artifacts on the same samples, each through its real runtime.

    The signature decides how each model is fed (a scalar input gets one value per call, a
    ``(layers, N, units)`` state its batch in the middle, a static-batch model runs one call
    per sample; :mod:`tfcompress.models.feeding`). ``.tflite`` and ``.onnx`` models run in
    a worker process, where a native crash is an error, not the end of the caller.

    Args:
        models: One model, a sequence, or a mapping of display name to model. Keras models,
            SavedModels, ``.tflite``/``.onnx`` bytes, files or paths; the first is the
            reference (fidelity metrics compare the others with it).
        data: Samples, float as in training, as :func:`tfcompress.data.load_data` reads
            them; labels as ``y`` or ``y_<output name>``.
        metric: None (choose per output from its shape and labels), a metric name
            (:func:`~tfcompress.bench.metrics.metric_names`), several names, or
            ``callable(labels, outputs) -> float`` for a single-output model.
        outputs: Output names to score (default: every output).
        backend: Runner for ``.tflite`` models (default ``"cpu"``: LiteRT with XNNPACK);
            other formats run on their natural backend.
        threads: CPU threads for LiteRT runners.
        batch_size: Samples per inference call.
        progress: Draw a progress bar per model.
        batch_dims: Input (or output) name -> the dimension that is its batch, where the
            signatures cannot tell (``{"h": 1}``).
        input_values: Input name -> one value fed on every call to inputs the data lacks
            (``{"sr": 16000}``).
        safe_mode: Refuse Keras files that would run code when loaded (Lambda layers).

    Returns:
        Scores per model and (output, metric), with outputs kept for paired statistics.

    Raises:
        InvalidDataError: Data that does not fit a model (the message names the input),
            a task metric without labels, labels that do not fit the output.
        InvalidInputError: No models, an unknown metric or output, a metric that means
            nothing for an output (accuracy on a box), variants whose outputs differ, or
            ``threads``/``batch_size`` below 1.
        InvalidArgumentTypeError: A model (or ``threads``, ``batch_size``) of the wrong type.

    Example:
        >>> result = tfcompress.evaluate({"float": model, "int8": q.model}, (x_test, y_test))
        >>> result.drop("int8")  # doctest: +SKIP
        0.0016
    """
    check_count(threads, "threads", "e.g. 1, up to os.cpu_count()")
    if batch_size is not None:
        check_count(batch_size, "batch_size", "e.g. 32, or None for the runner's default")
    named = _named_models(models, safe_mode=safe_mode)
    first = next(iter(named.values()))
    reference = model_signature(first)
    dataset = read_for_reference(
        data, first, "evaluation data", batch_dims=batch_dims, input_values=input_values
    )
    runs: list[ModelRun] = [
        run_model(
            model,
            dataset,
            reference,
            name=name,
            backend=backend,
            threads=threads,
            batch_size=batch_size,
            progress=progress,
            batch_dims=batch_dims,
        )
        for name, model in named.items()
    ]
    _check_same_shapes(runs)
    labels = dataset.y if isinstance(dataset.y, dict) else None
    columns = _columns(metric, outputs, reference.output_names, runs[0].outputs, labels)
    rows = tuple(
        EvaluationRow(
            run.name,
            run.backend,
            tuple(_score(column, run, runs[0], labels) for column in columns),
            run.size_bytes,
            run.outputs,
        )
        for run in runs
    )
    return Evaluation(columns, len(dataset), rows, labels)


def _columns(
    metric: MetricOption,
    outputs: Sequence[str] | None,
    names: tuple[str, ...],
    reference_outputs: dict[str, np.ndarray],
    labels: dict[str, np.ndarray] | None,
) -> tuple[Column, ...]:
    chosen = list(dict.fromkeys(outputs or names))
    unknown = [name for name in chosen if name not in names]
    if unknown:
        raise InvalidInputError(
            f"the model has no output {unknown[0]!r}; its outputs are {', '.join(names)}."
        )
    if callable(metric):
        if len(chosen) != 1:
            raise InvalidInputError(
                f"a metric function scores one output, but the model has {len(chosen)} "
                f"({', '.join(chosen)}); pass outputs=[NAME] or metric names."
            )
        definition = function_metric(metric)
        return (Column(chosen[0], definition.name, definition),)
    if isinstance(metric, str):
        metric = [metric]
    columns = []
    for output in chosen:
        target = None if labels is None else labels.get(output)
        if metric:
            columns += [Column(output, get_metric(m).name, get_metric(m)) for m in metric]
            continue
        definition, reason = choose_metric(
            reference_outputs[output].shape,
            target,
            output=output,
            reference_outputs=reference_outputs[output],
        )
        columns.append(Column(output, definition.name, definition, reason))
    return tuple(columns)


def _score(
    column: Column, run: ModelRun, reference: ModelRun, labels: dict[str, np.ndarray] | None
) -> float:
    outputs = run.outputs[column.output]
    target = None if labels is None else labels.get(column.output)
    definition = column.definition.for_reference(reference.outputs[column.output])
    if definition.kind == "fidelity":
        return definition.score(reference.outputs[column.output], outputs, output=column.output)
    if target is None:
        raise InvalidDataError(
            f"{definition.name} compares output {column.output!r} with labels, but the data "
            f"has none for it: save them as y_{column.output} (or 'y' for a single output), "
            "or choose a fidelity metric (snr, cosine, max_abs, agreement)."
        )
    return definition.score(target, outputs, output=column.output)


def _check_same_shapes(runs: list[ModelRun]) -> None:
    first = runs[0]
    for run in runs[1:]:
        for name, array in run.outputs.items():
            if array.shape != first.outputs[name].shape:
                raise InvalidInputError(
                    f"{run.name!r} output {name!r} has shape {array.shape[1:]} but "
                    f"{first.name!r} has {first.outputs[name].shape[1:]}; compare variants of "
                    "the same model."
                )


def _fidelity(column: Column) -> bool:
    return column.definition.kind == "fidelity"


def _number(value: float) -> float | None:
    """JSON has no infinity: an infinite or NaN score is written as null."""
    return round(float(value), 6) if np.isfinite(value) else None


def _named_models(models: Any, *, safe_mode: bool = True) -> dict[str, Any]:
    if isinstance(models, Mapping):
        pairs = list(models.items())
    else:
        sequence = models if isinstance(models, list | tuple) else [models]
        pairs = [(None, m) for m in sequence]
    if not pairs:
        raise InvalidInputError("no models to evaluate; pass at least one.")
    named: dict[str, Any] = {}
    for label, model in pairs:
        try:
            loaded = resolve_model(model, safe_mode=safe_mode)
        except InvalidArgumentTypeError as error:
            where = f"model {label!r}" if label is not None else "a model"
            raise InvalidArgumentTypeError(f"{where}: {error}") from error
        name = str(label) if label is not None else model_name(loaded)
        while name in named:
            name += "'"
        named[name] = loaded
    return named
