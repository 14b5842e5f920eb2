"""Run several variants of one model on the same samples and name their outputs alike.

Evaluations and gates compare a reference with candidates output by output. The data is
matched to the reference's inputs (by name, or ``x0``, ``x1``... in its order), each
candidate is fed under its own input names and its outputs are renamed to the reference's
(:func:`tfcompress.models.matching.match_tensors`), so ``y_box`` labels and ``--output box``
mean the same head in a Keras model and in the ``.tflite`` made from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfcompress.data import DataLike, Dataset, load_data, validate_for_signature
from tfcompress.data.dataset import LaidOut
from tfcompress.data.sources import describe_source
from tfcompress.models.feeding import check_input_values, feed_layout
from tfcompress.models.loading import KerasFile, SavedModelDir, TFLiteModel, model_name
from tfcompress.models.matching import match_tensors
from tfcompress.models.signature import ModelSignature, model_signature
from tfcompress.runtime import default_backend

_RUN = "tfcompress.bench.paired:run_model"


@dataclass(frozen=True)
class ModelRun:
    """One model's outputs on the shared samples, keyed by the reference's output names."""

    name: str
    backend: str
    outputs: dict[str, np.ndarray] = field(repr=False)
    size_bytes: int | None = None


def read_for_reference(
    data: DataLike,
    reference: Any,
    what: str = "data",
    *,
    batch_dims: Mapping[str, int] | None = None,
    input_values: Mapping[str, float] | None = None,
) -> Dataset:
    """Read ``data`` and match it to the reference's inputs and outputs.

    Arrays are in the reference's own layout (a state ``(layers, N, units)`` keeps its
    batch in the middle, a scalar input is one 0-d value); see
    :mod:`tfcompress.models.feeding`.

    Raises:
        InvalidDataError: Data that does not fit the reference (the message names the input).
        InvalidInputError: A batch dimension or value for an input the reference lacks.
    """
    signature = model_signature(reference)
    if _read_for(data, signature):
        return data  # read already, in this layout (compress reads its data once)
    layout = feed_layout(signature, batch_dims=batch_dims, name=model_name(reference))
    values = check_input_values(input_values or {}, signature, model_name(reference))
    raw = load_data(data, sample_rank=len(layout.inputs[0].sample_shape))
    checked = validate_for_signature(
        raw, signature, what=describe_source(data, what), layout=layout, values=values
    )
    if layout.batch_first and layout.static_batch is None and not values:
        return checked
    return LaidOut(checked.x, checked.y, layout=layout)


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
    batch_dims: Mapping[str, int] | None = None,
    isolate: bool = True,
) -> ModelRun:
    """Run ``model`` on ``dataset`` (matched to ``reference``) with its runtime.

    A ``.tflite`` or ``.onnx`` runs in a worker process
    (:class:`~tfcompress.bench.isolation.IsolatedRunner`): a native crash there is a
    :class:`~tfcompress.bench.isolation.RuntimeCrashedError` (exit 2) naming the signal,
    not the end of the caller (``isolate=False`` runs it here). Keras models and
    SavedModels run on TensorFlow here; ``backend`` picks the runner of a ``.tflite`` only.

    ``dataset`` is keyed by the ``reference`` signature's input names, batch first, and the
    outputs come back under its output names. ``batch_dims`` places tensors the signature
    cannot tell (this model's input names, the reference's output names; others are
    ignored); an output this model cannot place (``(?, ?, ?)``) takes the reference's layout.

    Raises:
        UnsupportedModelError: Inputs or outputs that cannot be matched to the reference's.
        InvalidDataError: Samples that do not fit this model's inputs.
        RuntimeCrashedError: The native runtime crashed in its worker.
    """
    if isinstance(model, KerasFile):  # run where it is loaded (TensorFlow runs there)
        options = {"threads": threads, "batch_size": batch_size, "batch_dims": batch_dims}
        return model.apply(_RUN, dataset, reference, name=name, what="running", **options)
    signature = model_signature(model)
    inputs = match_tensors(
        reference.inputs, signature.inputs, what="inputs", candidate_name=repr(name)
    )
    outputs = match_tensors(
        reference.outputs, signature.outputs, what="outputs", candidate_name=repr(name)
    )
    if batch_dims is None and isinstance(dataset, LaidOut) and dataset.layout is not None:
        batch_dims = declared_dims(dataset.layout)  # what the user declared when it was read
    dims = _own_dims(signature, reference, outputs, batch_dims or {})
    layout = feed_layout(signature, batch_dims=dims, name=name)
    own = Dataset({mine: dataset.x[theirs] for mine, theirs in inputs.items()})
    checked = validate_for_signature(
        own, signature, what=f"data for {name!r}", layout=layout, batch_first=True
    )
    chosen = backend if isinstance(model, TFLiteModel) and backend else default_backend(model)
    from tfcompress.bench.rows import start_runner

    options = {"threads": threads} if isinstance(model, TFLiteModel) else {}
    runner, _ = start_runner(model, chosen, options, dims, isolate=isolate)
    with runner:
        results = runner.run(checked.x, batch_size=batch_size, progress=progress)
    renamed = {outputs[mine]: array for mine, array in results.items()}
    ordered = {out: renamed[out] for out in reference.output_names}
    size = model.size_bytes if isinstance(model, TFLiteModel) else None
    return ModelRun(name, where_it_ran(model, chosen), ordered, size)


def _read_for(data: Any, signature: ModelSignature) -> bool:
    """Whether ``data`` was read already for a model with these inputs (a ``LaidOut``)."""
    layout = getattr(data, "layout", None) if isinstance(data, LaidOut) else None
    return layout is not None and {t.name for t in layout.inputs} == set(signature.input_names)


def declared_dims(layout: Any) -> dict[str, int]:
    """The batch dimensions the user declared in ``layout`` (``--batch-dim``), by name."""
    return {
        t.name: int(t.batch_axis)
        for t in (*layout.inputs, *layout.outputs)
        if t.declared and t.batch_axis is not None
    }


def _own_dims(
    signature: ModelSignature,
    reference: ModelSignature,
    outputs: Mapping[str, str],
    batch_dims: Mapping[str, int],
) -> dict[str, int]:
    """The batch dimensions to declare for this model: its inputs', and its outputs'.

    An output is declared where the user named it (by the reference's name), else where
    the reference's layout places it and this model's signature cannot tell (the state of
    one export is ``(2, N, 128)``, of another, made in an ``If`` subgraph, ``(?, ?, ?)``;
    LiteRT Quantizer writes it as ``(2, 1, 128)``).
    """
    dims = {k: v for k, v in batch_dims.items() if k in signature.input_names}
    theirs = feed_layout(
        reference,
        batch_dims={
            k: v
            for k, v in batch_dims.items()
            if k in reference.input_names or k in reference.output_names
        },
    )
    mine = feed_layout(signature, batch_dims=dims)
    for own, named in outputs.items():
        if own in signature.input_names:
            continue
        if named in batch_dims:
            dims[own] = batch_dims[named]
            continue
        ref, own_layout = theirs.output(named), mine.output(own)
        axis = ref.batch_axis
        if (
            axis is not None
            and axis != own_layout.batch_axis
            and len(own_layout.shape) == len(ref.shape)
            and own_layout.shape[axis] in (None, 1)  # unknown, or a batch written as 1
            and (own_layout.batch_axis is None or own_layout.shape[own_layout.batch_axis] is None)
        ):
            dims[own] = axis
    return dims


def where_it_ran(model: Any, backend: str) -> str:
    """The backend a report names: a plain SavedModel runs on TensorFlow, not "keras"."""
    return "tensorflow (SavedModel signature)" if isinstance(model, SavedModelDir) else backend
