"""Does the board compute what the desktop computed? TFLM against LiteRT's reference kernels.

The same samples run through TFLM (at the arena the bisection found) and through LiteRT with
its reference kernels (``BUILTIN_REF``: the kernels TFLM's were derived from), each in a
child process. Integer outputs are compared in quantized units (the output's own integers):
0 is bit-exact, 1 is one rounding step. Float outputs are compared as floats.

Samples: the user's (float, as every tfcompress data source; quantized here with each
input's scale and zero point) or, without any, seeded random values over each input's
whole integer range (a float input: uniform in [-1, 1)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_SAMPLES", "Exactness", "OutputDifference", "compare", "sample_inputs"]

#: Samples compared when the user's data holds more (each runs on reference kernels twice).
DEFAULT_SAMPLES = 100
_RANDOM_SAMPLES = 8
_SEED = 0
_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}


@dataclass(frozen=True)
class OutputDifference:
    """TFLM against LiteRT on one output.

    Attributes:
        name: The output's name.
        dtype: Its dtype in the file (``int8``; ``float32`` for a float output).
        max_abs_difference: The largest absolute difference over every sample and element,
            in quantized units for an integer output, in float for a float one.
        samples_differing: Samples where any element differs.
    """

    name: str
    dtype: str
    max_abs_difference: float
    samples_differing: int

    @property
    def units(self) -> str:
        """``quantized units`` for an integer output, ``float`` for a float one."""
        return "float" if self.dtype.startswith("float") else "quantized units"

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "name": self.name,
            "dtype": self.dtype,
            "max_abs_difference": self.max_abs_difference,
            "units": self.units,
            "samples_differing": self.samples_differing,
        }


@dataclass(frozen=True)
class Exactness:
    """TFLM's outputs against LiteRT's reference kernels, on the same samples.

    Attributes:
        samples: Samples compared.
        source: Where they came from (``sample data`` or ``random inputs (seed 0)``).
        outputs: One comparison per output.
    """

    samples: int
    source: str
    outputs: tuple[OutputDifference, ...]

    @property
    def bit_exact(self) -> bool:
        """Every output equal on every sample."""
        return all(o.max_abs_difference == 0 for o in self.outputs)

    @property
    def within_one_unit(self) -> bool:
        """Every integer output within 1 quantized unit (float outputs: within 1e-5)."""
        return all(
            o.max_abs_difference <= (1 if o.units == "quantized units" else 1e-5)
            for o in self.outputs
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "samples": self.samples,
            "source": self.source,
            "bit_exact": self.bit_exact,
            "within_one_unit": self.within_one_unit,
            "outputs": [o.to_dict() for o in self.outputs],
        }

    def __str__(self) -> str:
        if self.bit_exact:
            return (
                f"bit-exact with LiteRT's reference kernels on {self.samples} samples "
                f"({self.source})"
            )
        worst = max(self.outputs, key=lambda o: o.max_abs_difference)
        return (
            f"differs from LiteRT's reference kernels on {self.samples} samples "
            f"({self.source}): "
            f"{worst.name} by up to {worst.max_abs_difference:g} {worst.units} "
            f"({worst.samples_differing} sample(s))"
        )


def sample_inputs(
    content: bytes, source: str, sample_data: Any, *, max_samples: int = DEFAULT_SAMPLES
) -> tuple[list[Any], str]:
    """The arrays to feed, one per input in the subgraph's order, in each input's dtype.

    Args:
        content: The ``.tflite`` bytes.
        source: Its name, for messages.
        sample_data: Anything :func:`tfcompress.data.load_data` reads (float samples), or
            None for seeded random inputs.
        max_samples: The first this many samples are used.

    Returns:
        ``(arrays, description)``.

    Raises:
        InvalidDataError: Data that does not fit the model's inputs.
    """
    import numpy as np

    from tfcompress.data import load_data, validate_for_signature
    from tfcompress.models.loading import TFLiteModel
    from tfcompress.models.signature import ModelSignature, tflite_io_tensors

    model = TFLiteModel(content, label=source, verified=True)
    inputs, outputs = tflite_io_tensors(model)
    if sample_data is None:
        rng = np.random.default_rng(_SEED)
        arrays = [_random(rng, spec, tensor) for spec, tensor in inputs]
        return arrays, f"random inputs (seed {_SEED})"
    signature = ModelSignature(tuple(s for s, _ in inputs), tuple(s for s, _ in outputs))
    dataset = validate_for_signature(load_data(sample_data), signature, what="sample data")
    dataset = dataset.take(min(max_samples, len(dataset)))
    arrays = [_quantize(np.asarray(dataset.x[spec.name]), tensor) for spec, tensor in inputs]
    return arrays, "sample data"


def _shape(spec: Any, tensor: Any) -> tuple[int, ...]:
    shape = tensor.shape or tuple(1 if d is None else d for d in spec.shape)
    return tuple(int(d) for d in shape[1:])


def _random(rng: Any, spec: Any, tensor: Any) -> Any:
    shape = (_RANDOM_SAMPLES, *_shape(spec, tensor))
    if tensor.dtype in _RANGES:
        low, high = _RANGES[tensor.dtype]
        return rng.integers(low, high + 1, size=shape).astype(tensor.dtype)
    if tensor.dtype.startswith("float"):
        return rng.uniform(-1.0, 1.0, size=shape).astype(tensor.dtype)
    if tensor.dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    return rng.integers(0, 8, size=shape).astype(tensor.dtype)


def _quantize(values: Any, tensor: Any) -> Any:
    import numpy as np

    params = tensor.quantization
    if tensor.dtype in _RANGES and params is not None and params.scales:
        low, high = _RANGES[tensor.dtype]
        scale, zero = float(params.scales[0]), int(params.zero_points[0])
        quantized = np.round(values.astype(np.float64) / scale) + zero
        return np.clip(quantized, low, high).astype(tensor.dtype)
    return values.astype(tensor.dtype)


def compare(
    names: list[str],
    dtypes: list[str],
    tflm: list[Any],
    litert: list[Any],
    samples: int,
    source: str,
) -> Exactness:
    """Compare TFLM's outputs with LiteRT's, output by output.

    Example:
        >>> import numpy as np
        >>> a = [np.array([[1, 2], [3, 4]], np.int8)]
        >>> b = [np.array([[1, 2], [3, 5]], np.int8)]
        >>> compare(["y"], ["int8"], a, b, 2, "sample data").outputs[0].max_abs_difference
        1.0
    """  # fmt: skip
    import numpy as np

    found = []
    for name, dtype, mine, theirs in zip(names, dtypes, tflm, litert, strict=True):
        wide = np.float64 if dtype.startswith("float") else np.int64
        difference = np.abs(np.asarray(mine).astype(wide) - np.asarray(theirs).astype(wide))
        per_sample = (
            difference.reshape(len(difference), -1).max(axis=1) if difference.size else difference
        )
        found.append(
            OutputDifference(
                name,
                dtype,
                float(difference.max()) if difference.size else 0.0,
                int(np.count_nonzero(per_sample)),
            )
        )
    return Exactness(samples, source, tuple(found))
