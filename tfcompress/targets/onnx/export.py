"""Keras -> ONNX through tf2onnx, verified against Keras before anything is written.

The ONNX graph keeps the Keras model's tensor names: one graph input per Keras input and
one graph output per Keras output, in the Keras order, so data and labels keyed by those
names feed the export unchanged. tf2onnx does not raise on an op it cannot convert: it
leaves a TensorFlow op in the graph, which no ONNX runtime can load. The export is
therefore checked for ops outside the ONNX standard, then run on ONNX Runtime against
Keras (:mod:`tfcompress.targets.onnx.verify`).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tfcompress._compat.keras import flavour_of
from tfcompress._compat.onnx import onnx_module, quiet_onnx_tools, tf2onnx_module
from tfcompress._compat.tf import tensorflow
from tfcompress._files import PathLike, check_output_path, write_bytes_atomic
from tfcompress.data import DataLike
from tfcompress.errors import ConversionError, InvalidInputError, UnsupportedModelError
from tfcompress.models.loading import ModelLike, model_name, resolve_model
from tfcompress.models.onnx import OnnxModel
from tfcompress.models.signature import ModelSignature, model_signature
from tfcompress.targets.onnx.verify import (
    DEFAULT_ATOL,
    OnnxVerification,
    compare_outputs,
    verification_feed,
)

logger = logging.getLogger(__name__)

DEFAULT_OPSET = 17
#: Opsets tf2onnx 1.17 writes (it tests 14-18; 13 is the first with per-axis QDQ, which
#: ONNX Runtime's per-channel int8 needs).
OPSETS = range(13, 19)
_MAX_PROTO_BYTES = 2**31 - 1  # protobuf cannot serialize a message over 2 GB
_TF_NAME = re.compile(r"[^A-Za-z0-9_.\-/]")
#: Ops tf2onnx leaves unconverted that a layer change avoids.
_HINTS = {
    "Erfc": "exact GELU (approximate=False) uses Erfc: use gelu(approximate=True)",
    "Erfinv": "erfinv has no ONNX op",
    "RFFT": "tf2onnx converts RFFT only when followed by ComplexAbs (spectrogram magnitudes)",
    "Real": "complex tensors have no ONNX type",
    "Imag": "complex tensors have no ONNX type",
}


@dataclass(frozen=True)
class OnnxExport(OnnxModel):
    """An ONNX export of a Keras model, with the check that it computes what Keras does.

    It is an :class:`~tfcompress.models.onnx.OnnxModel`: run it, evaluate it, quantize it.

    Attributes:
        verification: Max abs difference to Keras, output by output.
        seconds: Wall time of the conversion and the check.
    """

    source: str = "model"
    opset: int = DEFAULT_OPSET
    verification: OnnxVerification | None = None
    seconds: float = 0.0

    def save(self, path: PathLike, *, overwrite: bool = False) -> Path:
        """Write the ``.onnx`` atomically; refuses to replace a file unless ``overwrite``."""
        return write_bytes_atomic(path, self.content, overwrite=overwrite)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports (no model bytes)."""
        return {
            "source": self.source,
            "opset": self.opset,
            "size_bytes": self.size_bytes,
            "path": None if self.path is None else str(self.path),
            "seconds": round(self.seconds, 3),
            "verification": None if self.verification is None else self.verification.to_dict(),
        }

    def __str__(self) -> str:
        text = f"{self.source} -> ONNX opset {self.opset}: {self.size_bytes:,} bytes"
        if self.verification is not None:
            text += f"; {self.verification}"
        return text + f" ({self.seconds:.1f}s)"


def check_opset(name: str, value: Any) -> int:
    """The check of ``OnnxRecipe.opset`` and :func:`export_onnx`'s: one tf2onnx writes."""
    if isinstance(value, bool) or value not in OPSETS:
        raise InvalidInputError(
            f"{name} {value!r} is not one tf2onnx 1.17 writes; choose {OPSETS.start} to "
            f"{OPSETS.stop - 1} (default {DEFAULT_OPSET})."
        )
    return value


