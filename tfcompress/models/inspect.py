"""What is inside a model: tensors, ops and where the bytes go (``.tflite``), or layers (Keras)."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from tfcompress._compat.keras import flavour_of
from tfcompress.errors import UnsupportedModelError
from tfcompress.models.loading import ModelLike, TFLiteModel, model_name, resolve_model
from tfcompress.models.signature import input_spec
from tfcompress.models.tflite_file import Tensor, read_tflite
from tfcompress.report.table import format_table


@dataclass(frozen=True)
class TensorInfo:
    """One input or output tensor of a ``.tflite``."""

    name: str
    dtype: str
    shape: tuple[int | None, ...]
    scale: float
    zero_point: int

    def describe(self) -> str:
        """``name int8 (N, 28, 28, 1) q=(0.0039, -128)``."""
        dims = ", ".join("N" if d is None else str(d) for d in self.shape)
        quant = f" q=({self.scale:.6g}, {self.zero_point})" if self.scale else ""
        return f"{self.name} {self.dtype} ({dims}){quant}"


@dataclass(frozen=True)
class TFLiteInfo:
    """Structure and size breakdown of a ``.tflite``."""

    name: str
    size_bytes: int
    weight_bytes: int
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    op_histogram: dict[str, int]
    tensor_count: int
    subgraph_count: int

    @property
    def graph_bytes(self) -> int:
        """Everything that is not a constant buffer: ops, tensors, metadata."""
        return self.size_bytes - self.weight_bytes

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        return {"format": "tflite", **asdict(self), "graph_bytes": self.graph_bytes}

    def __str__(self) -> str:
        ops = format_table(["op", "count"], [[op, str(n)] for op, n in self.op_histogram.items()])
        weights = self.weight_bytes / self.size_bytes if self.size_bytes else 0.0
        return "\n".join(
            [
                f"{self.name}: {self.size_bytes:,} bytes (weights {self.weight_bytes:,} = "
                f"{weights:.1%}, graph {self.graph_bytes:,}); {self.tensor_count} tensors, "
                f"{sum(self.op_histogram.values())} ops in {self.subgraph_count} subgraph(s)",
                *(f"input  {t.describe()}" for t in self.inputs),
                *(f"output {t.describe()}" for t in self.outputs),
                "",
                ops,
            ]
        )


@dataclass(frozen=True)
class KerasInfo:
    """Layers and parameters of a Keras model."""

    name: str
    flavour: str
    input: str
    layers: tuple[tuple[str, str, str, int], ...]  # (name, class, output shape, params)
    total_params: int
    trainable_params: int

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        return {
            "format": "keras",
            "name": self.name,
            "flavour": self.flavour,
            "input": self.input,
            "total_params": self.total_params,
            "trainable_params": self.trainable_params,
            "layers": [
                {"name": n, "class": c, "output_shape": s, "params": p}
                for n, c, s, p in self.layers
            ],
        }

    def __str__(self) -> str:
        rows = [[n, c, s, f"{p:,}"] for n, c, s, p in self.layers]
        return "\n".join(
            [
                f"{self.name} ({self.flavour}): input {self.input}, {self.total_params:,} "
                f"parameters ({self.trainable_params:,} trainable)",
                "",
                format_table(["layer", "class", "output shape", "params"], rows),
            ]
        )


def inspect_model(model: ModelLike) -> TFLiteInfo | KerasInfo:
    """Describe a ``.tflite`` (tensors, op histogram, size breakdown) or a Keras model (layers).

    Args:
        model: A loaded model, ``.tflite`` bytes, or a path.

    Returns:
        :class:`TFLiteInfo` or :class:`KerasInfo`; ``str()`` gives the human report.

    Raises:
        ModelLoadError: A bad path or file.
        UnsupportedModelError: A plain SavedModel (inspect its Keras source or .tflite).

    Example:
        >>> print(inspect_model("model_int8.tflite"))  # doctest: +SKIP
    """
    loaded = resolve_model(model)
    if isinstance(loaded, TFLiteModel):
        return _inspect_tflite(loaded)
    if flavour_of(loaded) is None:
        raise UnsupportedModelError(
            f"{model_name(loaded)}: inspect reads .tflite files and Keras models; convert the "
            "SavedModel first with `tfcompress quantize --recipe float32`."
        )
    return _inspect_keras(loaded)


def _inspect_tflite(model: TFLiteModel) -> TFLiteInfo:
    parsed = read_tflite(model.content, source=model.path or model.name)
    parsed.validate(source=model.path or model.name)
    ops = Counter(op.opcode for graph in parsed.subgraphs for op in graph.operators)
    main = parsed.subgraphs[0]
    return TFLiteInfo(
        name=model.name,
        size_bytes=model.size_bytes,
        weight_bytes=parsed.weight_bytes,
        inputs=tuple(_tensor_info(main.tensors[i]) for i in main.inputs),
        outputs=tuple(_tensor_info(main.tensors[i]) for i in main.outputs),
        op_histogram=dict(ops.most_common()),
        tensor_count=sum(len(graph.tensors) for graph in parsed.subgraphs),
        subgraph_count=len(parsed.subgraphs),
    )


def _tensor_info(tensor: Tensor) -> TensorInfo:
    # Like the interpreter's details: a (scale, zero point) only for per-tensor quantization.
    params = tensor.quantization
    per_tensor = params is not None and len(params.scales) == 1 and len(params.zero_points) == 1
    return TensorInfo(
        name=tensor.name,
        dtype=tensor.dtype,
        shape=tuple(None if d < 0 else d for d in tensor.signature),
        scale=params.scales[0] if per_tensor else 0.0,  # type: ignore[union-attr]
        zero_point=params.zero_points[0] if per_tensor else 0,  # type: ignore[union-attr]
    )


def _inspect_keras(model: Any) -> KerasInfo:
    layers = []
    for layer in model.layers:
        try:
            shape = str(tuple(layer.output.shape))
        except (AttributeError, ValueError):
            shape = "?"
        layers.append((layer.name, type(layer).__name__, shape, int(layer.count_params())))
    trainable = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    return KerasInfo(
        name=model_name(model),
        flavour=str(flavour_of(model)),
        input=input_spec(model).describe(),
        layers=tuple(layers),
        total_params=int(model.count_params()),
        trainable_params=trainable,
    )
