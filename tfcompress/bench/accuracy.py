"""Accuracy of several models or artifacts on the same samples, each through its runtime."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfcompress.bench.metrics import MetricLike, resolve_metric
from tfcompress.data import DataLike, load_data, validate_for_model
from tfcompress.data.sources import describe_source
from tfcompress.data.validation import check_count
from tfcompress.errors import InvalidArgumentTypeError, InvalidDataError, InvalidInputError
from tfcompress.models.loading import ModelLike, TFLiteModel, model_name, resolve_model
from tfcompress.models.signature import input_spec
from tfcompress.report.table import format_table
from tfcompress.runtime import create_runner, default_backend


@dataclass(frozen=True)
class EvaluationRow:
    """One model's score; ``outputs`` keeps its per-sample float outputs for paired analyses."""

    name: str
    backend: str
    score: float
    size_bytes: int | None
    outputs: np.ndarray = field(repr=False, compare=False)


@dataclass(frozen=True)
class Evaluation:
    """Scores of several models on the same labelled samples; the first row is the reference."""

    metric: str
    samples: int
    rows: tuple[EvaluationRow, ...]
    labels: np.ndarray = field(repr=False, compare=False)

    def __getitem__(self, name: str) -> EvaluationRow:
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(f"no model named {name!r}; have {[r.name for r in self.rows]}")

    @property
    def reference(self) -> EvaluationRow:
        """The first model evaluated."""
        return self.rows[0]

    def drop(self, name: str) -> float:
        """Reference score minus the score of ``name`` (positive = lost accuracy)."""
        return self.reference.score - self[name].score

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports."""
        return {
            "metric": self.metric,
            "samples": self.samples,
            "rows": [
                {
                    "name": r.name,
                    "backend": r.backend,
                    self.metric: round(r.score, 6),
                    "drop": round(self.drop(r.name), 6),
                    "size_bytes": r.size_bytes,
                }
                for r in self.rows
            ],
        }

    def __str__(self) -> str:
        rows = [
            [r.name, r.backend, f"{r.score:.2%}", f"{self.drop(r.name) * 100:+.2f} pt"]
            for r in self.rows
        ]
        header = ["model", "backend", self.metric, "drop"]
        return f"{format_table(header, rows)}\n{self.samples} samples"


def evaluate(
    models: ModelLike | Sequence[ModelLike] | Mapping[str, ModelLike],
    data: DataLike,
    *,
    metric: MetricLike = "accuracy",
    backend: str | None = None,
    threads: int = 1,
    batch_size: int | None = None,
    progress: bool = False,
) -> Evaluation:
    """Score models and artifacts on the same labelled samples, each through its real runtime.

    Args:
        models: One model, a sequence, or a mapping of display name to model. Keras models,
            SavedModels, ``.tflite`` bytes/files or paths; the first is the reference.
        data: Labelled samples (see :func:`tfcompress.data.load_data`), float as in training.
        metric: ``"accuracy"`` (top-1), ``"top5"`` (any k) or ``callable(labels, outputs)``.
        backend: Runner for ``.tflite`` models (default ``"cpu"``: LiteRT with XNNPACK);
            Keras models always run on ``"keras"``.
        threads: CPU threads for LiteRT runners.
        batch_size: Samples per inference call.
        progress: Draw a progress bar per model.

    Returns:
        Scores per model, in order, with per-sample outputs kept for paired statistics.

    Raises:
        InvalidDataError: Data without labels, or not matching a model's input.
        InvalidInputError: No models, models with different output shapes, or ``threads``
            or ``batch_size`` below 1.
        InvalidArgumentTypeError: A model (or ``threads``, ``batch_size``) of the wrong type.

    Example:
        >>> result = tfcompress.evaluate({"float": model, "int8": q.model}, (x_test, y_test))
        >>> result.drop("int8")  # doctest: +SKIP
        0.0016
    """
    check_count(threads, "threads", "e.g. 1, up to os.cpu_count()")
    if batch_size is not None:
        check_count(batch_size, "batch_size", "e.g. 32, or None for the runner's default")
    named = _named_models(models)
    metric_name, score = resolve_metric(metric)
    first = next(iter(named.values()))
    spec = input_spec(first)
    raw = load_data(data, sample_rank=len(spec.sample_shape))
    what = describe_source(data, "evaluation data")
    dataset = validate_for_model(raw, spec, require_labels=True, what=what)
    rows: list[EvaluationRow] = []
    for name, model in named.items():
        checked = validate_for_model(dataset, input_spec(model), what=f"data for {name!r}")
        chosen = backend if isinstance(model, TFLiteModel) and backend else default_backend(model)
        options = {"threads": threads} if isinstance(model, TFLiteModel) else {}
        with create_runner(model, backend=chosen, **options) as runner:
            outputs = runner.predict(checked.x, batch_size=batch_size, progress=progress)
        _check_outputs(name, outputs, rows, dataset.y)
        size = model.size_bytes if isinstance(model, TFLiteModel) else None
        rows.append(EvaluationRow(name, chosen, score(dataset.y, outputs), size, outputs))
    return Evaluation(metric_name, len(dataset), tuple(rows), dataset.y)


def _named_models(models: Any) -> dict[str, Any]:
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
            loaded = resolve_model(model)
        except InvalidArgumentTypeError as error:
            where = f"model {label!r}" if label is not None else "a model"
            raise InvalidArgumentTypeError(f"{where}: {error}") from error
        name = str(label) if label is not None else model_name(loaded)
        while name in named:
            name += "'"
        named[name] = loaded
    return named


def _check_outputs(
    name: str, outputs: np.ndarray, previous: list[EvaluationRow], labels: np.ndarray
) -> None:
    if previous and outputs.shape != previous[0].outputs.shape:
        raise InvalidInputError(
            f"{name!r} outputs shape {outputs.shape[1:]} but {previous[0].name!r} outputs "
            f"{previous[0].outputs.shape[1:]}; compare variants of the same model."
        )
    classes = int(np.prod(outputs.shape[1:]))
    if classes > 1 and labels.max() >= classes:
        raise InvalidDataError(
            f"labels go up to {int(labels.max())} but {name!r} has {classes} outputs; check "
            "that the data belongs to this model."
        )