def export_onnx(
    model: ModelLike,
    path: PathLike | None = None,
    *,
    opset: int = DEFAULT_OPSET,
    sample_data: DataLike | None = None,
    atol: float = DEFAULT_ATOL,
    overwrite: bool = False,
    safe_mode: bool = True,
) -> OnnxExport:
    """Convert a Keras model (Keras 3 or tf-keras) to ONNX with tf2onnx, and verify it.

    The graph is traced from ``model(inputs, training=False)`` with a dynamic batch
    dimension; its inputs and outputs keep the Keras names. Before the export is returned
    (or written), ONNX Runtime runs it next to Keras on ``sample_data`` (or seeded random
    inputs of each input's shape) and every output must be within ``atol`` (max abs).

    Args:
        model: A Keras model or a path to one (``.keras``/``.h5``).
        path: Where to write the ``.onnx`` (atomically, after the check); None keeps it in
            memory (:meth:`OnnxExport.save` writes it later).
        opset: ONNX opset, 13 to 18 (tf2onnx 1.17's range).
        sample_data: Samples to check the export on (any source
            :func:`tfcompress.data.load_data` reads, at most 64 used; labels ignored);
            needed when an input has unknown dimensions besides the batch.
        atol: Largest max-abs difference allowed on any output.
        overwrite: Replace ``path`` if it exists.
        safe_mode: See :func:`tfcompress.models.load_model` (paths only).

    Raises:
        UnsupportedModelError: Not a Keras model, or an export over protobuf's 2 GB.
        InvalidInputError: An opset outside 13-18, or a negative ``atol``.
        InvalidDataError: ``sample_data`` does not fit the model (or is missing for an input
            with unknown dimensions).
        ConversionError: tf2onnx failed or left ops it cannot convert (the message names
            them), ONNX Runtime cannot run the export, or an output differs from Keras by
            more than ``atol`` (the message names the output and the difference).
        OutputExistsError: ``path`` exists and ``overwrite`` is False.
        MissingDependencyError: tf2onnx, onnx or onnxruntime are not installed.

    Example:
        >>> export = tfcompress.export_onnx(keras_model, opset=17)  # doctest: +SKIP
        >>> export.verification.passed  # doctest: +SKIP
        True
        >>> export.save("model.onnx")  # doctest: +SKIP
    """
    start = time.perf_counter()
    check_opset("opset", opset)
    if not (isinstance(atol, int | float) and atol >= 0):
        raise InvalidInputError(f"atol must be a number >= 0, got {atol!r}.")
    loaded = resolve_model(model, safe_mode=safe_mode)
    if flavour_of(loaded) is None:
        kind = type(loaded).__name__
        what = {
            "SavedModelDir": "a SavedModel",
            "TFLiteModel": "a .tflite",
            "OnnxModel": "an .onnx",
        }.get(kind, kind)
        raise UnsupportedModelError(
            f"export-onnx converts Keras models, not {what}: give the .keras or .h5 file it "
            "came from (or pass the Keras model object)."
        )
    if path is not None:
        check_output_path(path, overwrite=overwrite)
    name = model_name(loaded)
    signature = model_signature(loaded)
    feed, inputs = verification_feed(signature, sample_data, name=name)
    function, specs = _traced_call(loaded, signature)
    proto = _convert(function, specs, opset, name)
    _order_outputs(proto, signature.output_names)
    if proto.ByteSize() > _MAX_PROTO_BYTES:
        raise UnsupportedModelError(
            f"the ONNX export of {name} would be over 2 GB, protobuf's limit for one file; "
            "tfcompress does not write ONNX external data (and tf2onnx 1.17's large-model "
            "path does not run on numpy 2)."
        )
    content = proto.SerializeToString()
    draft = OnnxModel(content, label=f"{name}_float32.onnx")

    def keras_outputs(x: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        args = [tensorflow().constant(x[spec.name], dtype=spec.dtype) for spec in signature.inputs]
        return {key: value.numpy() for key, value in function(*args).items()}

    verification = compare_outputs(keras_outputs, draft, signature, feed, inputs=inputs, atol=atol)
    if not verification.passed:
        output, diff = verification.worst
        raise ConversionError(
            f"the ONNX export of {name} does not match Keras: output {output!r} differs by up "
            f"to {diff:.3g} (max abs over {verification.samples} "
            f"{'random' if inputs == 'random' else 'given'} samples; allowed {atol:g}); try "
            "another --opset, or pass --data with real samples if random inputs are "
            "out of range."
        )
    written = None if path is None else write_bytes_atomic(path, content, overwrite=overwrite)
    seconds = time.perf_counter() - start
    logger.info("exported %s to ONNX opset %d: %s", name, opset, verification)
    return OnnxExport(
        content,
        written,
        label=f"{name}_float32.onnx" if written is None else None,
        source=name,
        opset=opset,
        verification=verification,
        seconds=seconds,
    )


def _traced_call(model: Any, signature: ModelSignature) -> tuple[Any, tuple[Any, ...]]:
    """``tf.function`` of ``model(inputs, training=False)``: inputs positional, outputs by name."""
    tf = tensorflow()
    specs = tuple(
        tf.TensorSpec((None, *spec.sample_shape), spec.dtype, name=_tf_name(spec.name, i))
        for i, spec in enumerate(signature.inputs)
    )
    names = signature.output_names

    def call(*xs: Any) -> dict[str, Any]:
        result = model(list(xs) if len(xs) > 1 else xs[0], training=False)
        if isinstance(result, Mapping):
            return dict(result)
        flat = result if isinstance(result, Sequence) else [result]
        return dict(zip(names, flat, strict=True))

    return tf.function(call, input_signature=specs), specs


def _tf_name(name: str, index: int) -> str:
    cleaned = _TF_NAME.sub("_", name)
    return cleaned if cleaned and cleaned[0].isalnum() else f"input_{index}"


def _convert(function: Any, specs: tuple[Any, ...], opset: int, name: str) -> Any:
    tf2onnx = tf2onnx_module()
    with quiet_onnx_tools("tf2onnx") as lines:
        try:
            proto, _ = tf2onnx.convert.from_function(function, input_signature=specs, opset=opset)
        except (ValueError, TypeError, RuntimeError, KeyError, AttributeError) as error:
            raise ConversionError(
                f"tf2onnx could not convert {name} ({type(error).__name__}: "
                f"{' '.join(str(error).split())[:300]}); try another --opset."
            ) from error
    unsupported = _non_standard_nodes(proto)
    if unsupported:
        kinds = sorted({node.op_type for node in unsupported})
        hints = "; ".join(_HINTS[kind] for kind in kinds if kind in _HINTS)
        raise ConversionError(
            f"tf2onnx cannot convert {len(unsupported)} op(s) of {name} to ONNX: "
            f"{', '.join(kinds)} (first at {unsupported[0].name!r}); replace the layer that "
            f"uses {'it' if len(kinds) == 1 else 'them'}{f' ({hints})' if hints else ''}."
        )
    logger.debug("tf2onnx said %d line(s) converting %s", len(lines), name)
    return proto


def _non_standard_nodes(proto: Any) -> list[Any]:
    """Nodes of the default ONNX domain whose op type ONNX does not define (TF leftovers)."""
    defs = onnx_module().defs
    return [
        node
        for node in proto.graph.node
        if node.domain in ("", "ai.onnx") and not defs.has(node.op_type)
    ]


def _order_outputs(proto: Any, names: Sequence[str]) -> None:
    """Put the graph outputs in the Keras order (tf2onnx sorts them by name)."""
    order = {name: i for i, name in enumerate(names)}
    outputs = list(proto.graph.output)
    ranked = sorted(range(len(outputs)), key=lambda i: order.get(outputs[i].name, len(order) + i))
    if ranked == list(range(len(outputs))):
        return
    copies = [type(outputs[i])() for i in ranked]
    for copy, i in zip(copies, ranked, strict=True):
        copy.CopyFrom(outputs[i])
    del proto.graph.output[:]
    proto.graph.output.extend(copies)
