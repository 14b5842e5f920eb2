"""The representative-data adapter shared by every quantization path (``.tflite`` and ``.onnx``).

It sits with the data it adapts, below every transform that calibrates (the converter, ONNX
Runtime's quantizer under ``targets/onnx``, LiteRT Quantizer, fine-tuned exports).

Calibration data is read with :func:`tfcompress.data.load_data`, checked against every
input of the model by name, stripped of labels and cut to a seeded random subset, the same
way whichever converter calibrates on it.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from tfcompress.data import (
    DataLike,
    Dataset,
    load_data,
    validate_for_model,
    validate_for_signature,
)
from tfcompress.data.sources import describe_source
from tfcompress.errors import InvalidInputError
from tfcompress.models.signature import ModelSignature

logger = logging.getLogger(__name__)

#: Representative samples that calibrate activation ranges unless a recipe says otherwise
#: (the converter, ONNX Runtime, LiteRT Quantizer, fine-tuned exports and compress).
DEFAULT_CALIBRATION_SAMPLES = 200


def calibration_for(
    signature: ModelSignature,
    data: DataLike | None,
    *,
    recipe_name: str,
    needs_calibration: bool,
    limit: int,
    seed: int,
) -> Dataset | None:
    """The calibration set a recipe needs, or None when it calibrates nothing.

    Shared by the ``.tflite`` and ``.onnx`` paths.

    Raises:
        InvalidInputError: The recipe calibrates and ``data`` is None.
        InvalidDataError: ``data`` does not fit the model.
    """
    if not needs_calibration:
        if data is not None:
            logger.debug("recipe %s needs no calibration; representative data unused", recipe_name)
        return None
    if data is None:
        raise InvalidInputError(
            f"recipe {recipe_name!r} calibrates activation ranges: pass representative_data "
            "(--data CALIB.npz) with a few hundred typical samples."
        )
    return calibration_set(signature, data, limit=limit, seed=seed)


def calibration_set(
    signature: ModelSignature,
    data: DataLike,
    *,
    limit: int,
    seed: int,
    what: str = "calibration data",
) -> Dataset:
    """The representative-data adapter: read ``data``, check it against every input, subsample.

    One array for a single-input model, else one array per input name (labels dropped);
    more than ``limit`` samples become a seeded random subset of ``limit`` (in order).

    Args:
        signature: The model's inputs.
        data: Any source :func:`tfcompress.data.load_data` reads.
        limit: Samples kept at most.
        seed: Seed of the subset.
        what: How to call the data in messages.

    Returns:
        The samples, without labels.

    Raises:
        InvalidDataError: ``data`` cannot be read or does not fit the model.

    Example:
        >>> data = calibration_set(model_signature(model), "calib.npz", limit=200, seed=0)
        ... # doctest: +SKIP
    """
    first = signature.inputs[0]
    dataset = load_data(data, sample_rank=len(first.sample_shape), max_samples=limit)
    what = describe_source(data, what)
    if len(signature.inputs) == 1:
        dataset = validate_for_model(Dataset(dataset.x), first, what=what)
    else:  # one array per input, by name; labels are not needed to calibrate
        dataset = Dataset(validate_for_signature(Dataset(dataset.x), signature, what=what).x)
    if len(dataset) > limit:
        chosen = np.sort(np.random.default_rng(seed).choice(len(dataset), limit, replace=False))
        dataset = Dataset(_rows(dataset.x, chosen))
    return dataset


def _rows(x: np.ndarray | dict[str, np.ndarray], chosen: np.ndarray) -> Any:
    if isinstance(x, dict):
        return {name: array[chosen] for name, array in x.items()}
    return x[chosen]
