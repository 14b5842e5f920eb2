"""BatchNormalization frozen while fine-tuning: statistics that cannot drift to unlike data.

Self-distillation and fine-tuning often run on data unlike the training set (a user's own
images, label-free frames). A BatchNormalization layer in training mode normalizes with the
statistics of those batches and moves its moving statistics towards them, which changes what
the model computes: on a real classifier, fine-tuning the float model itself on such data
kept 99.5% agreement with the original with BatchNorm frozen, 76.7% with it trainable. So the
fine-tuning loop (:func:`tfcompress.training.setup.fine_tune`) and QAT's range pass freeze
them unless ``freeze_batchnorm=False``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from tfcompress._compat.tfmot import tf_keras

logger = logging.getLogger(__name__)


def freeze_batchnorm(model: Any) -> int:
    """Put every BatchNormalization layer of ``model`` (wrapped ones too) in inference mode.

    A tf-keras BatchNormalization layer that is not trainable normalizes with its moving
    statistics even in a training-mode call and updates nothing; tfmot's wrappers
    (``QuantizeWrapperV2``, pruning and clustering wrappers) call their inner layer, which
    keeps its own ``trainable``, while the wrapper's own quantizer ranges still train.

    Returns:
        How many layers were frozen.

    Example:
        >>> freeze_batchnorm(qat_model)  # doctest: +SKIP
        4
    """
    batchnorm = tf_keras().layers.BatchNormalization
    frozen = 0
    for layer in _layers(model):
        if isinstance(layer, batchnorm) and layer.trainable:
            layer.trainable = False
            frozen += 1
    if frozen:
        logger.info("froze %d BatchNormalization layer(s) for fine-tuning", frozen)
    return frozen


def _layers(model: Any) -> Iterator[Any]:
    """Every layer of ``model``, descending into nested models and tfmot's wrappers."""
    stack = list(getattr(model, "layers", ()))
    while stack:
        layer = stack.pop()
        yield layer
        stack.extend(getattr(layer, "layers", ()))
        inner = getattr(layer, "layer", None)
        if inner is not None:
            stack.append(inner)
