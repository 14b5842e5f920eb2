"""The inputs and outputs a model has, whatever its format: names, shapes and dtypes.

Tensors are matched by name everywhere in tfcompress: signature names for a ``.tflite``
(``serving_default``'s keys, e.g. ``image`` and ``Identity_1``), input/output names for Keras
and ONNX. Where a format stores no names, the tensors keep the model's own order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tfcompress._compat.keras import input_name, layer_name
from tfcompress.errors import UnsupportedModelError
from tfcompress.models.loading import (
    KerasFile,
    SavedModelDir,
    TFLiteModel,
    load_saved_model,
    model_name,
)
from tfcompress.models.onnx import OnnxModel, parse

Shape = tuple[int | None, ...]


def format_shape(shape: Shape) -> str:
    """A shape as people read it: ``N`` for the batch dimension, ``?`` for other unknown ones.

    Example:
        >>> format_shape((None, None, 1))
        '(N, ?, 1)'
        >>> format_shape((1, 16000))
        '(1, 16000)'
    """
    dims = [
        "N" if i == 0 and d is None else "?" if d is None else str(d) for i, d in enumerate(shape)
    ]
    return f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"


@dataclass(frozen=True)
class TensorSpec:
    """Name, shape (batch dimension first, None = any size) and dtype of one model tensor.

    For a quantized ``.tflite`` the dtype is the one tfcompress feeds or returns (float32):
    runners quantize and dequantize with the tensor's scale and zero point, so one dataset
    feeds every variant of a model.

    Example:
        >>> TensorSpec(shape=(None, 28, 28, 1), dtype="float32", name="image").describe()
        '(N, 28, 28, 1) float32'
    """

    shape: Shape
    dtype: str = "float32"
    name: str = "input"

    @property
    def sample_shape(self) -> Shape:
        """The shape of one sample (without the batch dimension)."""
        return self.shape[1:]

    @property
    def is_dynamic(self) -> bool:
        """Whether a dimension other than the batch is unknown (e.g. audio length)."""
        return any(d is None for d in self.sample_shape)

    def describe(self) -> str:
        """Shape and dtype, e.g. ``(N, 28, 28, 1) float32`` (the name is :attr:`name`)."""
        return f"{format_shape(self.shape)} {self.dtype}"

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON: ``{"name", "shape" (None = any), "dtype"}``."""
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}


