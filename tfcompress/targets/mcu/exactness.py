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

from dataclasses import dataclass, replace
from typing import Any

from tfcompress.targets.mcu.findings import Finding
from tfcompress.targets.mcu.probe import in_child

__all__ = [
    "DEFAULT_SAMPLES",
    "Exactness",
    "OpDifference",
    "OutputDifference",
    "against_litert",
    "compare",
    "sample_inputs",
]

#: Samples compared when the user's data holds more (each runs on reference kernels twice).
DEFAULT_SAMPLES = 100
#: Differing samples rerun with every tensor kept, to find the op where they part.
_LOCATE_SAMPLES = 16
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
class OpDifference:
    """One op whose output TFLM and LiteRT computed differently (given their own inputs).

    Attributes:
        index: The op's index in the main subgraph.
        op: Its name.
        max_abs_difference: The largest difference of its output, in its own units.
    """

    index: int
    op: str
    max_abs_difference: float

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"index": self.index, "op": self.op, "max_abs_difference": self.max_abs_difference}

    def __str__(self) -> str:
        return f"{self.op} (op {self.index}) by {self.max_abs_difference:g}"


@dataclass(frozen=True)
class Exactness:
    """TFLM's outputs against LiteRT's reference kernels, on the same samples.

    Attributes:
        samples: Samples compared.
        source: Where they came from (``sample data`` or ``random inputs (seed 0)``).
        outputs: One comparison per output.
        ops: Where they part, when they differ: every op whose output differs on the
            differing samples (at most 16 rerun with all tensors kept), in op order.
    """

    samples: int
    source: str
    outputs: tuple[OutputDifference, ...]
    ops: tuple[OpDifference, ...] = ()

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
            "ops_differing": [o.to_dict() for o in self.ops],
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
            + (f"; first at {self.ops[0]}" if self.ops else "")
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


def against_litert(
    content: bytes,
    samples: list[Any],
    described: str,
    outputs: Any,
    tflm_outputs: list[Any],
    parsed: Any,
    *,
    arena: int,
    name: str,
    timeout: float | None,
) -> tuple[Exactness | None, list[Finding]]:
    """Run the samples on LiteRT's reference kernels and compare; locate any difference.

    Returns:
        ``(exactness or None when LiteRT could not run, findings)``.
    """
    import numpy as np

    reference = in_child(
        "reference_outputs",
        content,
        samples,
        what=f"running {name} on LiteRT's reference kernels",
        timeout=timeout,
    )
    if reference.failure is not None:
        return None, [
            Finding(
                "reference_failed",
                f"LiteRT's reference kernels did not run {name}: {reference.failure.message}",
                "the comparison needs LiteRT to run the model; check it with `tfcompress inspect`",
                signal=reference.failure.signal,
            )
        ]
    exactness = compare(
        [spec.name for spec, _ in outputs],
        [tensor.dtype for _, tensor in outputs],
        tflm_outputs,
        reference.value,
        len(samples[0]) if samples else 0,
        described,
    )
    if exactness.bit_exact:
        return exactness, []
    differing = sorted(
        {
            int(n)
            for mine, theirs in zip(tflm_outputs, reference.value, strict=True)
            for n in np.flatnonzero(
                (np.asarray(mine) != np.asarray(theirs)).reshape(len(mine), -1).any(axis=1)
            )
        }
    )[:_LOCATE_SAMPLES]
    subset = [np.asarray(array)[differing] for array in samples]
    exactness = replace(exactness, ops=_locate(content, subset, parsed, arena, name, timeout))
    findings = []
    if not exactness.within_one_unit:
        rounding = bool(exactness.ops) and exactness.ops[0].max_abs_difference <= 1
        fix = (
            f"the first op that differs, {exactness.ops[0]}, is one rounding step apart "
            "(TFLM's and LiteRT's kernels round differently); the ops after it grow that step: "
            "check the accuracy through TFLM (`tfcompress benchmark --backend tflm`)"
            if rounding
            else "TFLM and LiteRT disagree by more than a rounding step: run the model on the "
            "board before trusting it, and report the op to tflite-micro"
        )
        findings.append(Finding("mismatch", str(exactness), fix))
    return exactness, findings


def _locate(
    content: bytes,
    samples: list[Any],
    parsed: Any,
    arena: int,
    name: str,
    timeout: float | None,
) -> tuple[OpDifference, ...]:
    """Every op of the main subgraph whose output differs, rerun with all tensors kept."""
    import numpy as np

    graph = parsed.subgraphs[0]
    tensors = sorted({t for op in graph.operators for t in op.outputs if t >= 0})
    what = f"keeping every tensor of {name}"
    mine = in_child("tflm_tensors", content, arena, samples, tensors, what=f"{what} in TFLM",
                    timeout=timeout)  # fmt: skip
    theirs = in_child("reference_tensors", content, samples, tensors, what=f"{what} in LiteRT",
                      timeout=timeout)  # fmt: skip
    if mine.failure or theirs.failure or mine.value is None:
        return ()
    found = []
    for op in graph.operators:
        worst = 0.0
        for t in op.outputs:
            if t < 0 or t not in mine.value:
                continue
            a = np.asarray(mine.value[t]).astype(np.float64)
            b = np.asarray(theirs.value[t]).astype(np.float64)
            if a.shape == b.shape and a.size:
                worst = max(worst, float(np.abs(a - b).max()))
        if worst:
            found.append(OpDifference(op.index, op.opcode, worst))
    return tuple(found)
