"""Does an ONNX export compute what the Keras model computes? Max abs error per output.

The check runs both on the same samples (given data, or seeded random inputs of each
input's shape and dtype): Keras through the very function tf2onnx traced, ONNX through ONNX
Runtime on the CPU (a GPU provider's TF32 math would blur a conversion check). Outputs are
paired by name (:func:`tfcompress.models.matching.match_tensors`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tfcompress.data import DataLike, Dataset, validate_for_signature
from tfcompress.errors import ConversionError, InvalidDataError, UnsupportedModelError
from tfcompress.models.matching import match_tensors
from tfcompress.models.onnx import OnnxModel
from tfcompress.models.signature import ModelSignature, model_signature

#: Largest max-abs difference an export may show on any output.
DEFAULT_ATOL = 1e-4
#: Samples of ``sample_data`` used at most.
MAX_VERIFY_SAMPLES = 64

KerasFunction = Callable[[Mapping[str, np.ndarray]], Mapping[str, np.ndarray]]


@dataclass(frozen=True)
class OnnxVerification:
    """How far an ONNX export's outputs are from the Keras model's, output by output.

    Attributes:
        max_abs_diff: ``(output name, largest absolute difference)`` per output, in the
            model's output order (``inf`` where one side is NaN/Inf and the other is not).
        inputs: ``"random"`` (seeded uniform [0, 1) floats, integers in [0, 100)) or
            ``"data"`` (the samples given).

    Example:
        >>> check = OnnxVerification((("probs", 2.4e-07),), samples=8, inputs="random")
        >>> check.passed, check.worst
        (True, ('probs', 2.4e-07))
    """

    max_abs_diff: tuple[tuple[str, float], ...]
    samples: int
    inputs: str
    atol: float = DEFAULT_ATOL

    @property
    def worst(self) -> tuple[str, float]:
        """The output with the largest difference, and that difference."""
        return max(self.max_abs_diff, key=lambda item: item[1])

    @property
    def passed(self) -> bool:
        """Whether every output is within :attr:`atol`."""
        return self.worst[1] <= self.atol

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (``inf`` becomes None)."""
        return {
            "max_abs_diff": {name: _finite_or_none(diff) for name, diff in self.max_abs_diff},
            "worst_output": self.worst[0],
            "samples": self.samples,
            "inputs": self.inputs,
            "atol": self.atol,
            "passed": self.passed,
        }

    def __str__(self) -> str:
        name, diff = self.worst
        where = f" (output {name!r})" if len(self.max_abs_diff) > 1 else ""
        verdict = "<=" if self.passed else ">"
        return (
            f"max |onnx - keras| {diff:.2e}{where} {verdict} {self.atol:g} on {self.samples} "
            f"{'random' if self.inputs == 'random' else 'given'} samples"
        )


def verification_feed(
    signature: ModelSignature, sample_data: DataLike | None, *, name: str
) -> tuple[Dataset, str]:
    """The samples an export is checked on (``x`` by input name), and ``"data"`` or ``"random"``.

    ``sample_data``: any source :func:`tfcompress.data.load_data` reads (labels ignored), or
    None for seeded random inputs; ``name`` names the model in messages.

    Raises:
        InvalidDataError: Data that does not fit the model, or no data for a model with
            unknown dimensions besides the batch.
    """
    if sample_data is not None:
        from tfcompress.data.calibration import calibration_set

        chosen = calibration_set(
            signature, sample_data, limit=MAX_VERIFY_SAMPLES, seed=0, what="sample data"
        )
        return validate_for_signature(chosen, signature, what="sample data"), "data"
    dynamic = [spec for spec in signature.inputs if spec.is_dynamic]
    if dynamic:
        raise InvalidDataError(
            f"{name}: input {dynamic[0].name!r} {dynamic[0].describe()} has unknown dimensions, "
            "so random inputs cannot check the export; pass sample_data (--data SAMPLES.npz) "
            "with a few real samples."
        )
    from tfcompress.bench.inputs import random_inputs

    return random_inputs(signature, name=name), "random"


def compare_outputs(
    keras_function: KerasFunction,
    onnx_model: OnnxModel,
    keras_signature: ModelSignature,
    feed: Dataset,
    *,
    inputs: str,
    atol: float = DEFAULT_ATOL,
) -> OnnxVerification:
    """Run the Keras function and the ONNX model on ``feed``; measure each output's gap.

    ``keras_function`` is the traced Keras call (inputs by name in, outputs by name out);
    ``inputs`` (``"data"`` or ``"random"``) and ``atol`` are recorded, not enforced here.

    Raises:
        ConversionError: ONNX Runtime cannot load or run the export, or an output's shape
            differs from Keras'.
    """
    from tfcompress._child import call

    x = dict(feed.x) if isinstance(feed.x, Mapping) else {keras_signature.inputs[0].name: feed.x}
    expected = {name: np.asarray(value) for name, value in keras_function(x).items()}
    onnx_signature = model_signature(onnx_model)
    try:
        in_names = match_tensors(
            keras_signature.inputs, onnx_signature.inputs, what="inputs", candidate_name="export"
        )
        out_names = match_tensors(
            keras_signature.outputs, onnx_signature.outputs, candidate_name="the export"
        )
        got = call(
            "tfcompress.targets.onnx.verify:run_on_cpu",
            onnx_model,
            {mine: x[theirs] for mine, theirs in in_names.items()},
            what=f"ONNX Runtime on the export of {onnx_model.name!r}",
        )
    except (UnsupportedModelError, RuntimeError, ValueError) as error:
        raise ConversionError(
            f"the ONNX export of {onnx_model.name} does not run on ONNX Runtime "
            f"({' '.join(str(error).split())[:300]}); try another opset."
        ) from error
    by_keras = {out_names[name]: array for name, array in got.items()}
    diffs = []
    for spec in keras_signature.outputs:
        want, have = expected[spec.name], by_keras[spec.name]
        if want.shape != have.shape:
            raise ConversionError(
                f"the ONNX export's output {spec.name!r} has shape {have.shape} but Keras "
                f"gives {want.shape}; the conversion is wrong, try another opset."
            )
        diffs.append((spec.name, _max_abs(want, have)))
    samples = len(next(iter(x.values())))
    return OnnxVerification(tuple(diffs), samples=samples, inputs=inputs, atol=atol)


def run_on_cpu(model: OnnxModel, feed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``model``'s outputs on ``feed`` by ONNX Runtime's CPU provider (compare_outputs' child).

    The graph and the data are the user's: a FILL sized by an input value allocates what the
    data says, which the child's memory limit bounds.
    """
    from tfcompress.runtime.onnxruntime import CPU, OnnxRuntimeRunner

    with OnnxRuntimeRunner(model, providers=[CPU]) as runner:
        return dict(runner.run(feed))


def _max_abs(a: np.ndarray, b: np.ndarray) -> float:
    if a.size == 0:
        return 0.0
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    same_special = (np.isnan(a64) & np.isnan(b64)) | (np.isinf(a64) & (a64 == b64))
    diff = np.where(same_special, 0.0, np.abs(a64 - b64))
    return float(np.max(np.where(np.isnan(diff), np.inf, diff)))


def _finite_or_none(value: float) -> float | None:
    return float(f"{value:.3g}") if math.isfinite(value) else None
