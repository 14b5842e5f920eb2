"""Per-tensor quantization error: every quantized op's output against the float model's.

Both models run on the same samples, one at a time, with every intermediate tensor kept
(LiteRT's ``experimental_preserve_all_tensors``, on the built-in kernels: a delegate would
fuse the intermediates away). Each op of the quantized model that was quantized (integer
activations, or integer weights under a float op) has its output matched by tensor name to
the float model's, dequantized, and compared over all samples together:

- ``snr_db``: ``10 log10(sum(float^2) / sum((quantized - float)^2))``; higher is better
  (int8 rounding alone gives about 40 dB on a well-ranged tensor);
- ``cosine``: cosine similarity of the flattened tensors (1 is identical direction);
- ``rmse`` and ``max_abs``: in the tensor's own units.

The list is sorted worst first (lowest SNR). Both engines' files are measured the same way;
the converter renames a few fused tensors, and tensors without a float counterpart are
counted in ``unmatched``, not guessed.
"""

from __future__ import annotations

import contextlib
import math
import re
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from tfcompress._json import json_safe
from tfcompress.data import Dataset
from tfcompress.errors import UnsupportedModelError
from tfcompress.models.loading import TFLiteModel
from tfcompress.models.signature import model_signature
from tfcompress.models.tflite_file import TFLiteFile, read_tflite
from tfcompress.quantization.engines.check import op_modes

#: Samples the errors are measured on at most (a seeded subset of the data given).
MAX_SAMPLES = 64
_INTEGER = frozenset({"int8", "uint8", "int16", "int32"})


@dataclass(frozen=True)
class TensorError:
    """How far one quantized op's output is from the float model's (the module's metrics).

    ``tensor`` is named alike in both models; SNR is infinite when identical; ``mode`` is
    what the op became (``int8``, ``int16``, ``weights``, ``dynamic``, ``float16``).
    """

    tensor: str
    op_type: str
    mode: str
    snr_db: float
    cosine: float
    rmse: float
    max_abs: float

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (inf and NaN as None)."""
        return json_safe(asdict(self))


@dataclass(frozen=True)
class LayerErrors:
    """The per-tensor errors of one artifact, worst first.

    Attributes:
        tensors: One entry per quantized tensor matched to the float model.
        samples: Samples measured on.
        unmatched: Quantized tensors with no float tensor of the same name.
    """

    tensors: tuple[TensorError, ...]
    samples: int
    unmatched: int

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports."""
        return {
            "samples": self.samples,
            "unmatched": self.unmatched,
            "tensors": [t.to_dict() for t in self.tensors],
        }

    def table(self, limit: int | None = 10) -> str:
        """The worst ``limit`` tensors as an aligned table (all with None)."""
        from tfcompress.errors import shown_name  # names the model chose, escaped
        from tfcompress.report.table import format_table

        if not self.tensors:
            return "per-tensor error vs float: no quantized tensor to compare"
        shown = self.tensors if limit is None else self.tensors[:limit]
        rows = [
            [shown_name(t.tensor, limit=80), shown_name(t.op_type, limit=40), t.mode,
             f"{t.snr_db:.1f}", f"{t.cosine:.4f}", f"{t.rmse:.3g}", f"{t.max_abs:.3g}"]
            for t in shown
        ]  # fmt: skip
        header = ["tensor", "op", "mode", "SNR dB", "cosine", "RMSE", "max abs"]
        text = format_table(header, rows)
        more = len(self.tensors) - len(shown)
        tail = f"\n({more} more; all in --json)" if more > 0 else ""
        return f"per-tensor error vs float, worst first ({self.samples} samples):\n{text}{tail}"


def contained_layer_errors(
    reference: bytes,
    quantized: bytes,
    data: Any,
    *,
    seed: int,
    what: str,
    feeding: Mapping[str, Any] | None = None,
) -> LayerErrors:
    """:func:`measure_layer_errors` on a seeded subset of ``data``, in a child process.

    ``MAX_SAMPLES`` at most, read in the float file's layout (``feeding``: ``batch_dims``
    and ``input_values``). Both files run on the user's data, every tensor kept: native code
    whose allocations the data can size (a FILL whose shape is an input value), so it runs
    where a crash or a runaway allocation is one error (:mod:`tfcompress._child`).

    Raises:
        NativeCrashError: LiteRT crashed on one of the files.
        ResourceLimitError: It allocated past the child's memory limit.
        ChildTimeoutError: It ran past its time limit.
    """
    from tfcompress._child import call
    from tfcompress.data.calibration import calibration_set

    signature = model_signature(TFLiteModel(reference, verified=True))
    samples = calibration_set(signature, data, limit=MAX_SAMPLES, seed=seed, **(feeding or {}))
    where = "tfcompress.quantization.layer_errors:measure_layer_errors"
    return call(where, reference, quantized, samples, what=what)


