"""Inputs for latency runs without data: seeded random values of each input's dtype and shape.

Latency does not need real samples, so any model a user brings gets latency rows, as with
LiteRT's own benchmark tool. Unknown dimensions other than the batch (an audio length, a
free image size) cannot be guessed: they come from ``input_shapes`` or the run is refused.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence

import numpy as np

from tfcompress.data import Dataset
from tfcompress.errors import InvalidDataError, InvalidInputError
from tfcompress.models.signature import ModelSignature, TensorSpec, format_shape

#: Samples drawn per input; a larger batch repeats them (see ``bench.rows``).
RANDOM_SAMPLES = 8
_SEED = 0
_INTEGER_HIGH = 100  # integer inputs (token ids, indices) draw from [0, 100)


def parse_input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """Parse ``NAME=1x43844x1`` (the CLI's ``--input-shape``) into a name and a shape.

    Raises:
        InvalidInputError: Not ``NAME=DxDx...`` with positive integers.

    Example:
        >>> parse_input_shape("audio=1x43844x1")
        ('audio', (1, 43844, 1))
    """
    name, sep, dims = text.partition("=")
    parts = dims.lower().split("x") if sep else []
    if not name or not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise InvalidInputError(
            f"--input-shape {text!r} is not NAME=DIMxDIM...; write e.g. audio=1x43844x1 (batch "
            "first, positive integers)."
        )
    return name, tuple(int(p) for p in parts)


def check_input_shapes(
    input_shapes: Mapping[str, Sequence[int]], batch_sizes: Sequence[int]
) -> None:
    """Refuse shapes whose batch dimension differs from a batch size that will be measured.

    Raises:
        InvalidInputError: A shape's first dimension is not every measured batch size.

    Example:
        >>> check_input_shapes({"audio": (2, 100)}, [1])
        Traceback (most recent call last):
        ...
        tfcompress.errors.InvalidInputError: input_shapes['audio'] has batch 2 but ...
    """
    for name, shape in input_shapes.items():
        if len(shape) == 0 or any(int(b) != int(shape[0]) for b in batch_sizes):
            first = int(shape[0]) if len(shape) else None
            raise InvalidInputError(
                f"input_shapes[{name!r}] has batch {first} but the batch sizes measured are "
                f"{list(batch_sizes)}; the first dimension is the batch: make them equal "
                "(e.g. --batch 1 with audio=1x16000)."
            )


def random_inputs(
    signature: ModelSignature,
    *,
    name: str = "model",
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    batch_sizes: Sequence[int] = (1,),
) -> Dataset:
    """Seeded random samples for every input: floats uniform in [0, 1), integers in [0, 100).

    Args:
        signature: The model's inputs.
        name: The model's name, for messages.
        input_shapes: Full shapes (batch first) for inputs with unknown dimensions.
        batch_sizes: The batch sizes that will be measured (checked against the shapes).

    Returns:
        :data:`RANDOM_SAMPLES` samples per input, keyed by input name, no labels.

    Raises:
        InvalidDataError: An input with an unknown dimension and no shape given for it.
        InvalidInputError: A shape for an input the model does not have, or one that
            contradicts the input's fixed dimensions.

    Example:
        >>> sig = ModelSignature((TensorSpec((None, None, 1), name="audio"),), ())
        >>> random_inputs(sig, input_shapes={"audio": (1, 16000, 1)}).x["audio"].shape
        (8, 16000, 1)
    """
    shapes = dict(input_shapes or {})
    unknown = [key for key in shapes if key not in signature.input_names]
    if unknown:
        raise InvalidInputError(
            f"{name} has no input {unknown[0]!r}; its inputs are "
            f"{', '.join(signature.input_names)}."
        )
    check_input_shapes(shapes, batch_sizes)
    rng = np.random.default_rng(_SEED)
    arrays = {
        spec.name: _random(rng, spec, _sample_shape(spec, shapes.get(spec.name), name))
        for spec in signature.inputs
    }
    return Dataset(arrays)


def _sample_shape(spec: TensorSpec, given: Sequence[int] | None, name: str) -> tuple[int, ...]:
    if given is None:
        if spec.is_dynamic:
            example = "x".join(
                "1" if i == 0 else "?" if d is None else str(d) for i, d in enumerate(spec.shape)
            )
            raise InvalidDataError(
                f"{name}: input {spec.name!r} {format_shape(spec.shape)} has unknown dimensions; "
                f"pass data, or its shape: --input-shape {spec.name}={example} with the ? "
                "filled in (input_shapes= in Python)."
            )
        return tuple(int(d) for d in spec.sample_shape if d is not None)
    fits = len(given) == len(spec.shape) and all(
        d is None or int(g) == d for g, d in zip(given[1:], spec.sample_shape, strict=False)
    )
    if not fits:
        raise InvalidInputError(
            f"{name}: shape {'x'.join(map(str, given))} does not fit input {spec.name!r} "
            f"{format_shape(spec.shape)}; keep its rank and its fixed dimensions."
        )
    return tuple(int(g) for g in given[1:])


def _check_memory(spec: TensorSpec, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """Refuse random inputs larger than this machine's memory, before allocating them."""
    needed = math.prod(shape) * max(dtype.itemsize, 1)  # Python ints: no overflow
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return  # the platform cannot say
    if needed > memory:
        raise InvalidInputError(
            f"input {spec.name!r}: {RANDOM_SAMPLES} random samples of shape "
            f"{'x'.join(map(str, shape[1:]))} need {needed} bytes, more than this machine's "
            f"{memory}; pass a smaller --input-shape or your own data."
        )


def _random(rng: np.random.Generator, spec: TensorSpec, sample: tuple[int, ...]) -> np.ndarray:
    dtype = np.dtype(spec.dtype)
    shape = (RANDOM_SAMPLES, *sample)
    _check_memory(spec, shape, dtype)
    if dtype.kind == "f":
        return rng.random(shape, dtype=np.float32).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    if dtype.kind in "iu":
        high = min(_INTEGER_HIGH, int(np.iinfo(dtype).max))
        return rng.integers(0, high, shape).astype(dtype)
    raise InvalidDataError(
        f"input {spec.name!r} has dtype {spec.dtype}, for which tfcompress cannot make random "
        "values; pass data."
    )
