"""Zoo conversions run in worker processes, so test_zoo's slow tests share two cores.

A conversion is mostly single-threaded (tracing and the converter's passes), and its time
grows with the graph, not the resolution: the int8 conversions take minutes one after
another, about half of that two at a time.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

import numpy as np

WORKERS = 2


def int8_run(name: str, x: np.ndarray) -> dict[str, Any]:
    """Convert ``name`` (min resolution, 1 channel, 10 classes, width 0.35) to int8 and run it.

    Returns:
        The int8 file's precision and MACs, the float file's MACs, and probabilities of 8 samples.
    """
    import tfcompress
    from tfcompress.bench.size import measure_size
    from tfcompress.models import TFLiteModel
    from tfcompress.zoo import create_model

    side = x.shape[1]
    model = create_model(name, input_shape=(side, side, 1), num_classes=10, width_multiplier=0.35)
    result = tfcompress.quantize(
        model, recipe="int8", representative_data=x, calibration_samples=32
    )
    size = measure_size(TFLiteModel(result.model_content))
    with tfcompress.create_runner(result.model_content, backend="cpu") as runner:
        probabilities = runner.predict(x[:8])
    return {
        "precision": size.precision,
        "macs": size.macs,
        "float_macs": measure_size(TFLiteModel(result.reference_content)).macs,
        "probabilities": probabilities,
        "input_shape": (side, side, 1),
    }


def start(
    jobs: list[tuple[str, Any, tuple[Any, ...]]],
) -> tuple[ProcessPoolExecutor, dict[str, Future]]:
    """Submit ``(key, function, args)`` jobs, longest first, to a spawn pool of two workers."""
    pool = ProcessPoolExecutor(WORKERS, mp_context=multiprocessing.get_context("spawn"))
    return pool, {key: pool.submit(function, *args) for key, function, args in jobs}
