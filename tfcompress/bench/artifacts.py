"""One artifact made ready to measure: sized, fed under its own tensor names, scored.

:mod:`tfcompress.bench.harness` loads the artifacts and reads the data once; here each
artifact gets the samples matched to its inputs (or seeded random inputs), the score of the
accuracy column on its own output names, and, for a Keras model measured on
``onnxruntime``, its ONNX export.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from tfcompress.bench.config import BenchmarkConfig
from tfcompress.bench.inputs import random_inputs
from tfcompress.bench.rows import Artifact
from tfcompress.bench.scoring import Scoring
from tfcompress.bench.size import measure_size
from tfcompress.data import Dataset, validate_for_signature
from tfcompress.models.feeding import feed_layout
from tfcompress.models.matching import match_tensors
from tfcompress.models.signature import ModelSignature, model_signature

logger = logging.getLogger(__name__)


def prepare_artifact(
    name: str,
    source: Any,
    model: Any,
    load_ms: float | None,
    data: Dataset | None,
    reference: ModelSignature,
    plan: BenchmarkConfig,
    scoring: Scoring | None,
) -> Artifact:
    """Size ``model`` and match it with the data (or random inputs) and the accuracy score.

    ``source`` is what the user passed (a path is sized from its file); ``data`` (None:
    random inputs, shaped by the plan's ``input_shapes``) uses the names of ``reference``,
    the first artifact's signature; ``load_ms`` is the part of loading that belongs to each
    row's ``init_ms``.
    """
    path = Path(source) if isinstance(source, str | os.PathLike) else None
    signature = model_signature(model)
    layout = feed_layout(signature, batch_dims=plan.input_dims(signature), name=name)
    own_values = {k: v for k, v in plan.input_values.items() if k in signature.input_names}
    if data is None:
        feed = random_inputs(
            signature,
            name=name,
            layout=layout,
            input_shapes=plan.input_shapes,
            batch_sizes=plan.batch_sizes,
            values=own_values,
        )
    else:
        inputs = match_tensors(
            reference.inputs, signature.inputs, what="inputs", candidate_name=repr(name)
        )
        own = Dataset({mine: data.x[theirs] for mine, theirs in inputs.items()})
        feed = validate_for_signature(
            own, signature, what=f"data for {name!r}", layout=layout, batch_first=True
        )
    score = None if scoring is None else scoring.for_artifact(reference, signature)
    return Artifact(
        model, measure_size(model, path=path), feed, load_ms, score=score, layout=layout
    )


def converted_artifact(name: str, artifact: Artifact, conversion: str) -> Artifact:
    """The artifact's ONNX export, made once per artifact, to run on ``onnxruntime``.

    Its rows keep the artifact's name and size (the artifact the user gave) and say in
    ``backend_details["converted"]`` what actually ran. The export is a transform called
    from measurement, on purpose: a user who names ``onnxruntime`` for a Keras model
    expects it measured there, not a missing row.
    """
    from tfcompress.targets.onnx import export_onnx

    logger.info("%s: exporting to ONNX for onnxruntime (%s)", name, conversion)
    start = time.perf_counter()
    onnx_model = export_onnx(artifact.model)  # in memory: nothing is written
    details = {
        "converted": conversion,
        "conversion_ms": round((time.perf_counter() - start) * 1000.0, 1),  # not in init_ms
        "converted_bytes": len(onnx_model.content),
    }
    # The export names its tensors its own way: feed it, and score it, under those names.
    before, after = model_signature(artifact.model), model_signature(onnx_model)
    inputs = match_tensors(before.inputs, after.inputs, what="inputs", candidate_name=repr(name))
    outputs = match_tensors(before.outputs, after.outputs, candidate_name=repr(name))
    own = Dataset({mine: artifact.dataset.x[theirs] for mine, theirs in inputs.items()})
    dataset = validate_for_signature(own, after, what=f"data for {name!r}", batch_first=True)
    score = artifact.score
    if score is not None:
        keras_score = score

        def score(values: dict[str, Any]) -> float:
            return keras_score({outputs[mine]: array for mine, array in values.items()})

    # Its init_ms is the ONNX Runtime session built from the exported bytes, as for an .onnx
    # file: loading the Keras file and exporting it are not the deployed model's cost.
    return replace(
        artifact,
        model=onnx_model,
        dataset=dataset,
        load_ms=0.0,
        converted=details,
        score=score,
    )
