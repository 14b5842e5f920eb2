"""What is inside a model, whatever its format: inputs, outputs, ops or layers, weights.

:func:`inspect_model` answers for every format tfcompress loads: a ``.tflite``
(:mod:`~tfcompress.inspection.tflite`), an ``.onnx`` (:mod:`~tfcompress.inspection.onnx`),
a Keras model and a plain SavedModel (here). Every answer lists all inputs and outputs with
``N`` for the batch dimension and ``?`` for other unknown ones, and the weights by dtype.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tfcompress._compat.keras import flavour_of
from tfcompress.errors import UnsupportedModelError
from tfcompress.inspection.common import WeightGroup, group_weights, info_text, io_dict
from tfcompress.inspection.onnx import OnnxInfo, inspect_onnx
from tfcompress.inspection.tflite import TFLiteInfo, inspect_tflite
from tfcompress.models.feeding import FeedLayout, feed_layout
from tfcompress.models.loading import (
    ModelLike,
    SavedModelDir,
    TFLiteModel,
    model_name,
    resolve_model,
    saved_model_errors,
)
from tfcompress.models.onnx import OnnxModel
from tfcompress.models.signature import ModelSignature, TensorSpec, model_signature


@dataclass(frozen=True)
class KerasInfo:
    """Inputs, outputs, layers and parameters of a Keras model.

    Attributes:
        flavour: ``keras3`` or ``tf_keras``.
        inputs: Every input (name, shape, dtype), in the model's order.
        layers: ``(name, class, output shape, params)`` per layer.
        weights_by_dtype: The model's variables grouped by dtype.
    """

    name: str
    flavour: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    layers: tuple[tuple[str, str, str, int], ...]
    total_params: int
    trainable_params: int
    weights_by_dtype: tuple[WeightGroup, ...] = ()
    #: How the signature is fed (batch dimensions, scalars, a static batch).
    layout: FeedLayout | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``: inputs and outputs are lists of objects."""
        return {
            "format": "keras",
            "name": self.name,
            "flavour": self.flavour,
            **io_dict(self),
            "total_params": self.total_params,
            "trainable_params": self.trainable_params,
            "layers": [
                {"name": n, "class": c, "output_shape": s, "params": p}
                for n, c, s, p in self.layers
            ],
        }

    def __str__(self) -> str:
        head = (
            f"{self.name} ({self.flavour}): {len(self.inputs)} input(s), "
            f"{len(self.outputs)} output(s), {self.total_params:,} parameters "
            f"({self.trainable_params:,} trainable)"
        )
        rows = [[n, c, s, f"{p:,}"] for n, c, s, p in self.layers]
        return info_text(self, head, table=(["layer", "class", "output shape", "params"], rows))


