"""Phase 2: train a surviving candidate, quantize it to int8, score the deployed artifact."""

from __future__ import annotations

import time
from typing import Any

from tfcompress.selection.worker import (
    build_model,
    deployed_int8,
    failure,
    resize_images,
    scoring_backend,
    worker_identity,
)


def train_candidate(task: dict[str, Any]) -> dict[str, Any]:
    """Train with Keras (Adam, sparse categorical cross-entropy), export int8, score it.

    After the short schedule the batch-norm statistics are re-estimated on the training
    images (:func:`recalibrate_batch_norm`), so the score is the trained weights', not that
    of moving averages that barely left their initial values.

    The accuracy is that of the int8 ``.tflite`` (calibrated on the training images) run by
    the budget's backend on the validation data: the artifact that would be deployed.

    Args:
        task: Plain data: ``candidate``, ``channels``, ``num_classes``, ``seed``,
            ``x_train``, ``y_train``, ``x_val``, ``y_val`` (images at any size: resized
            here, bilinear), ``epochs``, ``batch_size``, ``learning_rate``,
            ``calibration_samples``, ``backend``, ``threads``.

    Returns:
        ``ok``, ``accuracy`` (int8, on the validation data), ``size_bytes`` (the trained
        int8 ``.tflite``), ``train_seconds``, ``loss`` (last epoch), ``worker``, ``host``,
        ``seconds``, ``finished_at``; or ``ok: False`` with a one-line ``reason``.

    Example:
        >>> train_candidate(task)["accuracy"]  # doctest: +SKIP
        0.91
    """
    import numpy as np

    from tfcompress._compat.keras import KerasFlavour, keras_module
    from tfcompress.bench.accuracy import evaluate

    started = time.perf_counter()
    stage = "build"
    try:
        keras = keras_module(KerasFlavour.KERAS3)
        resolution = int(task["candidate"]["resolution"])
        model = build_model(task)
        x_train = resize_images(task["x_train"], resolution)
        x_val = resize_images(task["x_val"], resolution)
        y_train, y_val = np.asarray(task["y_train"]), np.asarray(task["y_val"])
        stage = "training"
        model.compile(
            optimizer=keras.optimizers.Adam(float(task["learning_rate"])),
            loss="sparse_categorical_crossentropy",
            metrics=["accuracy"],
            jit_compile=False,  # XLA compiles for longer than a short schedule trains
        )
        trained = time.perf_counter()
        history = model.fit(
            x_train,
            y_train,
            epochs=int(task["epochs"]),
            batch_size=int(task["batch_size"]),
            shuffle=True,
            verbose=0,
        )
        recalibrate_batch_norm(model, x_train, keras)
        train_seconds = time.perf_counter() - trained
        stage = "int8 conversion"
        samples = task["calibration_samples"]  # None: the recipe's own
        samples = None if samples is None else min(int(samples), len(x_train))
        target, int8 = deployed_int8(task, model, x_train, samples)
        stage = "int8 evaluation"
        evaluation = evaluate(
            int8,
            (x_val, y_val),
            metric="accuracy",
            backend=scoring_backend(target, int8),
            threads=int(task["threads"]),
        )
    except Exception as error:  # the candidate fails with its reason; the search goes on
        return failure(error, stage, started)
    return {
        "ok": True,
        "accuracy": round(float(evaluation.rows[0].score), 6),
        "size_bytes": len(int8),
        "train_seconds": round(train_seconds, 3),
        "loss": round(float(history.history["loss"][-1]), 6),
        "seconds": round(time.perf_counter() - started, 3),
        "finished_at": time.time(),
        **worker_identity(),
    }


#: Training images the batch-norm statistics are re-estimated on (one forward pass).
RECALIBRATION_SAMPLES = 1024


def recalibrate_batch_norm(model: Any, x: Any, keras: Any) -> None:
    """Set every BatchNormalization's moving mean and variance from one pass over ``x``.

    keras.applications builds MobileNets with momentum 0.999: after the few hundred steps
    of a selection schedule the moving statistics have moved about a quarter of the way from
    their initial values, and evaluation (which uses them) scores near chance whatever the
    weights learned (``benchmarks/selection_batchnorm.py`` measures both scores).
    Re-estimating them once after training, as once-for-all NAS does for its sub-networks,
    gives each candidate the statistics of its own trained weights. No weight is changed.

    Args:
        model: The trained Keras 3 model.
        x: Training images (the first :data:`RECALIBRATION_SAMPLES` are used).
        keras: The Keras 3 module.
    """
    layers = [
        layer
        for layer in model._flatten_layers(include_self=False)
        if isinstance(layer, keras.layers.BatchNormalization)
    ]
    if not layers:
        return
    momenta = [layer.momentum for layer in layers]
    try:
        for layer in layers:
            layer.momentum = 0.0  # the moving statistics become this batch's statistics
        model(x[:RECALIBRATION_SAMPLES], training=True)
    finally:
        for layer, momentum in zip(layers, momenta, strict=True):
            layer.momentum = momentum
