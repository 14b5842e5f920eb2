"""Inputs for latency runs without data: seeded random values of each input's dtype and shape.

Latency does not need real samples, so any model a user brings gets latency rows, as with
LiteRT's own benchmark tool. Unknown dimensions other than the batch (an audio length, a
free image size) cannot be guessed: they come from ``input_shapes`` or the run is refused.
Where each input's batch is comes from :mod:`tfcompress.models.feeding` (a state tensor
``(layers, N, units)`` is batched in the middle; a scalar gets one value per call).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from tfcompress.data import Dataset
from tfcompress.errors import InvalidDataError, InvalidInputError
from tfcompress.models.signature import ModelSignature, TensorSpec

if TYPE_CHECKING:
    from tfcompress.models.feeding import FeedLayout, TensorLayout

#: Samples drawn per input; a larger batch repeats them (see ``bench.rows``).
RANDOM_SAMPLES = 8
_SEED = 0
_INTEGER_HIGH = 100  # integer inputs (token ids, indices) draw from [0, 100)


def parse_input_shape(text: str) -> tuple[str, tuple[int | None, ...]]:
    """Parse ``NAME=1x43844x1`` (the CLI's ``--input-shape``) into a name and a shape.

    The shape is the input's full shape in the model's layout; ``N`` may stand at the batch
    dimension (then every batch size measured fits it).

    Raises:
        InvalidInputError: Not ``NAME=DxDx...`` with positive integers (and at most one N).
    """
    name, sep, dims = text.partition("=")
    parts = dims.lower().split("x") if sep else []
    numbers = [p for p in parts if p != "n"]
    if (
        not name
        or not parts
        or len(parts) - len(numbers) > 1
        or not all(p.isdigit() and int(p) > 0 for p in numbers)
    ):
        raise InvalidInputError(
            f"--input-shape {text!r} is not NAME=DIMxDIM...; write e.g. audio=1x43844x1 (the "
            "input's full shape, positive integers, N allowed at the batch dimension)."
        )
    return name, tuple(None if p == "n" else int(p) for p in parts)


def check_input_shapes(
    input_shapes: Mapping[str, Sequence[int | None]],
    batch_sizes: Sequence[int],
    layout: FeedLayout | None = None,
) -> None:
    """Refuse shapes whose batch dimension differs from a batch size that will be measured.

    The batch dimension is the input's (see :mod:`tfcompress.models.feeding`; the first one
    without a layout). ``N`` (None) there fits every batch size.

    Raises:
        InvalidInputError: A shape's batch dimension is not every measured batch size.
    """
    for name, shape in input_shapes.items():
        axis = 0
        if layout is not None and name in {t.name for t in layout.inputs}:
            axis = layout.input(name).batch_axis
            if axis is None:
                raise InvalidInputError(
                    f"input_shapes[{name!r}]: input {name!r} is a scalar (shape ()); give it a "
                    f"value with --input-value {name}=V instead (input_values= in Python)."
                )
        given = shape[axis] if len(shape) > axis else None
        if len(shape) == 0 or (
            given is not None and any(int(b) != int(given) for b in batch_sizes)
        ):
            raise InvalidInputError(
                f"input_shapes[{name!r}] has batch {given} but the batch sizes measured are "
                f"{list(batch_sizes)}; write N at the batch dimension (dimension {axis}), e.g. "
                "--input-shape audio=Nx16000, or make them equal."
            )


def random_inputs(
    signature: ModelSignature,
    *,
    name: str = "model",
    input_shapes: Mapping[str, Sequence[int | None]] | None = None,
    batch_sizes: Sequence[int] = (1,),
    layout: FeedLayout | None = None,
    values: Mapping[str, float] | None = None,
) -> Dataset:
    """Seeded random samples for every input: floats uniform in [0, 1), integers in [0, 100).

    A scalar input (a sample rate) gets one value for every call: its value from
    ``values``, else one seeded random draw (:func:`scalar_notes` says which). An input in
    ``values`` gets that value in every element.

    Raises:
        InvalidDataError: An input with an unknown dimension and no shape given for it.
        InvalidInputError: A shape or value for an input the model does not have, or a
            shape that contradicts the input's fixed dimensions.
    """
    from tfcompress.models.feeding import check_input_values, feed_layout

    shapes = dict(input_shapes or {})
    unknown = [key for key in shapes if key not in signature.input_names]
    if unknown:
        raise InvalidInputError(
            f"{name} has no input {unknown[0]!r}; its inputs are "
            f"{', '.join(signature.input_names)}."
        )
    layout = layout or feed_layout(signature, name=name)
    values = check_input_values(values or {}, signature, name)
    check_input_shapes(shapes, batch_sizes, layout)
    rng = np.random.default_rng(_SEED)
    arrays = {}
    for tensor in layout.inputs:
        if tensor.is_scalar:
            value = values.get(tensor.name)
            single = (
                _random(rng, tensor.spec, ())[:1]
                if value is None
                else np.asarray([value], tensor.spec.dtype)
            )
            arrays[tensor.name] = np.broadcast_to(single, (RANDOM_SAMPLES,))
            continue
        sample = _sample_shape(tensor, shapes.get(tensor.name), name)
        if tensor.name in values:
            filled = np.asarray(values[tensor.name], tensor.spec.dtype)
            arrays[tensor.name] = np.broadcast_to(filled, (RANDOM_SAMPLES, *sample))
        else:
            arrays[tensor.name] = _random(rng, tensor.spec, sample)
    return Dataset(arrays)


def scalar_notes(
    layout: FeedLayout, dataset: Dataset, values: Mapping[str, float], *, from_data: bool
) -> list[str]:
    """Say which value each scalar input got on every call, and where it came from."""
    notes = []
    for tensor in layout.inputs:
        if tensor.is_scalar and isinstance(dataset.x, dict) and tensor.name in dataset.x:
            value = dataset.x[tensor.name].reshape(-1)[0].item()
            if tensor.name in values:
                source = "--input-value"
            elif from_data:
                source = "from the data"
            else:
                source = f"a seeded random draw: set it with --input-value {tensor.name}=V"
            notes.append(
                f"input {tensor.name} (a scalar) was fed {value:g} on every call ({source})"
            )
    return notes


def _sample_shape(
    tensor: TensorLayout, given: Sequence[int | None] | None, name: str
) -> tuple[int, ...]:
    spec, axis = tensor.spec, tensor.batch_axis
    if given is None:
        if tensor.is_dynamic:
            example = "x".join(
                "N" if i == axis else "?" if d is None else str(d) for i, d in enumerate(spec.shape)
            )
            raise InvalidDataError(
                f"{name}: input {spec.name!r} {tensor.format_shape()} has unknown dimensions; "
                f"pass data, or its shape: --input-shape {spec.name}={example} with the ? "
                "filled in (input_shapes= in Python)."
            )
        return tuple(int(d) for d in tensor.sample_shape if d is not None)
    fits = len(given) == len(spec.shape) and all(
        d is None or (g is not None and int(g) == d)
        for i, (g, d) in enumerate(zip(given, spec.shape, strict=False))
        if i != axis
    )
    others = [g for i, g in enumerate(given) if i != axis]
    if not fits or any(g is None for g in others):
        shown = "x".join("N" if g is None else str(g) for g in given)
        raise InvalidInputError(
            f"{name}: shape {shown} does not fit input {spec.name!r} "
            f"{tensor.format_shape()}; keep its rank and its fixed dimensions (N only at the "
            "batch)."
        )
    return tuple(int(g) for g in others if g is not None)


#: The most bytes the random inputs of a run without data may take (every sample of every
#: input): 256 MiB, ten 1080p float frames; sizes are read from the file, so a 500-byte
#: file declaring a [1, 10000, 10000, 1] input is refused before anything is allocated.
MAX_RANDOM_BYTES = 256 * 2**20


def _check_memory(spec: TensorSpec, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """Refuse random inputs larger than :data:`MAX_RANDOM_BYTES`, before allocating them."""
    needed = math.prod(shape) * max(dtype.itemsize, 1)  # Python ints: no overflow
    if needed > MAX_RANDOM_BYTES:
        raise InvalidInputError(
            f"input {spec.name!r}: {RANDOM_SAMPLES} random samples of shape "
            f"{'x'.join(map(str, shape[1:]))} would take {needed:,} bytes, more than the "
            f"{MAX_RANDOM_BYTES // 2**20} MiB tfcompress makes for a run without data; pass "
            "your own data (--data) or a smaller --input-shape."
        )


def _random(rng: np.random.Generator, spec: TensorSpec, sample: tuple[int, ...]) -> np.ndarray:
    try:
        dtype = np.dtype(spec.dtype)
    except TypeError:  # a type NumPy has not (int4, string, resource): refused below
        dtype = np.dtype(object)
    shape = (RANDOM_SAMPLES, *sample)
    if dtype.kind in "fbiu":
        _check_memory(spec, shape, dtype)
    if dtype.kind == "f":
        return rng.random(shape, dtype=np.float32).astype(dtype, copy=False)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape, dtype=np.uint8).view(dtype)
    if dtype.kind in "iu":
        high = min(_INTEGER_HIGH, int(np.iinfo(dtype).max))
        return rng.integers(0, high, shape, dtype=dtype)
    raise InvalidDataError(
        f"input {spec.name!r} has dtype {spec.dtype}, for which tfcompress cannot make random "
        "values; pass data."
    )
