"""Does the board compute what the desktop computed? TFLM against LiteRT's reference kernels.

The same samples (the user's, quantized with each input's scale and zero point, or seeded
random values over each input's range; one invocation per sample at the file's own shape)
run through TFLM and LiteRT's ``BUILTIN_REF`` kernels, each in a child; integer outputs are
compared in quantized units, float ones as floats (docs/mcu.md, "What it checks", 4).
Nothing is allocated from declared sizes before they are checked against
:data:`MAX_IO_BYTES`; the samples compared are as many as fit in :data:`MAX_SAMPLE_BYTES`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from tfcompress.targets.mcu.findings import Finding
from tfcompress.targets.mcu.ops import REQUANTIZE, op_refusal
from tfcompress.targets.mcu.probe import in_child

#: Samples compared when the user's data holds more (each runs on reference kernels twice).
DEFAULT_SAMPLES = 100
#: The most bytes one invocation's inputs and outputs may declare together: 64 MiB, eight
#: times the largest RAM a microcontroller board carries (8 MiB of PSRAM); a model past it
#: is a finding, before anything of that size is made.
MAX_IO_BYTES = 64 * 2**20
#: The most bytes the compared samples' inputs and outputs take together: fewer samples
#: are compared where more would not fit (at least one).
MAX_SAMPLE_BYTES = 64 * 2**20
#: Differing samples rerun with every tensor kept, to find the op where they part.
_LOCATE_SAMPLES = 16
_RANDOM_SAMPLES = 8
_SEED = 0
_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}
# Types a sample can be made in and TFLM's interpreter takes or gives (not int4, string...).
_FEEDABLE = frozenset(
    {"bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
     "float16", "float32", "float64"}
)  # fmt: skip


@dataclass(frozen=True)
class OutputDifference:
    """TFLM against LiteRT on one output.

    Attributes:
        dtype: Its dtype in the file (``int8``; ``float32`` for a float output).
        max_abs_difference: The largest absolute difference over every sample and element,
            in quantized units for an integer output, in float for a float one.
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
        return {**asdict(self), "units": self.units}


@dataclass(frozen=True)
class OpDifference:
    """One op whose output TFLM and LiteRT computed differently (given their own inputs).

    Attributes:
        index: The op's index in the main subgraph.
        max_abs_difference: The largest difference of its output, in its own units.
    """

    index: int
    op: str
    max_abs_difference: float

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.op} (op {self.index}) by {self.max_abs_difference:g}"