def measure_layer_errors(
    reference: bytes, quantized: bytes, samples: Dataset, *, limit: int = MAX_SAMPLES
) -> LayerErrors:
    """Every quantized tensor of ``quantized`` against its float model ``reference``, worst first.

    Measured on the first ``limit`` of ``samples`` (labels ignored).
    """
    count = min(len(samples), limit)
    ref_file, q_file = read_tflite(reference), read_tflite(quantized)
    chosen = _chosen_tensors(ref_file, q_file)
    names = model_signature(TFLiteModel(reference, verified=True)).input_names
    ref_run, q_run = _Runner(reference), _Runner(quantized)
    collected: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {
        name: ([], []) for name in chosen
    }
    for feed in _feeds(samples, names, count):
        ref_values = ref_run(feed, [chosen[n][0] for n in chosen])
        q_values = q_run(feed, [chosen[n][1] for n in chosen])
        for name, a, b in zip(chosen, ref_values, q_values, strict=True):
            if a is not None and b is not None and a.shape == b.shape:
                collected[name][0].append(a.ravel())
                collected[name][1].append(b.ravel())
    q_graph = q_file.subgraphs[0]
    producer = {i: op.opcode for op in q_graph.operators for i in op.outputs}
    modes = op_modes(q_file)
    errors = []
    for name, (floats, quants) in collected.items():
        if not floats:
            continue
        a, b = np.concatenate(floats), np.concatenate(quants)
        errors.append(
            TensorError(
                tensor=name,
                op_type=producer.get(chosen[name][1], "UNKNOWN"),
                mode=modes.get(name, "float"),
                **_metrics(a.astype(np.float64), b.astype(np.float64)),
            )
        )
    errors.sort(key=lambda e: (e.snr_db if not math.isnan(e.snr_db) else -math.inf, e.tensor))
    unmatched = len(_quantized_outputs(q_file)) - len(chosen)
    return LayerErrors(tuple(errors), count, unmatched)


def _quantized_outputs(parsed: TFLiteFile) -> dict[str, int]:
    """Output tensors of the ops that were quantized, by name -> index."""
    graph = parsed.subgraphs[0]
    modes = op_modes(parsed)
    found = {}
    for op in graph.operators:
        if op.opcode in ("QUANTIZE", "DEQUANTIZE"):
            continue
        for index in op.outputs:
            name = graph.tensors[index].name
            if modes.get(name, "float") not in ("float", "n/a"):
                found[name] = index
    return found


def _chosen_tensors(reference: TFLiteFile, quantized: TFLiteFile) -> dict[str, tuple[int, int]]:
    """Quantized tensor name -> (index in the reference, index in the quantized model)."""
    graph = reference.subgraphs[0]
    ref_index = {
        t.name: t.index
        for t in graph.tensors
        if not reference.is_constant(t) and t.dtype in ("float32", "float16")
    }
    return {
        name: (ref_index[name], index)
        for name, index in _quantized_outputs(quantized).items()
        if name in ref_index
    }


def _feeds(samples: Dataset, names: tuple[str, ...], count: int) -> Iterator[list[np.ndarray]]:
    """One call at a time, in the interpreter's input order and the model's own layout.

    Samples read for a model not fed batch first (a state ``(2, N, 16)``, a scalar) come
    with their layout and go back to it (:func:`tfcompress.data.calibration.model_feeds`);
    plain ones are sliced a sample at a time.
    """
    if getattr(samples, "layout", None) is not None:
        from tfcompress.data.calibration import model_feeds

        for i, call in enumerate(model_feeds(samples, 1, names[:1])):
            if i >= count:
                return
            yield [np.asarray(call[name]) for name in names]
        return
    x = samples.x
    for i in range(count):
        yield [np.asarray((x[name] if isinstance(x, dict) else x)[i : i + 1]) for name in names]


