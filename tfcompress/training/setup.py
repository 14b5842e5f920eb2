"""What every training-time technique does first and in the middle: check, bridge, fine-tune."""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfcompress._compat.bridge import ensure_graph_model, to_tf_keras
from tfcompress._compat.tfmot import tf_keras
from tfcompress.data import DataLike, Dataset, load_data, validate_for_model
from tfcompress.errors import InvalidDataError, InvalidInputError, UnsupportedModelError
from tfcompress.models.loading import ModelLike, SavedModelDir, TFLiteModel, model_name
from tfcompress.models.loading import resolve_model as _resolve
from tfcompress.models.signature import input_spec

logger = logging.getLogger(__name__)

BRIDGE_SAMPLES = 32


@dataclass(frozen=True, eq=False)
class Setup:
    """A checked model and data, ready for tfmot.

    Attributes:
        original: The model as the user gave it (Keras 3 or tf-keras), never modified.
        legacy: A tf-keras copy with the same weights, the one tfmot rewrites.
        train: Labelled training samples, shaped and typed for the model.
        val: Labelled validation samples.
        name: The model's name.
        bridge_difference: Max abs output difference between ``original`` and ``legacy``.
        probabilities: Whether the model outputs probabilities (else logits).
    """

    original: Any = field(repr=False)
    legacy: Any = field(repr=False)
    train: Dataset = field(repr=False)
    val: Dataset = field(repr=False)
    name: str
    bridge_difference: float
    probabilities: bool


@dataclass(frozen=True)
class TrainingOptions:
    """How the fine-tuning runs (shared by QAT, pruning and clustering)."""

    epochs: int
    batch_size: int
    learning_rate: float
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidInputError(f"{name} must be a positive integer, got {value!r}.")
        if not (isinstance(self.learning_rate, int | float) and 0 < self.learning_rate < 1):
            raise InvalidInputError(
                f"learning_rate must lie in (0, 1), got {self.learning_rate!r}; fine-tuning "
                "usually wants 1e-4 to 1e-3."
            )

    def steps(self, samples: int) -> int:
        """Optimizer steps over ``samples`` training samples."""
        return math.ceil(samples / self.batch_size) * self.epochs


def prepare(
    model: ModelLike, train_data: DataLike, val_data: DataLike, *, safe_mode: bool = True
) -> Setup:
    """Load and check the model and both datasets, then bridge the model to tf-keras.

    Args:
        model: A Keras model (either flavour) or a path to one.
        train_data: Labelled samples to fine-tune on.
        val_data: Labelled samples to measure accuracy on.
        safe_mode: See :func:`tfcompress.models.load_model`.

    Returns:
        The checked inputs.

    Raises:
        UnsupportedModelError: Not a Keras Sequential/Functional model, or it cannot be bridged.
        InvalidDataError: Data without labels or not matching the model.
    """
    loaded = _resolve(model, safe_mode=safe_mode)
    if isinstance(loaded, TFLiteModel | SavedModelDir):
        raise UnsupportedModelError(
            f"{model_name(loaded)} is not a Keras model; training-time compression fine-tunes "
            "weights, so pass the Keras model (.keras/.h5) it came from."
        )
    ensure_graph_model(loaded)
    spec = input_spec(loaded)
    classes = _num_classes(loaded)
    rank = len(spec.sample_shape)
    train = validate_for_model(
        load_data(train_data, sample_rank=rank),
        spec,
        require_labels=True,
        num_classes=classes,
        what="training data",
    )
    val = validate_for_model(
        load_data(val_data, sample_rank=rank),
        spec,
        require_labels=True,
        num_classes=classes,
        what="validation data",
    )
    legacy, difference = to_tf_keras(loaded, train.x[:BRIDGE_SAMPLES])
    outputs = np.asarray(legacy(train.x[:BRIDGE_SAMPLES], training=False))
    return Setup(
        loaded,
        legacy,
        train,
        val,
        model_name(loaded),
        difference,
        _looks_like_probabilities(outputs),
    )


def fine_tune(
    model: Any,
    setup: Setup,
    options: TrainingOptions,
    *,
    callbacks: list[Any] | None = None,
) -> tuple[float, tuple[float, ...]]:
    """Compile ``model`` (a tf-keras model) with Adam and fit it on ``setup.train``.

    Returns:
        Wall seconds and the training loss after each epoch.
    """
    keras2 = tf_keras()
    keras2.utils.set_random_seed(options.seed)
    classes = _num_classes(model)
    if classes is None or classes == 1:
        loss = keras2.losses.BinaryCrossentropy(from_logits=not setup.probabilities)
    else:
        loss = keras2.losses.SparseCategoricalCrossentropy(from_logits=not setup.probabilities)
    model.compile(optimizer=keras2.optimizers.Adam(options.learning_rate), loss=loss)
    start = time.perf_counter()
    history = model.fit(
        setup.train.x,
        setup.train.y,
        epochs=options.epochs,
        batch_size=options.batch_size,
        callbacks=callbacks or [],
        shuffle=True,
        verbose=0,
    )
    seconds = time.perf_counter() - start
    losses = tuple(float(v) for v in history.history.get("loss", []))
    if losses and not all(math.isfinite(v) for v in losses):
        raise InvalidDataError(
            f"fine-tuning diverged (loss {losses[-1]}); lower learning_rate or check the labels."
        )
    logger.info("fine-tuned %d epoch(s) in %.1fs, loss %s", options.epochs, seconds, losses)
    return seconds, losses


def _num_classes(model: Any) -> int | None:
    shape = model.outputs[0].shape if getattr(model, "outputs", None) else None
    if shape is None or len(shape) != 2 or shape[-1] is None:
        raise UnsupportedModelError(
            f"model {model_name(model)!r} does not output one score vector per sample; "
            "training-time compression fine-tunes classifiers with a (batch, classes) output."
        )
    return int(shape[-1])


def _looks_like_probabilities(outputs: np.ndarray) -> bool:
    if outputs.ndim != 2 or outputs.size == 0:
        return False
    if outputs.min() < 0 or outputs.max() > 1:
        return False
    return outputs.shape[1] == 1 or bool(np.allclose(outputs.sum(axis=1), 1.0, atol=1e-3))
