"""``check(model)``: will LiteRT's GPU run this ``.tflite`` whole, and compute what the CPU does?

The steps:

1. the static verdict (:mod:`tfcompress.runtime.gpu_support`, no native code): whole, falls
   back (the ops left to the CPU) or refused (a tensor sized at run time), each cause with its
   Keras layer and a change that works, and float16 overflow risks;
2. where LiteRT finds a GPU, the file is compiled there (in a worker process): LiteRT's own
   verdict (``fully_accelerated``, the ops it left to the CPU);
3. where it compiled, the samples run on the GPU and on LiteRT's CPU kernels, and the largest
   absolute difference of each output is reported (the gates' ``max_abs_diff``).

Without a GPU, steps 2 and 3 are skipped and the report says why, in LiteRT's words.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tfcompress.runtime.gpu_rules import LITERT_SOURCE
from tfcompress.runtime.gpu_support import GpuSupport
from tfcompress.targets.gpu.target import COMPILED, GpuVerdict

DEFAULT_SAMPLES = 100
# What a model of another format is told: a GPU file needs no calibration data.
_TFLITE_ONLY = (
    "LiteRT's GPU delegate runs .tflite files: convert it first with `tfcompress quantize "
    "MODEL --target gpu --out model_gpu.tflite`."
)


@dataclass(frozen=True)
class Numerics:
    """One backend's outputs against another's on the same samples.

    ``source`` says where the samples came from (``sample data`` or ``random inputs (seed
    0)``); ``backend`` (``gpu``) is compared with ``reference`` (``cpu``: LiteRT's CPU
    kernels), output by output (``max_abs_difference``).
    """

    samples: int
    source: str
    backend: str
    reference: str
    max_abs_difference: Mapping[str, float]

    @property
    def worst(self) -> float:
        """The largest difference over every output."""
        return max(self.max_abs_difference.values(), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {**asdict(self), "max_abs_difference": dict(self.max_abs_difference)}

    def __str__(self) -> str:
        each = ", ".join(f"{name} {value:.3g}" for name, value in self.max_abs_difference.items())
        return (
            f"{self.backend} vs {self.reference} on {self.samples} samples ({self.source}): "
            f"max |difference| {each}"
        )


@dataclass(frozen=True)
class GpuReport:
    """What ``tfcompress gpu`` found.

    Attributes:
        verdict: The GPU verdict (compiled where a GPU answered, static otherwise); its
            ``support`` is the static verdict, always computed.
        numerics: The GPU against the CPU on the samples, where the GPU compiled the file
            (else ``numerics_skipped`` says why).
        max_difference: The budget on the largest difference, if one was set.
    """

    source: str
    model_bytes: int
    verdict: GpuVerdict
    numerics: Numerics | None = None
    numerics_skipped: str | None = None
    max_difference: float | None = None
    seconds: float = field(default=0.0, compare=False)

    @property
    def support(self) -> GpuSupport:
        """The static verdict."""
        return self.verdict.support

    @property
    def compatible(self) -> bool:
        """The whole file runs on the GPU (LiteRT's word where it compiled, else the table's)."""
        return self.verdict.compatible

    @property
    def within_budget(self) -> bool | None:
        """The largest difference is within ``max_difference`` (None: nothing to check)."""
        if self.max_difference is None or self.numerics is None:
            return None
        return self.numerics.worst <= self.max_difference

    def to_dict(self) -> dict[str, Any]:
        """JSON form: the verdicts, the causes with their layers and fixes, the numbers."""
        support = self.support.to_dict()
        return {
            "source": self.source,
            "model_bytes": self.model_bytes,
            "compatible": self.compatible,
            "verdict": support.pop("verdict"),
            "checked": self.verdict.checked,
            "fully_accelerated": self.verdict.fully_accelerated,
            "device": self.verdict.device,
            "why_static": self.verdict.why_static,
            "refused": self.verdict.refused,
            "cpu_ops_compiled": list(self.verdict.cpu_ops)
            if self.verdict.checked == COMPILED
            else None,
            "static_check": support,
            "fixes": [{"what": what, "fix": fix} for what, fix in self.support.layer_fixes()],
            "fix": self.verdict.fix(),
            "numerics": None if self.numerics is None else self.numerics.to_dict(),
            "numerics_skipped": self.numerics_skipped,
            "max_difference": self.max_difference,
            "within_budget": self.within_budget,
            "seconds": round(self.seconds, 3),
        }

    def __str__(self) -> str:
        support = self.support
        name = Path(self.source).name if self.source != "<bytes>" else "the model"
        total = support.ops_total
        lines = [f"{name}: {support.precision}, {total} ops; rules: {LITERT_SOURCE}"]
        static = {
            "whole": "static verdict: whole (every op is one LiteRT's GPU takes)",
            "falls back": f"static verdict: falls back ({len(support.cpu_ops)} of {total} ops "
            "on the CPU, the rest on the GPU)",
            "refused": "static verdict: refused (a tensor sized at run time: LiteRT refuses "
            "the GPU for the whole graph, nothing runs on it)",
        }[support.verdict]
        lines.append(static)
        lines += [f"  sized at run time: {tensor}" for tensor in support.dynamic_tensors]
        lines += [f"  {op}" + (f" [follows op {op.follows}]" if op.follows is not None else "")
                  for op in support.cpu_ops]  # fmt: skip
        if self.verdict.checked == COMPILED:
            lines.append(_compiled(self.verdict))
        else:
            why = (self.verdict.why_static or "").split("; ")[0]
            lines.append(f"compiled verdict: not run ({why}; docs/gpu.md says how to set one up)")
        fixes = support.layer_fixes()
        if support.graph_refused or support.dynamic_shape_ops or fixes:
            lines.append(f"fix: {self.verdict.fix()}")
        lines += [f"float16 risk: {risk}" for risk in support.fp16_risks]
        if self.numerics is not None:
            budget = ""
            if self.max_difference is not None:
                met = "within" if self.within_budget else "OVER"
                budget = f" ({met} --max-diff {self.max_difference:g})"
            lines.append(f"numeric check: {self.numerics}{budget}")
        else:
            lines.append(f"numeric check: not run ({self.numerics_skipped})")
        return "\n".join(lines)


def _compiled(verdict: GpuVerdict) -> str:
    where = f"compiled on {verdict.device or 'the GPU'}"
    if verdict.refused is not None:
        return f"compiled verdict ({where}): refused: {verdict.refused}"
    if verdict.fully_accelerated:
        return f"compiled verdict ({where}): fully accelerated"
    ops = "; ".join(verdict.cpu_ops) or "LiteRT did not list them"
    return f"compiled verdict ({where}): on the CPU ({verdict.cpu_ops_source}): {ops}"


def check(
    model: Any,
    *,
    sample_data: Any = None,
    max_samples: int = DEFAULT_SAMPLES,
    max_difference: float | None = None,
    timeout_s: float | None = None,
) -> GpuReport:
    """Check a ``.tflite`` for LiteRT's GPU: offline, and on the GPU where there is one.

    Args:
        model: A ``.tflite`` path, its bytes or a :class:`~tfcompress.models.TFLiteModel`.
        sample_data: Float samples for the GPU-vs-CPU comparison (anything
            :func:`tfcompress.data.load_data` reads); None: 8 seeded random inputs.
        max_samples: At most this many samples are compared.
        max_difference: A budget on the largest absolute difference of any output.
        timeout_s: Seconds each compilation or run (in a worker process) may take; None: the
            one time limit (``TFCOMPRESS_TIMEOUT``).

    Raises:
        ModelLoadError: A missing, corrupt or truncated ``.tflite``.
        UnsupportedModelError: Another model format.
        InvalidDataError: Sample data that does not fit the model's inputs.

    Example:
        >>> import tfcompress.gpu
        >>> report = tfcompress.gpu.check("cnn_b1.tflite")  # doctest: +SKIP
        >>> report.support.verdict, report.verdict.checked  # doctest: +SKIP
        ('whole', 'static')
    """
    from tfcompress.models.formats import read_tflite_input
    from tfcompress.models.loading import TFLiteModel
    from tfcompress.targets.gpu.target import gpu_verdict
    from tfcompress.targets.mcu.exactness import sample_inputs

    start = time.perf_counter()
    content, source, _ = read_tflite_input(model, _TFLITE_ONLY)
    samples, described = sample_inputs(content, source, sample_data, max_samples=max_samples)
    label = Path(source).name if source != "<bytes>" else "the model"
    verdict = gpu_verdict(content, timeout=timeout_s, label=label)
    numerics, skipped = None, None
    if verdict.checked != COMPILED:
        skipped = "no GPU here"
    elif verdict.refused is not None:
        skipped = "the GPU refused the model"
    else:
        runnable = TFLiteModel(content, label=label, verified=True)
        numerics = compare_backends(runnable, samples, described, timeout=timeout_s)
    return GpuReport(
        source=source,
        model_bytes=len(content),
        verdict=verdict,
        numerics=numerics,
        numerics_skipped=skipped,
        max_difference=max_difference,
        seconds=time.perf_counter() - start,
    )


def compare_backends(
    model: Any,
    samples: list[Any],
    source: str,
    *,
    backend: str = "gpu",
    reference: str = "cpu",
    timeout: float | None = None,
) -> Numerics:
    """The largest absolute difference of each output of ``backend`` against ``reference``.

    ``samples``: one array per input, in the subgraph's input order, batch first, run in
    worker processes (``timeout`` seconds each); ``source`` says where they came from.
    """
    import numpy as np

    from tfcompress.bench.isolation import IsolatedRunner
    from tfcompress.models.signature import tflite_io_tensors

    inputs, _ = tflite_io_tensors(model)
    feed = {spec.name: array for (spec, _), array in zip(inputs, samples, strict=True)}
    runs = {}
    for name in (backend, reference):
        with IsolatedRunner(model, backend=name, timeout=timeout) as runner:
            runs[name] = runner.run(feed)
    worst = {}
    for output, values in runs[backend].items():
        diff = np.asarray(values, np.float64) - np.asarray(runs[reference][output], np.float64)
        worst[output] = float(np.abs(diff).max()) if diff.size else 0.0
    count = len(samples[0]) if samples else 0
    return Numerics(count, source, backend, reference, worst)