@dataclass(frozen=True)
class SavedModelInfo:
    """A plain TensorFlow SavedModel: its serving signature and what it holds on disk.

    Attributes:
        signature_key: The signature described (``serving_default``).
        inputs: The signature's inputs, by name.
        graph_bytes: Size of ``saved_model.pb`` (or ``.pbtxt``).
        variables_bytes: Size of the files under ``variables/`` on disk.
        weights_by_dtype: The checkpoint's variables grouped by dtype.
    """

    name: str
    path: str
    signature_key: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    graph_bytes: int
    variables_bytes: int
    weights_by_dtype: tuple[WeightGroup, ...]
    #: How the signature is fed (batch dimensions, scalars, a static batch).
    layout: FeedLayout | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``: inputs and outputs are lists of objects."""
        return {
            "format": "saved_model",
            "name": self.name,
            "path": self.path,
            "signature_key": self.signature_key,
            **io_dict(self),
            "graph_bytes": self.graph_bytes,
            "variables_bytes": self.variables_bytes,
        }

    def __str__(self) -> str:
        return info_text(
            self,
            f"{self.name} (saved_model): signature {self.signature_key!r}; graph "
            f"{self.graph_bytes:,} bytes, variables {self.variables_bytes:,} bytes on disk",
        )


ModelInfo = TFLiteInfo | KerasInfo | SavedModelInfo | OnnxInfo


def inspect_model(
    model: ModelLike, *, safe_mode: bool = True, batch_dims: Mapping[str, int] | None = None
) -> ModelInfo:
    """Describe a model of any format tfcompress loads.

    * ``.tflite``: every input and output (signature name, stored dtype, shape, scale and
      zero point), the op histogram (custom ops as ``CUSTOM: <code>``), weights by dtype,
      and the size split into weights and graph.
    * ``.onnx``: IR version, opsets, producer, op histogram, initializers by dtype, inputs
      and outputs.
    * Keras: inputs, outputs, layers, parameters, weights by dtype.
    * SavedModel: the serving signature's inputs and outputs, graph and variables size.

    Every answer also says how tfcompress feeds the signature
    (:mod:`tfcompress.models.feeding`): ``N`` at each tensor's batch dimension (``h (2, N,
    16)`` for a state), scalars, and a static batch.

    Args:
        model: A loaded model, ``.tflite`` bytes, or a path.
        safe_mode: Refuse Keras files that would run code when loaded (Lambda layers);
            False only for files you trust (``--unsafe``).
        batch_dims: Input name -> the dimension that is its batch, where the signature
            cannot tell (shown as it would be fed).

    Returns:
        :class:`TFLiteInfo`, :class:`OnnxInfo`, :class:`KerasInfo` or
        :class:`SavedModelInfo`; ``str()`` gives the human report, ``to_dict()`` the JSON.

    Raises:
        ModelLoadError: A bad path or file.
        UnsupportedModelError: A Keras model without inputs (subclassed, never built), a
            SavedModel without its serving signature.
        MissingDependencyError: An ``.onnx`` without the onnx package installed.

    Example:
        >>> print(inspect_model("model_int8.tflite"))  # doctest: +SKIP
        >>> inspect_model("detector.onnx").to_dict()["outputs"]  # doctest: +SKIP
    """
    loaded = resolve_model(model, safe_mode=safe_mode)
    info: ModelInfo
    if isinstance(loaded, TFLiteModel):
        info = inspect_tflite(loaded)
    elif isinstance(loaded, OnnxModel):
        info = inspect_onnx(loaded)
    elif isinstance(loaded, SavedModelDir):
        info = _inspect_saved_model(loaded)
    elif flavour_of(loaded) is None:  # resolve_model lets nothing else through today
        raise UnsupportedModelError(
            f"{model_name(loaded)}: inspect reads .tflite, .onnx, Keras and SavedModel models."
        )
    else:
        info = _inspect_keras(loaded)
    signature = ModelSignature(tuple(info.inputs), tuple(info.outputs))
    return replace(info, layout=feed_layout(signature, batch_dims=batch_dims, name=info.name))


def _inspect_keras(model: Any) -> KerasInfo:
    layers = []
    for layer in model.layers:
        try:
            shape = str(tuple(layer.output.shape))
        except (AttributeError, ValueError):
            shape = "?"
        layers.append((layer.name, type(layer).__name__, shape, int(layer.count_params())))
    trainable = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    signature = model_signature(model)
    weights: list[tuple[str, int, bool | None]] = []
    for variable in model.weights:
        dtype = str(getattr(variable.dtype, "name", variable.dtype))
        name = str(getattr(variable, "path", None) or variable.name)
        count = math.prod(int(d) for d in variable.shape)
        is_bias = name.split(":")[0].rsplit("/", 1)[-1] == "bias"
        weights.append((dtype, count * _itemsize(dtype), is_bias))
    return KerasInfo(
        name=model_name(model),
        flavour=str(flavour_of(model)),
        inputs=signature.inputs,
        outputs=signature.outputs,
        layers=tuple(layers),
        total_params=int(model.count_params()),
        trainable_params=trainable,
        weights_by_dtype=group_weights(weights),
    )


def _inspect_saved_model(model: SavedModelDir) -> SavedModelInfo:
    from tfcompress._compat.tf import tensorflow

    signature = model_signature(model)  # loads the SavedModel, wrapped in saved_model_errors
    graph = model.path / "saved_model.pb"
    if not graph.is_file():
        graph = model.path / "saved_model.pbtxt"
    folder = model.path / "variables"
    files = [f for f in folder.iterdir() if f.is_file()] if folder.is_dir() else []
    on_disk = sum(f.stat().st_size for f in files)
    weights: list[tuple[str, int, bool | None]] = []
    if (folder / "variables.index").is_file():
        with saved_model_errors(model.shown, copy=model.path):
            reader = tensorflow().train.load_checkpoint(str(folder / "variables"))
            shapes = reader.get_variable_to_shape_map()
            for name, dtype in reader.get_variable_to_dtype_map().items():
                if dtype.name != "string":  # the checkpoint's own object graph
                    size = math.prod(int(d) for d in shapes[name]) * dtype.size
                    weights.append((dtype.name, size, None))
    return SavedModelInfo(
        name=model.name,
        path=str(model.shown),
        signature_key=model.signature_key,
        inputs=signature.inputs,
        outputs=signature.outputs,
        graph_bytes=graph.stat().st_size if graph.is_file() else 0,
        variables_bytes=on_disk,
        weights_by_dtype=group_weights(weights),
    )


def _itemsize(dtype: str) -> int:
    """Bytes per element of a Keras variable's dtype (TensorFlow's names: bfloat16 too)."""
    from tfcompress._compat.tf import tensorflow

    return int(tensorflow().as_dtype(dtype).size)
