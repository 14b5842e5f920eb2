"""The representative-data adapter shared by every quantization path (``.tflite`` and ``.onnx``).

It sits with the data it adapts, below every transform that calibrates (the converter, ONNX
Runtime's quantizer under ``targets/onnx``, LiteRT Quantizer, fine-tuned exports).

Calibration data is read with :func:`tfcompress.data.load_data`, checked against every
input of the model by name, stripped of labels and cut to a seeded random subset, the same
way whichever converter calibrates on it.

Models that are not "batch first" (a streaming model's ``state (2, N, 128)`` and scalar
``sr``) are read as :mod:`tfcompress.models.feeding` lays them out, exactly as ``benchmark``
and ``gate`` read them: ``batch_dims`` (``--batch-dim``) and ``input_values``
(``--input-value``) complete the signature. The set holds the samples batch first and keeps
its :class:`~tfcompress.models.feeding.FeedLayout`; :func:`model_feeds` gives them back in
the model's own layout, in calls of the model's static batch when it has one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

import numpy as np

from tfcompress.data import (
    DataLike,
    Dataset,
    load_data,
    validate_for_model,
    validate_for_signature,
)
from tfcompress.data.dataset import LaidOut
from tfcompress.data.sources import describe_source
from tfcompress.errors import InvalidInputError
from tfcompress.models.feeding import FeedLayout, check_input_values, feed_layout
from tfcompress.models.signature import ModelSignature

logger = logging.getLogger(__name__)

#: Representative samples that calibrate activation ranges unless a recipe says otherwise
#: (the converter, ONNX Runtime, LiteRT Quantizer, fine-tuned exports and compress).
DEFAULT_CALIBRATION_SAMPLES = 200


#: Calibration samples, batch first, with the layout the model takes them in.
CalibrationSet = LaidOut
_D = TypeVar("_D", bound=Dataset)


def model_feeds(
    data: Dataset, batch: int, names: tuple[str, ...] | None = None, *, static: bool = False
) -> Iterator[dict[str, Any]]:
    """The samples of ``data`` in calls of ``batch``, each in the model's own layout.

    A model with a static batch always gets calls of that size (the last call filled with
    the first samples again); a state's batch goes back to its own dimension and a scalar
    input becomes its one 0-d value. ``names`` names a single array's input (None:
    ``data.x`` is a dict); ``static`` makes every call ``batch`` samples (a file traced at a
    static batch).

    Example:
        >>> next(model_feeds(Dataset({"a": np.zeros((5, 2))}), 4))["a"].shape
        (4, 2)
    """
    layout = getattr(data, "layout", None)
    x = data.x
    arrays: Mapping[str, np.ndarray] = x if isinstance(x, Mapping) else {(names or ("x",))[0]: x}
    count = len(data)
    fixed = layout.static_batch if layout is not None else None
    size = fixed or batch
    for start in range(0, count, size):
        rows: Any = slice(start, start + size)
        if (fixed or static) and start + size > count:
            rows = np.arange(start, start + size) % count  # a static batch takes no fewer
        chunk = {name: np.ascontiguousarray(array[rows]) for name, array in arrays.items()}
        yield chunk if layout is None else layout.to_model(chunk)


def calibration_for(
    signature: ModelSignature,
    data: DataLike | None,
    *,
    recipe_name: str,
    needs_calibration: bool,
    limit: int,
    seed: int,
    batch_dims: Mapping[str, int] | None = None,
    input_values: Mapping[str, float] | None = None,
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
    return calibration_set(
        signature,
        data,
        limit=limit,
        seed=seed,
        batch_dims=batch_dims,
        input_values=input_values,
    )


def calibration_set(
    signature: ModelSignature,
    data: DataLike,
    *,
    limit: int,
    seed: int,
    what: str = "calibration data",
    batch_dims: Mapping[str, int] | None = None,
    input_values: Mapping[str, float] | None = None,
) -> Dataset:
    """The representative-data adapter: read ``data``, check it against every input, subsample.

    One array for a single-input model, else one array per input name (labels dropped);
    more than ``limit`` samples become a seeded random subset of ``limit`` (in order).
    The data is in the model's own layout, as ``benchmark`` and ``gate`` read it; a model
    that is not "batch first" (a state, a scalar, a static batch) gets a
    :class:`CalibrationSet` (batch first, with its layout: :func:`model_feeds`).
    ``batch_dims`` and ``input_values`` are ``--batch-dim``'s and ``--input-value``'s.

    Raises:
        InvalidDataError: ``data`` cannot be read or does not fit the model.
        InvalidInputError: A batch dimension or value for an input the model lacks.
    """
    first = signature.inputs[0]
    if isinstance(data, LaidOut) and data.layout is not None:
        same = {t.name for t in data.layout.inputs} == set(signature.input_names)
        if same:  # read already for this model (compress, quantize's --eval): batch first
            return _subset(LaidOut(data.x, layout=data.layout), limit, seed)
    layout = feed_layout(signature, batch_dims=batch_dims)
    values = check_input_values(input_values or {}, signature)
    if not layout.batch_first or values:
        return _laid_out(signature, data, layout, values, limit=limit, seed=seed, what=what)
    dataset = load_data(data, sample_rank=len(first.sample_shape), max_samples=limit)
    what = describe_source(data, what)
    if len(signature.inputs) == 1:
        dataset = validate_for_model(Dataset(dataset.x), first, what=what)
    else:  # one array per input, by name; labels are not needed to calibrate
        dataset = Dataset(validate_for_signature(Dataset(dataset.x), signature, what=what).x)
    dataset = _subset(dataset, limit, seed)
    if layout.static_batch is not None:  # calls of the model's own batch (model_feeds)
        return CalibrationSet(dataset.x, layout=layout)
    return dataset


def _laid_out(
    signature: ModelSignature,
    data: DataLike,
    layout: FeedLayout,
    values: Mapping[str, float],
    *,
    limit: int,
    seed: int,
    what: str,
) -> CalibrationSet:
    """Samples in the model's layout (as ``benchmark`` reads them), batch first, subsampled."""
    sample_rank = len(layout.inputs[0].sample_shape)
    # A stream stops after ``limit`` samples only where its arrays count them on axis 0.
    stop = limit if layout.batch_first else None
    raw = load_data(data, sample_rank=sample_rank, max_samples=stop)
    checked = validate_for_signature(
        Dataset(raw.x, aligned=False) if isinstance(raw.x, dict) else Dataset(raw.x),
        signature,
        what=describe_source(data, what),
        layout=layout,
        values=values,
    )
    return _subset(LaidOut(checked.x, layout=layout), limit, seed)


def _subset(data: _D, limit: int, seed: int) -> _D:
    """At most ``limit`` of the samples, a seeded random subset kept in order (labels dropped)."""
    if len(data) <= limit:
        return data
    chosen = np.sort(np.random.default_rng(seed).choice(len(data), limit, replace=False))
    rows = _rows(data.x, chosen)
    return LaidOut(rows, layout=data.layout) if isinstance(data, LaidOut) else Dataset(rows)


def _rows(x: np.ndarray | dict[str, np.ndarray], chosen: np.ndarray) -> Any:
    if isinstance(x, dict):
        return {name: array[chosen] for name, array in x.items()}
    return x[chosen]
