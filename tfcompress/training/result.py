"""The frozen result of QAT, pruning or clustering: artifact, scores, losses, sizes, coverage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tfcompress.models.loading import TFLiteModel
from tfcompress.quantization.artifact import MadeFile
from tfcompress.report.table import format_table
from tfcompress.training.configs import TrainingConfig, config_from_dict
from tfcompress.training.coverage import LayerCoverage
from tfcompress.training.scoring import OutputScore
from tfcompress.training.sparsity import WeightSparsity, gzip_size

if TYPE_CHECKING:
    from tfcompress.testing.report import GateReport


@dataclass(frozen=True, eq=False)
class TrainingResult(MadeFile):
    """A ``.tflite`` made by training-time compression, with the evidence of what it cost.

    Attributes:
        technique: ``qat``, ``prune`` or ``cluster``.
        options: The options that produced it, as they ran (replayable: a setting that
            could not run as asked is recorded as what ran, and ``warnings`` says so): the
            JSON data of :attr:`config`, without ``technique`` and ``version``.
        source: Name of the original model.
        recipe: Precision of the export (``float32``, ``int8``, ``float16``, ``dynamic``).
        model_content: The exported flatbuffer.
        reference_content: The original (dense, not fine-tuned) model exported at the same
            precision: the fair baseline for sizes.
        float_content: The original model as a float32 ``.tflite``.
        accuracy: Accuracy of the exported ``.tflite`` on the eval data (LiteRT), on
            the first output scored by ``accuracy`` against class ids (``binary_accuracy``
            for 0/1 labels). None when no output is (masks are scored by ``miou``; targets
            by ``mse``; unlabelled outputs against the float model: see ``scores``).
        keras_accuracy: The same accuracy of the fine-tuned Keras model before export.
        reference_accuracy: The same accuracy of the original Keras model.
        eval_samples: Eval samples scored (``eval_data``, or the held-out share of the
            training data).
        coverage: What the technique did to each layer (skipped layers with the reason).
        weights: Per-kernel sparsity and unique values measured on ``model_content``.
        train_samples: Samples fine-tuned on.
        train_seconds: Wall time of all fine-tuning.
        losses: Training loss after each epoch (all phases in order; summed over outputs).
        bridge_difference: Max abs output difference of the Keras 3 -> tf-keras bridge.
        keras_model: The fine-tuned tf-keras model (wrappers stripped), for further steps.
        warnings: Options and data that ran otherwise than asked (a held-out eval
            split), then converter warnings.
        loss_functions: The loss each output was fine-tuned with, by output name, e.g.
            ``{"cls": "sparse_categorical_crossentropy", "box": "mse (self-distillation)"}``.
        scores: Every output of the original, fine-tuned and exported models on the
            eval data, with the metrics of :mod:`tfcompress.bench.metrics`: against
            labels where there are some, else against the original float model (agreement
            or snr).
        gate: The verdict of the ``gate`` asked for (the exported ``.tflite`` against the
            original float model on the eval data), or None without one. A failed
            gate does not raise: ``gate.passed`` says it, and the CLI exits 1.
    """

    technique: str
    options: dict[str, Any]
    source: str
    recipe: str
    model_content: bytes = field(repr=False)
    reference_content: bytes = field(repr=False)
    float_content: bytes = field(repr=False)
    accuracy: float | None
    keras_accuracy: float | None
    reference_accuracy: float | None
    eval_samples: int
    coverage: tuple[LayerCoverage, ...]
    weights: tuple[WeightSparsity, ...]
    train_samples: int
    train_seconds: float
    losses: tuple[float, ...]
    bridge_difference: float
    keras_model: Any = field(repr=False, default=None)
    warnings: tuple[str, ...] = ()
    loss_functions: dict[str, str] = field(default_factory=dict)
    scores: tuple[OutputScore, ...] = ()
    gate: GateReport | None = None

    @property
    def model(self) -> TFLiteModel:
        """The exported model, ready for :func:`tfcompress.evaluate` or a runner."""
        return TFLiteModel(
            self.model_content, label=f"{self.source}_{self.technique}", verified=True
        )

    @property
    def config(self) -> TrainingConfig:
        """The options that ran, as the config ``tfcompress.<technique>(config=...)`` replays."""
        return config_from_dict(self.technique, self.options)

    @property
    def passed(self) -> bool | None:
        """Whether the gate passed; None when no gate was asked for."""
        return None if self.gate is None else self.gate.passed

    @property
    def gzip_bytes(self) -> int:
        """Bytes of the exported ``.tflite`` after gzip -9."""
        return gzip_size(self.model_content)

    @property
    def reference_gzip_bytes(self) -> int:
        """Gzip bytes of the original model exported at the same precision."""
        return gzip_size(self.reference_content)

    @property
    def float_size_bytes(self) -> int:
        """Bytes of the original model as a float32 ``.tflite``."""
        return len(self.float_content)

    @property
    def float_gzip_bytes(self) -> int:
        """Gzip bytes of the original model as a float32 ``.tflite``."""
        return gzip_size(self.float_content)

    @property
    def accuracy_drop(self) -> float | None:
        """Reference accuracy minus exported accuracy (positive = lost accuracy); None without."""
        if self.accuracy is None or self.reference_accuracy is None:
            return None
        return self.reference_accuracy - self.accuracy

    @property
    def baseline_name(self) -> str:
        """What the fine-tuned export is compared with: the original at the same precision."""
        if self.recipe == "float32":
            return "the original model as float32"
        return f"plain post-training {self.recipe} of the original model"

    @property
    def worse_than_baseline(self) -> tuple[str, ...]:
        """One sentence per output the fine-tuning made worse than :attr:`baseline_name`.

        Measured in the same run on the eval data (see
        :attr:`~tfcompress.training.scoring.OutputScore.worse_than_baseline` for the
        margins). Fine-tuning without labels on data unlike the training set is the usual
        cause; ``tfcompress quantize`` gives the baseline itself.

        Example:
            >>> print(*result.worse_than_baseline)  # doctest: +SKIP
            qat is worse than plain post-training int8 of the original model on output cls:
            agreement 77.20% against 94.00%
        """
        return tuple(
            f"{self.technique} is worse than {self.baseline_name} on output {s.output}: "
            f"{s.metric} {s.format(s.tflite)} against {s.format(s.baseline)}"
            for s in self.scores
            if s.worse_than_baseline
        )

    @property
    def skipped_layers(self) -> list[dict[str, str]]:
        """Layers the technique left alone, each with the reason."""
        return [
            {"layer": c.layer, "kind": c.kind, "reason": c.reason}
            for c in self.coverage
            if c.status == "skipped"
        ]

    @property
    def sparsity(self) -> float:
        """Share of zeros over the exported kernels of the layers the technique rewrote."""
        rows = self.rewritten_weights
        total = sum(r.size for r in rows)
        return sum(r.sparsity * r.size for r in rows) / total if total else 0.0

    @property
    def rewritten_weights(self) -> list[WeightSparsity]:
        """Exported kernels that belong to pruned or clustered layers."""
        touched = {c.layer for c in self.coverage if c.status in {"pruned", "clustered"}}
        return [w for w in self.weights if w.layer in touched]

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports (no model bytes); ``gate`` and ``passed`` with a gate."""
        data: dict[str, Any] = {
            "technique": self.technique,
            "source": self.source,
            "recipe": self.recipe,
            "options": dict(self.options),
            "size_bytes": self.size_bytes,
            "gzip_bytes": self.gzip_bytes,
            "reference_size_bytes": self.reference_size_bytes,
            "reference_gzip_bytes": self.reference_gzip_bytes,
            "float32_size_bytes": self.float_size_bytes,
            "float32_gzip_bytes": self.float_gzip_bytes,
            "sparsity": round(self.sparsity, 4),
            "accuracy": _round(self.accuracy),
            "keras_accuracy": _round(self.keras_accuracy),
            "reference_accuracy": _round(self.reference_accuracy),
            "accuracy_drop": _round(self.accuracy_drop),
            "outputs": [score.to_dict() for score in self.scores],
            "baseline": self.baseline_name,
            "worse_than_baseline": list(self.worse_than_baseline),
            "eval_samples": self.eval_samples,
            "train_samples": self.train_samples,
            "train_seconds": round(self.train_seconds, 2),
            "losses": dict(self.loss_functions),
            "epoch_losses": [round(v, 5) for v in self.losses],
            "bridge_max_abs_difference": self.bridge_difference,
            "skipped_layers": self.skipped_layers,
            "coverage": [c.to_dict() for c in self.coverage],
            "weights": [w.to_dict() for w in self.weights],
            "warnings": list(self.warnings),
        }
        if self.gate is not None:
            data |= {"gate": self.gate.to_dict(), "passed": self.gate.passed}
        return data

    def __str__(self) -> str:
        head = f"{self.source} [{self.technique} -> {self.recipe}]: "
        if self.accuracy is not None and self.reference_accuracy is not None:
            head += (
                f"accuracy {self.accuracy:.2%} (reference {self.reference_accuracy:.2%}, "
                f"{(self.accuracy_drop or 0.0) * 100:+.2f} pt drop; fine-tuned Keras "
                f"{self.keras_accuracy or 0.0:.2%})"
            )
        else:
            head += "; ".join(
                f"{s.output} {s.metric} {s.format(s.tflite)}"
                + (f" (reference {s.format(s.reference)})" if s.reference is not None else "")
                for s in self.scores
            )
        sizes = (
            f"size {self.size_bytes:,} B raw / {self.gzip_bytes:,} B gzip; same-precision dense "
            f"{self.reference_size_bytes:,} / {self.reference_gzip_bytes:,}; float32 "
            f"{self.float_size_bytes:,} / {self.float_gzip_bytes:,}"
        )
        outputs = format_table(
            [
                "output",
                "loss",
                "metric",
                "reference",
                "fine-tuned Keras",
                "exported",
                "drop",
                f"plain {self.recipe}",
            ],
            [
                [
                    s.output,
                    self.loss_functions.get(s.output, "-"),
                    s.metric if s.labelled else f"{s.metric} vs float",
                    s.format(s.reference),
                    s.format(s.keras),
                    s.format(s.tflite),
                    s.format_drop(),
                    s.format(s.baseline) + (" (better)" if s.worse_than_baseline else ""),
                ]
                for s in self.scores
            ],
        )
        coverage = format_table(
            ["layer", "kind", "status", "reason"],
            [[c.layer, c.kind, c.status, c.reason] for c in self.coverage],
        )
        weights = format_table(
            ["layer", "op", "dtype", "shape", "sparsity", "unique/channel", "M:N"],
            [
                [
                    w.layer or w.tensor[:40],
                    w.op,
                    w.dtype,
                    "x".join(str(d) for d in w.shape),
                    f"{w.sparsity:.1%}",
                    str(w.unique_values),
                    {None: "-", True: "ok", False: "no"}[w.m_by_n_ok],
                ]
                for w in self.weights
            ],
        )
        note = (
            "Zeros and shared values do not shrink the raw .tflite (weights are stored densely); "
            "they shrink the gzip size."
        )
        sections = [head, sizes, ""]
        if self.scores:
            sections += [outputs, ""]
        if self.worse_than_baseline:
            sections += [
                *(f"WORSE: {line}" for line in self.worse_than_baseline),
                f"({self.baseline_name} is better: use it, e.g. tfcompress quantize; or "
                "fine-tune on labelled data like the training set)",
                "",
            ]
        sections += [coverage, "", weights, "", note]
        if self.gate is not None:
            sections += ["", self.gate.headline(), self.gate.table()]
        return "\n".join(sections)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