@dataclass(frozen=True)
class ModelSignature:
    """Every input and output of a model, in a stable order.

    Example:
        >>> a, p = TensorSpec((None, 4), name="a"), TensorSpec((None, 2), name="p")
        >>> sig = ModelSignature((a,), (p,))
        >>> sig.input_names, sig.output_names
        (('a',), ('p',))
    """

    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    @property
    def input_names(self) -> tuple[str, ...]:
        """Input names in order."""
        return tuple(spec.name for spec in self.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        """Output names in order."""
        return tuple(spec.name for spec in self.outputs)

    def output(self, name: str) -> TensorSpec:
        """The output called ``name``.

        Raises:
            UnsupportedModelError: No such output (the message lists the outputs).
        """
        for spec in self.outputs:
            if spec.name == name:
                return spec
        raise UnsupportedModelError(
            f"the model has no output {name!r}; its outputs are {', '.join(self.output_names)}."
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data: ``{"inputs": [...], "outputs": [...]}``."""
        return {
            "inputs": [spec.to_dict() for spec in self.inputs],
            "outputs": [spec.to_dict() for spec in self.outputs],
        }


def model_signature(model: Any) -> ModelSignature:
    """Read every input and output of a loaded model.

    Returns:
        Inputs and outputs, named and in a stable order.

    Raises:
        UnsupportedModelError: A model without a readable signature (a subclassed Keras
            model never built, a SavedModel without its serving signature).

    Example:
        >>> model_signature(load_model("face_landmark.tflite")).output_names  # doctest: +SKIP
        ('Identity', 'Identity_1')
    """
    if isinstance(model, TFLiteModel):
        return _tflite_signature(model)
    if isinstance(model, KerasFile):  # read in the child that converts it
        return model.facts()["signature"]  # type: ignore[no-any-return]
    if isinstance(model, SavedModelDir):  # TensorFlow loads it in the child that converts
        from dataclasses import replace

        from tfcompress._child import call

        return call(  # type: ignore[no-any-return]
            "tfcompress.models.signature:_saved_model_signature",
            replace(model, keep=None),  # the caller keeps the private copy alive
            what=f"reading the signature of the SavedModel {model.shown}",
            follow="tensorflow",
        )
    return _onnx_signature(model) if isinstance(model, OnnxModel) else _keras_signature(model)


def input_spec(model: Any) -> TensorSpec:
    """The input of a single-input model.

    Raises:
        UnsupportedModelError: The model has several inputs (use :func:`model_signature`).

    Example:
        >>> input_spec(keras_model).describe()  # doctest: +SKIP
        '(N, 28, 28, 1) float32'
    """
    signature = model_signature(model)
    if len(signature.inputs) != 1:
        raise UnsupportedModelError(
            f"{model_name(model)} has {len(signature.inputs)} inputs "
            f"({', '.join(signature.input_names)}); pass data as a dict or an .npz with one "
            "array per input name."
        )
    return signature.inputs[0]


def _keras_signature(model: Any) -> ModelSignature:
    try:
        inputs = list(model.inputs or [])
        outputs = list(model.outputs or [])
    except (AttributeError, ValueError):
        inputs, outputs = [], []
    if not inputs or not outputs:
        raise UnsupportedModelError(
            f"model {model_name(model)!r} has no input signature (subclassed or never built); "
            "build it as a Sequential/Functional model starting with keras.Input(shape=...)."
        )
    output_names = _keras_output_names(model, len(outputs))
    return ModelSignature(
        tuple(_keras_tensor(t, input_name(t, i)) for i, t in enumerate(inputs)),
        tuple(_keras_tensor(t, name) for t, name in zip(outputs, output_names, strict=True)),
    )


def _keras_output_names(model: Any, count: int) -> list[str]:
    names = list(getattr(model, "output_names", None) or [])
    if len(names) == count and len(set(names)) == count:
        return [str(n) for n in names]
    found = [str(layer_name(t) or f"output_{i}") for i, t in enumerate(model.outputs)]
    return found if len(set(found)) == count else [f"output_{i}" for i in range(count)]


def _keras_tensor(tensor: Any, name: str) -> TensorSpec:
    shape = tensor.shape.as_list() if hasattr(tensor.shape, "as_list") else list(tensor.shape)
    dtype = getattr(tensor.dtype, "name", tensor.dtype)
    return TensorSpec(tuple(None if d is None else int(d) for d in shape), str(dtype), name)


def _onnx_signature(model: OnnxModel) -> ModelSignature:
    """Read from the graph; initializers listed as graph inputs (older exporters) are constants.

    Raises:
        UnsupportedModelError: ``onnx`` is not installed to read them.
    """
    proto = parse(model)
    if proto is None:
        raise UnsupportedModelError(
            f"{model.name}: reading an ONNX model's inputs needs the onnx package; "
            "pip install 'tfcompress[onnx]'."
        )
    import onnx

    def spec(value: Any) -> TensorSpec:
        tensor = value.type.tensor_type
        shape = tuple(
            int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else None
            for d in tensor.shape.dim
        )
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type).name
        return TensorSpec(shape, dtype, value.name)

    constants = {init.name for init in proto.graph.initializer}
    inputs = tuple(spec(i) for i in proto.graph.input if i.name not in constants)
    return ModelSignature(inputs, tuple(spec(o) for o in proto.graph.output))


def _tflite_signature(model: TFLiteModel) -> ModelSignature:
    from tfcompress.models.tflite_file import read_tflite

    parsed = read_tflite(model.content, source=model.path or model.name)
    if not parsed.subgraphs:
        raise UnsupportedModelError(f"{model.name} has no subgraph to run; re-export it.")
    graph = parsed.subgraphs[0]
    names: dict[int, str] = {}
    for signature in parsed.signature_defs:
        if signature.subgraph_index == 0:
            names.update({index: key for key, index in (*signature.inputs, *signature.outputs)})
            break

    def spec(index: int) -> TensorSpec:
        tensor = graph.tensors[index]
        shape = tuple(None if int(d) < 0 else int(d) for d in tensor.signature)
        params = tensor.quantization
        float_fed = tensor.dtype in {"int8", "uint8", "int16"} and bool(params and params.scales)
        return TensorSpec(
            shape, "float32" if float_fed else tensor.dtype, names.get(index, tensor.name)
        )

    return ModelSignature(
        tuple(spec(i) for i in graph.inputs), tuple(spec(i) for i in graph.outputs)
    )


def _saved_model_signature(model: SavedModelDir) -> ModelSignature:
    loaded = load_saved_model(model)
    signature = loaded.signatures.get(model.signature_key)
    if signature is None:
        raise UnsupportedModelError(
            f"{model.shown}: no {model.signature_key!r} signature; export the model with one."
        )
    inputs = signature.structured_input_signature[1]
    outputs = signature.structured_outputs

    def spec(name: str, tensor: Any) -> TensorSpec:
        return TensorSpec(tuple(tensor.shape.as_list()), tensor.dtype.name, name)

    return ModelSignature(
        tuple(spec(name, inputs[name]) for name in sorted(inputs)),
        tuple(spec(name, outputs[name]) for name in sorted(outputs)),
    )


def tflite_io_tensors(
    model: TFLiteModel,
) -> tuple[tuple[tuple[TensorSpec, Any], ...], tuple[tuple[TensorSpec, Any], ...]]:
    """Each input and output of a ``.tflite`` as (its spec, its tensor in the file).

    The spec is :func:`model_signature`'s (signature name, the dtype tfcompress feeds); the
    :class:`~tfcompress.models.tflite_file.Tensor` keeps what the file stores: the dtype
    (``int8``, ``uint8``), quantization and the graph's own tensor name.

    Raises:
        UnsupportedModelError: The model has no subgraph.
    """
    from tfcompress.models.tflite_file import read_tflite

    signature = _tflite_signature(model)
    graph = read_tflite(model.content, source=model.path or model.name).subgraphs[0]
    # _tflite_signature lists the tensors in the subgraph's own input/output order.
    return (
        tuple(zip(signature.inputs, (graph.tensors[i] for i in graph.inputs), strict=True)),
        tuple(zip(signature.outputs, (graph.tensors[i] for i in graph.outputs), strict=True)),
    )
