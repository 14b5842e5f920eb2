"""Training-time compression with tfmot: QAT, pruning and clustering, for Keras 3 and tf-keras.

tfmot only rewrites tf-keras models; Keras 3 models are bridged (rebuilt with the same
weights and checked) first. Every function fine-tunes a copy (any number of inputs and
outputs; each output on its labels with the loss they call for, or self-distilled from the
float model without labels), exports a ``.tflite`` through the same converter path as
post-training quantization, and scores every output. What each one runs with is data:
:class:`QATConfig`, :class:`PruneConfig`, :class:`ClusterConfig` (:mod:`.configs`).

Importing this package (or :mod:`.configs`, which the command line reads its defaults from)
imports no numpy and no TensorFlow: the names below load on first use (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfcompress._lazy import lazy_exports

# public name -> the module that defines it, imported on first use (PEP 562). The verbs
__all__ = [
    "TRAINING_CONFIGS",
    "ClusterConfig",
    "PruneConfig",
    "QATConfig",
    "config_from_dict",
    "LayerCoverage",
    "OutputScore",
    "TrainingResult",
    "WeightSparsity",
    "cluster",
    "prune",
    "qat",
]
__getattr__, __dir__ = lazy_exports(__name__)

if TYPE_CHECKING:
    from tfcompress.training.cluster import cluster
    from tfcompress.training.configs import (
        TRAINING_CONFIGS,
        ClusterConfig,
        PruneConfig,
        QATConfig,
        config_from_dict,
    )
    from tfcompress.training.coverage import LayerCoverage
    from tfcompress.training.prune import prune
    from tfcompress.training.qat import qat
    from tfcompress.training.result import TrainingResult
    from tfcompress.training.scoring import OutputScore
    from tfcompress.training.sparsity import WeightSparsity