class _Runner:
    """One interpreter on the built-in kernels, every tensor kept, fed a batch of one."""

    def __init__(self, content: bytes) -> None:
        from tfcompress._compat.litert import interpreter_module

        module, _ = interpreter_module()
        with _refusal_is_unsupported("prepare"):
            with warnings.catch_warnings():  # "for debugging purposes only": that is the purpose
                warnings.simplefilter("ignore", UserWarning)
                self.interpreter = module.Interpreter(
                    model_content=content,
                    num_threads=1,
                    experimental_op_resolver_type=module.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
                    experimental_preserve_all_tensors=True,
                )
            self.interpreter.allocate_tensors()
        self.shapes: list[tuple[int, ...]] = []

    def __call__(self, feed: list[np.ndarray], indices: list[int]) -> list[np.ndarray | None]:
        interpreter = self.interpreter
        inputs = interpreter.get_input_details()
        shapes = [tuple(a.shape) for a in feed]
        with _refusal_is_unsupported("run"):
            if shapes != self.shapes:
                for detail, shape in zip(inputs, shapes, strict=True):
                    interpreter.resize_tensor_input(detail["index"], list(shape), strict=False)
                interpreter.allocate_tensors()
                self.shapes = shapes
            for detail, value in zip(inputs, feed, strict=True):
                interpreter.set_tensor(detail["index"], _to_input(value, detail))
            interpreter.invoke()
        details = {d["index"]: d for d in interpreter.get_tensor_details()}
        return [_dequantized(interpreter, details.get(i)) for i in indices]


@contextlib.contextmanager
def _refusal_is_unsupported(stage: str) -> Iterator[None]:
    """Turn the interpreter's refusal (RuntimeError, ValueError) into one typed, short line.

    The model got past the load probe, yet the built-in kernels this measure runs on may
    still refuse it: an unresolved custom or Flex op, an op that refuses the real samples
    (a FILL of negative size), ops stored out of order (an input read before it is written).

    Raises:
        UnsupportedModelError: Naming the runtime, the op where LiteRT names it, and a fix.
    """
    try:
        yield
    except (RuntimeError, ValueError) as exc:
        reason = " ".join(str(exc).split())
        op = _refused_op(reason)
        where = f" at op {op}" if op else ""
        raise UnsupportedModelError(
            f"--layer-errors: the LiteRT interpreter (built-in kernels) cannot {stage} the "
            f"model{where} ({type(exc).__name__}: {reason[:200]}); the per-tensor errors need "
            "a model LiteRT runs on its own: drop --layer-errors, or register the op's kernel "
            "/ re-export the model from its source."
        ) from None


def _refused_op(reason: str) -> str | None:
    """The op LiteRT names in its refusal, if any (capped: it comes from the model)."""
    if "Select TensorFlow op" in reason or "Flex delegate" in reason:
        return "Flex (Select TensorFlow ops)"
    found = re.search(r"unresolved custom op: (\S+?)\.?(?:\s|$)", reason) or re.search(
        r"Node number \d+ \(([^)]{1,200})\) failed", reason
    )
    return found.group(1)[:100] if found else None


def _to_input(value: np.ndarray, detail: dict[str, Any]) -> np.ndarray:
    dtype = np.dtype(detail["dtype"])
    if dtype.kind == "f":
        return value.astype(dtype)
    scale, zero = detail["quantization"]
    info = np.iinfo(dtype)
    scaled = np.round(value / scale + zero) if scale else value
    return np.clip(scaled, info.min, info.max).astype(dtype)


def _dequantized(interpreter: Any, detail: dict[str, Any] | None) -> np.ndarray | None:
    if detail is None:
        return None
    try:
        value = np.asarray(interpreter.get_tensor(detail["index"]))
    except ValueError:  # a tensor the runtime did not keep
        return None
    if np.dtype(detail["dtype"]).name in _INTEGER:
        scale, zero = detail["quantization"]
        if scale:
            return (value.astype(np.float64) - zero) * scale
    return value.astype(np.float64)


def _metrics(reference: np.ndarray, quantized: np.ndarray) -> dict[str, float]:
    error = quantized - reference
    noise = float(np.sum(error**2))
    signal = float(np.sum(reference**2))
    if noise == 0:
        snr = math.inf
    elif signal == 0:
        snr = -math.inf
    else:
        snr = 10 * math.log10(signal / noise)
    norms = float(np.linalg.norm(reference) * np.linalg.norm(quantized))
    cosine = float(np.dot(reference, quantized) / norms) if norms > 0 else math.nan
    return {
        "snr_db": snr,
        "cosine": cosine,
        "rmse": float(np.sqrt(np.mean(error**2))),
        "max_abs": float(np.max(np.abs(error))),
    }
