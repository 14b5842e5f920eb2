"""Quantization-aware training: fine-tune with fake-quant, export a full-int8 ``.tflite``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, TypedDict, TypeVar, Unpack

from tfcompress._compat.tfmot import tfmot
from tfcompress._config_fields import check_option_names
from tfcompress.data import DataLike
from tfcompress.models.loading import ModelLike
from tfcompress.testing.settings import GateSettings
from tfcompress.training.batchnorm import freeze_batchnorm as freeze
from tfcompress.training.configs import PRESERVE as PRESERVE  # its home; the CLI reads it here
from tfcompress.training.configs import QATConfig, TrainingConfig, layer_names
from tfcompress.training.coverage import LayerCoverage, quantize_with_fallback
from tfcompress.training.export import finish
from tfcompress.training.gating import GateLike
from tfcompress.training.ranges import initialize_ranges
from tfcompress.training.result import TrainingResult
from tfcompress.training.setup import Setup, fine_tune, run_technique

C = TypeVar("C", bound=TrainingConfig)
#: ``QATConfig.preserve`` -> tfmot's quantization scheme.
_SCHEMES = {None: "default", "sparsity": "prune_preserve", "clusters": "cluster_preserve"}


class TrainingOptions(TypedDict, total=False):
    """The keyword options of every training verb: the fields of ``TrainingConfig``."""

    epochs: int
    learning_rate: float
    batch_size: int
    seed: int
    freeze_batchnorm: bool


class QATOptions(TrainingOptions, total=False):
    """:func:`qat`'s keyword options: :class:`QATConfig`'s fields (a test keeps them equal)."""

    preserve: str | None


class ExportedOptions(TrainingOptions, total=False):
    """What prune and cluster add: how they export (``_ExportedConfig``'s fields)."""

    then: str | None
    qat_epochs: int
    skip_layers: Iterable[str]


def build_config(cls: type[C], config: C | None, options: Mapping[str, Any], typed: Any) -> C:
    """The config a training verb runs with: ``config``, or the one its keyword options build.

    Raises:
        InvalidArgumentTypeError: An option the verb does not take (naming those it takes).
        InvalidInputError: See :meth:`TrainingConfig.build`.
    """
    check_option_names(options, typed, taker=cls.technique)
    if "skip_layers" in options:  # any iterable of names, as the config's tuple
        options = {**options, "skip_layers": layer_names(options["skip_layers"])}
    return cls.build(config, **options)


def qat(
    model: ModelLike,
    *,
    train_data: DataLike,
    eval_data: DataLike | None = None,
    config: QATConfig | None = None,
    safe_mode: bool = True,
    gate: GateLike | None = None,
    gate_settings: GateSettings | None = None,
    isolate: bool = True,
    **options: Unpack[QATOptions],
) -> TrainingResult:
    """Quantization-aware training to a full-int8 ``.tflite`` (float32 input and output).

    Every layer tfmot can quantize is wrapped with fake-quant ops; the others stay float
    during training and are listed in ``result.coverage`` with the reason instead of
    failing (and a layer whose annotation breaks tfmot's graph transform is found, left
    float and listed the same way). Activation ranges start from a batch of training data,
    not tfmot's [-6, 6]. The model is fine-tuned, then converted through the same converter
    path as :func:`tfcompress.quantize`. A Keras 3 model is bridged to tf-keras first
    (checked to give the same outputs); the caller's model is never modified.

    Args:
        model: A Keras Sequential/Functional model (Keras 3 or tf-keras) or its path: a
            classifier, a detector with several inputs and heads, a regressor, a segmenter.
        train_data: Samples to fine-tune on (any source :func:`tfcompress.data.load_data`
            reads; several inputs as a dict or ``.npz`` keyed by input name). Labels are
            optional, per output (``y``, or ``y_<output name>``): each labelled output is
            fitted to its labels with the loss they call for, each other output to the
            float model's own outputs (self-distillation); ``result.loss_functions`` says
            which.
        eval_data: Samples to score the original, fine-tuned and exported models on: against
            labels where given, else against the float model. None holds out 20% of
            ``train_data`` (seeded; ``result.warnings`` says so).
        config: The options (``epochs``, ``learning_rate``, ``batch_size``, ``preserve``,
            ``seed``, ``freeze_batchnorm``) as one
            :class:`~tfcompress.training.configs.QATConfig`, which describes each (what
            ``result.config`` and a compress report record). Default: QATConfig().
        **options: Those options as keywords (:class:`QATOptions`), a shorthand that
            builds the same config; one given with ``config`` must agree with it.
        safe_mode: See :func:`tfcompress.models.load_model` (paths only).
        gate: Checks to judge the exported ``.tflite`` by, against the original float
            model on ``eval_data`` (labels per output where given, fidelity where not): a
            :class:`~tfcompress.testing.Check` or several, e.g.
            ``tfcompress.testing.build_checks(max_drop=0.01)`` or
            ``build_checks(min_agreement=0.99)``. Checked against the data before training;
            the verdict is ``result.gate`` (a failed gate does not raise). None: no gate.
        gate_settings: The gate's mode, confidence and interval
            (:class:`~tfcompress.testing.GateSettings`; default strict). Only with ``gate``.
        isolate: Fine-tune in a child process (the default), so a native crash of
            TensorFlow cannot take the caller down: it becomes a
            :class:`~tfcompress.errors.NativeCrashError` naming the signal, after one retry
            with ``TF_ENABLE_ONEDNN_OPTS=0`` (see :mod:`tfcompress.training.isolation`). The
            child keeps the fine-tuned Keras model: ``result.keras_model`` is None. False
            fine-tunes here, uncontained (for a debugger, or to keep ``keras_model``).

    Returns:
        The int8 model; every output's score next to the float model's (``scores``) and its
        loss (``loss_functions``); accuracy of the first class output (None without one);
        sizes and the coverage report.

    Raises:
        NativeCrashError: With ``isolate``, TensorFlow crashed in the child process (also
            after the retry with oneDNN off).
        UnsupportedModelError: Subclassed model, unknown custom layers, or tfmot's transform
            fails on the model in a way no single layer explains.
        InvalidDataError: Data or labels not matching the model; a ``gate`` task metric on
            an output without eval labels.
        InvalidInputError: A bad option (the config's check), an option that contradicts
            ``config``, or a ``gate`` that cannot apply to the model's outputs (``max_drop``
            with no labels to score a task metric...), all raised before training.
        ConversionError: The converter rejected the QAT model.

    Example:
        >>> result = tfcompress.qat(model, train_data=(x, y), eval_data=(xv, yv), epochs=1)
        >>> result.accuracy_drop, result.skipped_layers  # doctest: +SKIP
        (0.0008, [])
        >>> heads = tfcompress.qat(detector, train_data={"image": frames})  # no labels
        >>> heads.loss_functions  # doctest: +SKIP
        {'cls': 'categorical_crossentropy (self-distillation)', 'box': 'mse (self-distillation)'}
        >>> same = tfcompress.qat(model, config=QATConfig(epochs=1), train_data=(x, y))
    """
    config = build_config(QATConfig, config, options, QATOptions)

    def work(setup: Setup) -> TrainingResult:
        qat_model, coverage, seconds, losses = quantization_aware(setup, setup.legacy, config)
        return finish(setup, qat_model, config=config, recipe="int8", coverage=coverage,
                      train_seconds=seconds, losses=losses)  # fmt: skip

    return run_technique(model, config, work, train_data=train_data, eval_data=eval_data,
                         safe_mode=safe_mode, gate=gate, gate_settings=gate_settings,
                         isolate=isolate)  # fmt: skip


def quantization_aware(
    setup: Setup, model: Any, config: QATConfig
) -> tuple[Any, list[LayerCoverage], float, tuple[float, ...]]:
    """Wrap ``model`` for QAT (the scheme ``config.preserve`` asks for), calibrate, fine-tune.

    Also used after pruning and clustering (with ``preserve`` ``"sparsity"`` or
    ``"clusters"``). Activation ranges start from one batch of training samples
    (:func:`~tfcompress.training.ranges.initialize_ranges`), not tfmot's [-6, 6].
    """
    scheme = _SCHEMES[config.preserve]
    qat_model, coverage = quantize_with_fallback(model, scheme=scheme)
    if config.freeze_batchnorm:  # before the ranges: they must see inference-mode activations
        freeze(qat_model)
    initialize_ranges(qat_model, setup.train_inputs, seed=config.seed)
    seconds, losses = fine_tune(qat_model, setup, config)
    if scheme == "cluster_preserve":
        qat_model = tfmot().experimental.combine.strip_clustering_cqat(qat_model)
    return qat_model, coverage, seconds, losses


def export_preserved(
    setup: Setup,
    trained: tuple[Any, float, tuple[float, ...]],
    config: Any,
    qat_config: QATConfig,
    coverage: list[LayerCoverage],
    *,
    m_by_n: tuple[int, int] | None = None,
    **ran: Any,
) -> TrainingResult:
    """Export a pruned or clustered model (with ``then="int8"``, after the preserving QAT).

    ``qat_epochs`` 0 is post-training int8. The recorded config is what ran (with the
    ``ran`` fields), so it replays the run.
    """
    stripped, seconds, losses = trained
    if config.then == "int8" and config.qat_epochs:
        stripped, rows, more, more_losses = quantization_aware(setup, stripped, qat_config)
        coverage, seconds, losses = coverage + rows, seconds + more, losses + more_losses
    ran_config = replace(
        config,
        qat_epochs=config.qat_epochs if config.then == "int8" else 0,
        skip_layers=tuple(sorted(config.skip_layers)),
        **ran,
    )
    recipe = config.then or "float32"
    return finish(setup, stripped, config=ran_config, recipe=recipe, coverage=coverage,
                  train_seconds=seconds, losses=losses, m_by_n=m_by_n)  # fmt: skip
