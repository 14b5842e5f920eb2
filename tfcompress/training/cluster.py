"""Weight clustering with tfmot: each kernel keeps N shared values, which gzip compresses well."""

from __future__ import annotations

from typing import Any, Unpack

from tfcompress._compat.tfmot import tf_keras, tfmot
from tfcompress.data import DataLike
from tfcompress.models.loading import ModelLike
from tfcompress.testing.settings import GateSettings
from tfcompress.training.configs import ClusterConfig
from tfcompress.training.coverage import clusterable_layers
from tfcompress.training.gating import GateLike
from tfcompress.training.qat import ExportedOptions, build_config, export_preserved
from tfcompress.training.result import TrainingResult
from tfcompress.training.setup import Setup, run_technique, tune_wrapped


class ClusterOptions(ExportedOptions, total=False):
    """:func:`cluster`'s keyword options: :class:`ClusterConfig`'s fields (kept equal by a test)."""

    clusters: int


def cluster(
    model: ModelLike,
    *,
    train_data: DataLike,
    eval_data: DataLike | None = None,
    config: ClusterConfig | None = None,
    safe_mode: bool = True,
    gate: GateLike | None = None,
    gate_settings: GateSettings | None = None,
    isolate: bool = True,
    **options: Unpack[ClusterOptions],
) -> TrainingResult:
    """Cluster each kernel's weights into ``clusters`` shared values, fine-tune and export.

    The raw ``.tflite`` keeps its size (every weight is still stored); the gzip size
    shrinks because each kernel holds only ``clusters`` distinct values.

    Args:
        model: As in :func:`~tfcompress.training.qat.qat`, as are the arguments below.
        train_data: Samples to fine-tune on.
        eval_data: Samples to score on (None: 20% of ``train_data`` held out).
        config: The options as one :class:`~tfcompress.training.configs.ClusterConfig`, which
            describes each (``clusters``, and ``then`` with cluster-preserving QAT...).
        safe_mode: See :func:`tfcompress.models.load_model`.
        gate: Checks to judge the exported ``.tflite`` by.
        gate_settings: The gate's mode, confidence and interval.
        isolate: Fine-tune in a child process (the default).
        **options: The options as keywords (:class:`ClusterOptions`), as in ``qat``.

    Returns:
        The clustered model with unique values per exported kernel, sizes and accuracies.

    Raises:
        InvalidInputError: As :func:`~tfcompress.training.qat.qat`, or nothing to cluster.
        InvalidDataError, UnsupportedModelError, NativeCrashError, ConversionError: As ``qat``.

    Example:
        >>> result = tfcompress.cluster(model, train_data=train, eval_data=val, clusters=16)
        >>> max(w.unique_values for w in result.rewritten_weights)  # doctest: +SKIP
        16
    """
    config = build_config(ClusterConfig, config, options, ClusterOptions)

    def work(setup: Setup) -> TrainingResult:
        clustering = tfmot().clustering.keras
        init = clustering.CentroidInitialization.KMEANS_PLUS_PLUS
        skip = frozenset(config.skip_layers)
        coverage = clusterable_layers(setup.legacy, clusters=config.clusters, skip=skip)
        tf_keras().utils.set_random_seed(config.seed)  # the centroids' initialization

        def wrap(layer: Any) -> Any:
            return clustering.cluster_weights(
                layer, number_of_clusters=config.clusters, cluster_centroids_init=init
            )

        trained = tune_wrapped(
            setup, config, coverage, "clustered", wrap, clustering.strip_clustering
        )
        return export_preserved(setup, trained, config, config.preserving_qat(), coverage)

    return run_technique(model, config, work, train_data=train_data, eval_data=eval_data,
                         safe_mode=safe_mode, gate=gate, gate_settings=gate_settings,
                         isolate=isolate)  # fmt: skip
