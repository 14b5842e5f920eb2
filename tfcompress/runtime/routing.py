"""Which requested backend runs which artifact, and why a named backend runs none of them.

The benchmark harness asks here, before timing anything, for the route of every artifact x
backend pair: run it as it is, run its ONNX export (``onnxruntime`` named without any
``.onnx`` among the artifacts), or no row but a ``skipped: <reason>`` one. A backend the user
names never vanishes from a report in silence.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfcompress._compat.keras import flavour_of
from tfcompress.models.loading import SavedModelDir, TFLiteModel
from tfcompress.models.onnx import OnnxModel
from tfcompress.runtime import default_backend
from tfcompress.runtime.base import backend_class

ONNX_BACKEND = "onnxruntime"
#: What a converted row's ``backend_details["converted"]`` says.
KERAS_TO_ONNX = "keras -> onnx (tf2onnx)"


@dataclass(frozen=True)
class Route:
    """How one artifact meets one backend.

    Attributes:
        convert: None to run the artifact as it is; :data:`KERAS_TO_ONNX` to run its ONNX
            export.
        skipped: Why this pair has no measurement (the row's status), or None.
    """

    backend: str
    convert: str | None = None
    skipped: str | None = None

    @property
    def measured(self) -> bool:
        """True when the pair gets timed rows."""
        return self.skipped is None


def kind_of(model: object) -> str:
    """What the artifact is, in words, for a ``skipped:`` status."""
    kinds = ((TFLiteModel, "a .tflite"), (OnnxModel, "an .onnx"), (SavedModelDir, "a SavedModel"))
    found = next((words for kind, words in kinds if isinstance(model, kind)), None)
    keras = "a Keras model" if flavour_of(model) is not None else f"a {type(model).__name__}"
    return found or keras


def plan_routes(models: Mapping[str, Any], requested: Sequence[str]) -> dict[str, list[Route]]:
    """Route every artifact to the requested backends, in the order they were requested.

    * A backend that accepts an artifact's format runs it.
    * ``onnxruntime`` with no ``.onnx`` among the artifacts runs the ONNX export of every
      Keras artifact (what a user who names it expects); the other artifacts get a
      ``skipped:`` route saying why.
    * Any other backend that accepts none of the artifacts gives each a ``skipped:`` route.
    * An artifact no requested backend measures also runs on its natural backend (``cpu``
      for ``.tflite``, ``onnxruntime`` for ``.onnx``, ``keras`` for Keras), as before.
    """
    routes: dict[str, list[Route]] = {name: [] for name in models}
    for backend in requested:
        runner = backend_class(backend)
        takers = {name for name, model in models.items() if runner.accepts(model)}
        convert = None
        if backend == ONNX_BACKEND and not takers:
            takers = {name for name, model in models.items() if flavour_of(model) is not None}
            convert = KERAS_TO_ONNX
        if not takers:
            for name, model in models.items():
                routes[name].append(Route(backend, skipped=_why_not(backend, name, model)))
            continue
        for name, model in models.items():
            if name in takers:
                routes[name].append(Route(backend, convert=convert))
            elif backend == ONNX_BACKEND and convert is not None:
                # onnxruntime runs converted Keras models here: say why this one is not.
                routes[name].append(Route(backend, skipped=_why_not(backend, name, model)))
    for name, model in models.items():
        if not any(route.measured for route in routes[name]):
            routes[name].append(Route(default_backend(model)))
    return routes


def _why_not(backend: str, name: str, model: object) -> str:
    runner = backend_class(backend)
    kind = kind_of(model)
    status = f"skipped: {backend} runs {runner.runs}; {name} is {kind}"
    if backend == ONNX_BACKEND:
        return f"{status}, and tfcompress converts only Keras models to ONNX."
    if runner.runs == ".tflite" and kind == "a Keras model":
        hint = "tfcompress quantize MODEL --recipe float32 --out M.tflite"
        return f"{status}: convert it first ({hint})."
    return f"{status}."


def may_run_on_keras(sources: Sequence[Any], requested: Sequence[str]) -> bool:
    """Whether a ``keras`` row may come from these artifacts, judged before loading them.

    True when ``keras`` is requested, or an artifact is a Keras or SavedModel file or
    object (it may fall back to its natural backend, ``keras``). The harness pins
    TensorFlow's thread pools only then: pinning is for the rest of the process.

    Raises:
        ModelLoadError: A path that is missing or of no known format (loading would raise
            the same).
    """
    from tfcompress.models.formats import ModelFormat, sniff_format

    if "keras" in requested:
        return True
    tensorflow_formats = {ModelFormat.KERAS, ModelFormat.H5, ModelFormat.SAVED_MODEL}
    return any(
        sniff_format(Path(source)) in tensorflow_formats
        if isinstance(source, str | os.PathLike)
        else isinstance(source, SavedModelDir) or flavour_of(source) is not None
        for source in sources
    )
