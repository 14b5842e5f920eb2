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
from tfcompress.training.gating import GateLike
from tfcompress.training.qat import then_int8
from tfcompress.training.result import TrainingResult
from tfcompress.training.setup import Setup, fine_tune, run_technique

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
        model: As in :func:`~tfcompress.training.qat.qat` (so are the data and gate options).
        train_data: Samples to fine-tune on.
        eval_data: Samples to score on (None: 20% of ``train_data`` held out).
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
        freeze_batchnorm: Keep BatchNormalization in inference mode (default True).
        safe_mode: See :func:`tfcompress.models.load_model`.
        gate: Checks to judge the exported ``.tflite`` by.
        gate_settings: The gate's mode, confidence and interval.
        isolate: Fine-tune in a child process (the default); False fine-tunes here, uncontained.

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

    def work(setup: Setup) -> TrainingResult:
        skip = frozenset(config.skip_layers)
        coverage = clusterable_layers(setup.legacy, clusters=config.clusters, skip=skip)
        names = {row.layer for row in coverage if row.status == "clustered"}
        if not names:
            raise InvalidInputError(
                f"no layer of {setup.name!r} can be clustered; clustering would change nothing."
            )
        stripped, seconds, losses = _cluster(setup, config, names)
        qat_config = config.preserving_qat()
        tuned, coverage, more, more_losses = then_int8(
            setup, stripped, config, qat_config, coverage
        )
        ran = replace(
            config,
            qat_epochs=config.qat_epochs if config.then == "int8" else 0,
            skip_layers=tuple(sorted(skip)),
        )
        return finish(setup, tuned, config=ran, recipe=config.then or "float32",
                      coverage=coverage, train_seconds=seconds + more,
                      losses=losses + more_losses)  # fmt: skip

    return run_technique(model, config, work, train_data=train_data, eval_data=eval_data,
                         safe_mode=safe_mode, gate=gate, gate_settings=gate_settings,
                         isolate=isolate)  # fmt: skip


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
