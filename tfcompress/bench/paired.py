"""Run several variants of one model on the same samples and name their outputs alike.

Evaluations and gates compare a reference with candidates output by output. The data is
matched to the reference's inputs (by name, or ``x0``, ``x1``... in its order), each
candidate is fed under its own input names and its outputs are renamed to the reference's
(:func:`tfcompress.models.matching.match_tensors`), so ``y_box`` labels and ``--output box``
mean the same head in a Keras model and in the ``.tflite`` made from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfcompress.data import DataLike, Dataset, load_data, validate_for_signature
from tfcompress.data.sources import describe_source
from tfcompress.models.loading import TFLiteModel
from tfcompress.models.matching import match_tensors
from tfcompress.models.signature import ModelSignature, model_signature
from tfcompress.runtime import create_runner, default_backend


@dataclass(frozen=True)
class ModelRun:
    """One model's outputs on the shared samples, keyed by the reference's output names."""

    name: str
    backend: str
    outputs: dict[str, np.ndarray] = field(repr=False)
    size_bytes: int | None = None


def read_for_reference(data: DataLike, reference: Any, what: str = "data") -> Dataset:
    """Read ``data`` and match it to the reference's inputs and outputs.

    Returns:
        ``x`` keyed by the reference's input names, ``y`` None or keyed by its output names.

    Raises:
        InvalidDataError: Data that does not fit the reference (the message names the input).

    Example:
        >>> data = read_for_reference("two_heads.npz", model)  # doctest: +SKIP
        >>> sorted(data.x), sorted(data.y)  # doctest: +SKIP
        (['gain', 'image'], ['box', 'cls'])
    """
    signature = model_signature(reference)
    first = signature.inputs[0]
    raw = load_data(data, sample_rank=len(first.sample_shape))
    return validate_for_signature(raw, signature, what=describe_source(data, what))


def run_model(
    model: Any,
    dataset: Dataset,
    reference: ModelSignature,
    *,
    name: str,
    backend: str | None = None,
    threads: int = 1,
    batch_size: int | None = None,
    progress: bool = False,
) -> ModelRun:
    """Run ``model`` on ``dataset`` (matched to ``reference``) with its runtime.

    Args:
        model: A loaded model: the reference itself or a variant of it.
        dataset: Samples keyed by the reference's input names.
        reference: The reference's signature (its names are the ones reported).
        name: Display name.
        backend: Runner for a ``.tflite`` (default ``cpu``); other formats run on their
            natural backend.
        threads: CPU threads for LiteRT runners.
        batch_size: Samples per inference call.
        progress: Draw a progress bar.

    Returns:
        The outputs, keyed by the reference's output names.

    Raises:
        UnsupportedModelError: Inputs or outputs that cannot be matched to the reference's.
        InvalidDataError: Samples that do not fit this model's inputs.

    Example:
        >>> run = run_model(q.model, data, model_signature(model), name="int8")  # doctest: +SKIP
        >>> sorted(run.outputs)  # doctest: +SKIP
        ['box', 'cls']
    """
    signature = model_signature(model)
    inputs = match_tensors(
        reference.inputs, signature.inputs, what="inputs", candidate_name=repr(name)
    )
    outputs = match_tensors(
        reference.outputs, signature.outputs, what="outputs", candidate_name=repr(name)
    )
    own = Dataset({mine: dataset.x[theirs] for mine, theirs in inputs.items()})
    checked = validate_for_signature(own, signature, what=f"data for {name!r}")
    chosen = backend if isinstance(model, TFLiteModel) and backend else default_backend(model)
    options = {"threads": threads} if isinstance(model, TFLiteModel) else {}
    with create_runner(model, backend=chosen, **options) as runner:
        results = runner.run(checked.x, batch_size=batch_size, progress=progress)
    renamed = {outputs[mine]: array for mine, array in results.items()}
    ordered = {out: renamed[out] for out in reference.output_names}
    size = model.size_bytes if isinstance(model, TFLiteModel) else None
    return ModelRun(name, chosen, ordered, size)
