"""Weight clustering with tfmot: each kernel keeps N shared values, which gzip compresses well."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from tfcompress._compat.tfmot import tf_keras, tfmot
from tfcompress.data import DataLike
from tfcompress.errors import InvalidInputError
from tfcompress.models.loading import ModelLike
from tfcompress.testing.settings import GateSettings
from tfcompress.training.configs import CONFIG_DEFAULT, ClusterConfig, layer_names
from tfcompress.training.coverage import clusterable_layers
from tfcompress.training.export import finish
from tfcompress.training.gating import GateLike, plan_gate
from tfcompress.training.isolation import run_isolated
from tfcompress.training.qat import quantization_aware
from tfcompress.training.result import TrainingResult
from tfcompress.training.setup import Setup, fine_tune, prepare

logger = logging.getLogger(__name__)


def cluster(
    model: ModelLike,
    *,
    train_data: DataLike,
    eval_data: DataLike | None = None,
    config: ClusterConfig | None = None,
    clusters: int = CONFIG_DEFAULT,
    epochs: int = CONFIG_DEFAULT,
    learning_rate: float = CONFIG_DEFAULT,
    batch_size: int = CONFIG_DEFAULT,
    then: str | None = CONFIG_DEFAULT,
    qat_epochs: int = CONFIG_DEFAULT,
    skip_layers: Iterable[str] = CONFIG_DEFAULT,
    seed: int = CONFIG_DEFAULT,
    freeze_batchnorm: bool = CONFIG_DEFAULT,
    safe_mode: bool = True,
    gate: GateLike | None = None,
    gate_settings: GateSettings | None = None,
    isolate: bool = True,
) -> TrainingResult:
    """Cluster each kernel's weights into ``clusters`` shared values, fine-tune and export.

    The raw ``.tflite`` keeps its size (every weight is still stored); the gzip size
    shrinks because each kernel holds only ``clusters`` distinct values.

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
        config: Every option below from ``clusters`` to ``freeze_batchnorm`` as one
            :class:`~tfcompress.training.configs.ClusterConfig` (what ``result.config`` and a
            compress report record). Those keyword options are a shorthand that builds the
            same config; one given with ``config`` must agree with it. Default:
            ClusterConfig().
        clusters: Distinct values per clustered kernel, 2 to 256 (default 16, a common
            choice).
        epochs: Fine-tuning epochs with clustering applied (default 1).
        learning_rate: Adam learning rate (default 1e-4).
        batch_size: Samples per step (default 32).
        then: Export precision: None (float32, the default), ``"float16"``, ``"dynamic"`` or
            ``"int8"``. ``"int8"`` runs cluster-preserving QAT for ``qat_epochs`` (0:
            post-training int8).
        qat_epochs: Epochs of cluster-preserving QAT when ``then="int8"`` (default 1).
        skip_layers: Names of layers to leave unclustered.
        seed: Seed of training, centroid initialization and calibration sampling (default 0).
        freeze_batchnorm: Keep BatchNormalization layers in inference mode while
            fine-tuning (their statistics, scale and offset fixed; the default): fine-tuning
            on data unlike the training set, or without labels, otherwise moves them and
            makes the model worse than post-training quantization. False trains them, for a
            real, representative training set (``--train-batchnorm``).
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
        The clustered model with unique values per exported kernel, sizes and accuracies.

    Raises:
        InvalidInputError: A bad option (the config's check), an option that contradicts
            ``config``, nothing to cluster, or a ``gate`` that cannot apply to the model's
            outputs (all raised before training).
        InvalidDataError: Data that does not match the model; a ``gate`` task metric on an
            output without eval labels.
        UnsupportedModelError: Subclassed model or unknown custom layers.

    Example:
        >>> result = tfcompress.cluster(model, train_data=train, eval_data=val, clusters=16)
        >>> max(w.unique_values for w in result.rewritten_weights)  # doctest: +SKIP
        16
    """
    config = ClusterConfig.build(
        config,
        clusters=clusters,
        epochs=epochs,
        learning_rate=learning_rate,
        batch_size=batch_size,
        then=then,
        qat_epochs=qat_epochs,
        skip_layers=layer_names(skip_layers),
        seed=seed,
        freeze_batchnorm=freeze_batchnorm,
    )
    planned = plan_gate(gate, gate_settings)
    if isolate:
        return run_isolated(
            model,
            config,
            safe_mode=safe_mode,
            train_data=train_data,
            eval_data=eval_data,
            gate=gate,
            gate_settings=gate_settings,
        )
    recipe = config.then or "float32"
    setup = prepare(
        model, train_data, eval_data, safe_mode=safe_mode, seed=config.seed, gate=planned
    )
    skip = frozenset(config.skip_layers)
    coverage = clusterable_layers(setup.legacy, clusters=config.clusters, skip=skip)
    names = {row.layer for row in coverage if row.status == "clustered"}
    if not names:
        raise InvalidInputError(
            f"no layer of {setup.name!r} can be clustered; clustering would change nothing."
        )
    stripped, seconds, losses = _cluster(setup, config, names)
    tuned = stripped
    if recipe == "int8" and config.qat_epochs > 0:
        tuned, qat_rows, qat_seconds, qat_losses = quantization_aware(
            setup, stripped, config.preserving_qat()
        )
        coverage += qat_rows
        seconds, losses = seconds + qat_seconds, losses + qat_losses
    ran = replace(
        config,
        qat_epochs=config.qat_epochs if recipe == "int8" else 0,
        skip_layers=tuple(sorted(skip)),
    )
    return finish(
        setup,
        tuned,
        config=ran,
        recipe=recipe,
        coverage=coverage,
        train_seconds=seconds,
        losses=losses,
    )


def _cluster(
    setup: Setup, config: ClusterConfig, names: set[str]
) -> tuple[Any, float, tuple[float, ...]]:
    clusters = config.clusters
    clustering = tfmot().clustering.keras
    init = clustering.CentroidInitialization.KMEANS_PLUS_PLUS
    logger.info("clustering %d layer(s) into %d values each", len(names), clusters)
    tf_keras().utils.set_random_seed(config.seed)

    def wrap(layer: Any) -> Any:
        if layer.name not in names:
            return layer
        return clustering.cluster_weights(
            layer, number_of_clusters=clusters, cluster_centroids_init=init
        )

    wrapped = tf_keras().models.clone_model(setup.legacy, clone_function=wrap)
    seconds, losses = fine_tune(wrapped, setup, config)
    return clustering.strip_clustering(wrapped), seconds, losses
