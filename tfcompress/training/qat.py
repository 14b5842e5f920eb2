"""Quantization-aware training: fine-tune with fake-quant, export a full-int8 ``.tflite``."""

from __future__ import annotations

import logging
from typing import Any

from tfcompress._compat.tfmot import tfmot
from tfcompress.data import DataLike
from tfcompress.models.loading import ModelLike
from tfcompress.testing.settings import GateSettings
from tfcompress.training.batchnorm import freeze_batchnorm as freeze
from tfcompress.training.configs import CONFIG_DEFAULT, QATConfig
from tfcompress.training.configs import PRESERVE as PRESERVE  # its home; the CLI reads it here
from tfcompress.training.coverage import LayerCoverage, quantize_with_fallback
from tfcompress.training.export import finish
from tfcompress.training.gating import GateLike
from tfcompress.training.ranges import initialize_ranges
from tfcompress.training.result import TrainingResult
from tfcompress.training.setup import Setup, fine_tune, run_technique

logger = logging.getLogger(__name__)

#: ``QATConfig.preserve`` -> tfmot's quantization scheme.
_SCHEMES = {None: "default", "sparsity": "prune_preserve", "clusters": "cluster_preserve"}


def qat(
    model: ModelLike,
    *,
    train_data: DataLike,
    eval_data: DataLike | None = None,
    config: QATConfig | None = None,
    epochs: int = CONFIG_DEFAULT,
    learning_rate: float = CONFIG_DEFAULT,
    batch_size: int = CONFIG_DEFAULT,
    preserve: str | None = CONFIG_DEFAULT,
    seed: int = CONFIG_DEFAULT,
    freeze_batchnorm: bool = CONFIG_DEFAULT,
    safe_mode: bool = True,
    gate: GateLike | None = None,
    gate_settings: GateSettings | None = None,
    isolate: bool = True,
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
        config: Every option below from ``epochs`` to ``freeze_batchnorm`` as one
            :class:`~tfcompress.training.configs.QATConfig` (what ``result.config`` and a
            compress report record). Those keyword options are a shorthand that builds the
            same config; one given with ``config`` must agree with it. Default: QATConfig().
        epochs: Fine-tuning epochs (default 1; 1-2 are usually enough from a trained model).
        learning_rate: Adam learning rate (default 1e-4); keep it small, the model is
            already trained.
        batch_size: Samples per step (default 32).
        preserve: ``"sparsity"`` keeps the zeros of a pruned model (pruning-preserving QAT),
            ``"clusters"`` keeps shared weights of a clustered model; None (the default) for
            plain QAT.
        seed: Seed of training and calibration sampling (default 0).
        freeze_batchnorm: Keep BatchNormalization layers in inference mode while
            fine-tuning (their statistics, scale and offset fixed; the default): fine-tuning
            on data unlike the training set, or without labels, otherwise moves them and
            makes the model worse than post-training quantization. False trains them, for a
            real, representative training set (``--no-freeze-batchnorm``).
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
    config = QATConfig.build(
        config,
        epochs=epochs,
        learning_rate=learning_rate,
        batch_size=batch_size,
        preserve=preserve,
        seed=seed,
        freeze_batchnorm=freeze_batchnorm,
    )

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


def then_int8(
    setup: Setup, stripped: Any, config: Any, qat_config: QATConfig, coverage: list[LayerCoverage]
) -> tuple[Any, list[LayerCoverage], float, tuple[float, ...]]:
    """After pruning or clustering with ``then="int8"``: the QAT that keeps zeros or clusters.

    Returns ``stripped`` unchanged (no rows, no time) when the export is not int8 or
    ``qat_epochs`` is 0 (post-training int8).
    """
    if config.then != "int8" or config.qat_epochs == 0:
        return stripped, coverage, 0.0, ()
    tuned, rows, seconds, losses = quantization_aware(setup, stripped, qat_config)
    return tuned, coverage + rows, seconds, losses