@dataclass(frozen=True)
class Exactness:
    """TFLM's outputs against LiteRT's reference kernels, on the same samples.

    Attributes:
        source: Where they came from (``sample data`` or ``random inputs (seed 0)``).
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
        """JSON form (``ops`` as ``ops_differing``)."""
        data, outputs = asdict(self), [o.to_dict() for o in self.outputs]
        exact = {"bit_exact": self.bit_exact, "within_one_unit": self.within_one_unit}
        ops = list(data.pop("ops"))
        return {**data, **exact, "outputs": outputs, "ops_differing": ops}

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


def io_findings(inputs: Any, outputs: Any) -> list[Finding]:
    """Inputs and outputs no sample can be made for: a type NumPy has not, or too large."""
    found = []
    for role, pairs in (("input", inputs), ("output", outputs)):
        for spec, tensor in pairs:
            if tensor.dtype not in _FEEDABLE:
                found.append(
                    Finding(
                        "io_type",
                        f"{role} {spec.name!r} is of type {tensor.dtype}: TFLM's interpreter "
                        "cannot be given or give back a tensor of that type",
                        f"give the model int8 inputs and outputs: {REQUANTIZE}; move what "
                        "needs other types into the firmware",
                    )
                )
    declared = sum(io_bytes(t) for _, t in (*inputs, *outputs))
    if declared > MAX_IO_BYTES:
        found.append(
            Finding(
                "too_large",
                f"its inputs and outputs declare {declared:,} B per invocation, more than "
                f"{MAX_IO_BYTES // 2**20} MiB (eight times the RAM of the largest "
                "microcontroller boards): nothing was run",
                "a microcontroller needs inputs and outputs of kilobytes: make the model's "
                "inputs smaller (fewer pixels, shorter windows)",
            )
        )
    return found


def io_bytes(tensor: Any) -> int:
    """Bytes one invocation of ``tensor`` takes, from its declared shape (Python ints)."""
    import math

    import numpy as np

    size = np.dtype(tensor.dtype).itemsize if tensor.dtype in _FEEDABLE else 1
    return math.prod(max(1, int(d)) for d in (tensor.shape or ())) * size


def sample_inputs(
    content: bytes, source: str, sample_data: Any, *, max_samples: int = DEFAULT_SAMPLES
) -> tuple[list[Any], str]:
    """The arrays to feed, one per input in the subgraph's order, in each input's dtype.

    ``sample_data``: anything :func:`tfcompress.data.load_data` reads (float samples), or
    None for seeded random inputs; the first ``max_samples`` are used. InvalidDataError:
    data that does not fit the model's inputs (``source`` names the model).
    """
    import numpy as np

    from tfcompress.data import load_data, validate_for_signature
    from tfcompress.errors import InvalidDataError
    from tfcompress.models.loading import TFLiteModel
    from tfcompress.models.signature import ModelSignature, tflite_io_tensors

    model = TFLiteModel(content, label=source, verified=True)
    inputs, outputs = tflite_io_tensors(model)
    per_sample = sum(io_bytes(t) for _, t in (*inputs, *outputs))
    count = max(1, min(max_samples, MAX_SAMPLE_BYTES // max(1, per_sample)))
    if sample_data is None:
        rng = np.random.default_rng(_SEED)
        count = min(count, _RANDOM_SAMPLES)
        arrays = [random_values(rng, (count, *_shape(spec, t)), t.dtype) for spec, t in inputs]
        return arrays, f"random inputs (seed {_SEED})"
    signature = ModelSignature(tuple(s for s, _ in inputs), tuple(s for s, _ in outputs))
    dataset = validate_for_signature(load_data(sample_data), signature, what="sample data")
    batch = max((_shape(spec, t) or (1,))[0] for spec, t in inputs) if inputs else 1
    if len(dataset) < batch:
        raise InvalidDataError(
            f"sample data has {len(dataset)} sample(s) but {source} runs {batch} at a time "
            f"(its batch): give at least {batch}."
        )
    count = min(count, len(dataset) // batch)
    dataset = dataset.take(count * batch)
    arrays = [
        _quantize(np.asarray(dataset.x[spec.name]), t).reshape(count, *_shape(spec, t))
        for spec, t in inputs
    ]
    return arrays, "sample data"


def _shape(spec: Any, tensor: Any) -> tuple[int, ...]:
    """One invocation's shape: the file's own, batch included."""
    shape = tensor.shape or tuple(1 if d is None else d for d in spec.shape)
    return tuple(max(1, int(d)) for d in shape)


def random_values(rng: Any, shape: tuple[int, ...], dtype: str) -> Any:
    """Seeded values over the dtype's whole range, made in the dtype (no wider copy)."""
    import numpy as np

    if dtype in _RANGES:
        low, high = _RANGES[dtype]
        return rng.integers(low, high + 1, size=shape, dtype=dtype)
    if dtype.startswith("float"):
        return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
    if dtype == "bool":
        return rng.integers(0, 2, size=shape, dtype=np.uint8).view(bool)
    return rng.integers(0, 8, size=shape, dtype=dtype)


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
    timeout: Any,
) -> tuple[Exactness | None, list[Finding]]:
    """Run the samples on LiteRT's reference kernels and compare; locate any difference."""
    import numpy as np

    reference = in_child(
        "reference_outputs",
        content,
        samples,
        what=f"running {name} on LiteRT's reference kernels",
        timeout=timeout,
    )
    if reference.failure is not None:
        refused = op_refusal(reference.failure.message)
        if refused is None:
            return None, [
                Finding(
                    "reference_failed",
                    f"LiteRT's reference kernels did not run {name}: {reference.failure.message}",
                    "the comparison needs LiteRT to run the model; check it with "
                    "`tfcompress inspect`",
                    signal=reference.failure.signal,
                )
            ]
        op, index, stage = refused
        return None, [
            Finding(
                "reference_failed",
                f"LiteRT's reference kernels refused to {stage} {op} (op {index}), which TFLM "
                f"ran without checking: {reference.failure.message}",
                f"the file states {op} in a way LiteRT refuses (its options or types): TFLM's "
                "outputs for it are not to be trusted; re-export the model from its source",
                op=op,
                index=index,
            )
        ]
    for (spec, _), mine, theirs in zip(outputs, tflm_outputs, reference.value, strict=True):
        if np.shape(mine) != np.shape(theirs):
            return None, [
                Finding(
                    "mismatch",
                    f"output {spec.name!r}: TFLM gives {np.shape(mine)[1:]} per sample, LiteRT's "
                    f"reference kernels compute {np.shape(theirs)[1:]}: the file declares a shape "
                    "its op does not make (TFLM trusts the declared one)",
                    "re-export the model: the firmware would read the declared shape",
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
            "check the accuracy through TFLM (`tfcompress benchmark --backends tflm`)"
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
    timeout: Any,
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
