"""ONNX Runtime's quantizers on in-memory ``.onnx`` bytes: static int8 (QDQ), dynamic, float16.

Static int8 calibration streams: a :class:`CalibrationDataReader` hands ONNX Runtime one
batch of :data:`CALIBRATION_BATCH` samples per call, drawn lazily from the calibration set.
ONNX Runtime's histogram calibrators (``entropy``, ``percentile``) keep every activation
they are fed within one ``collect_data`` call and build their histograms only at its end
(checked in onnxruntime 1.32, ``calibrate.HistogramCalibrater.collect_data``); ``minmax``
keeps only each batch's minimum and maximum. So the reader is *strided*
(``CalibStridedMinMax``, which ONNX Runtime applies to every method): ONNX Runtime collects
:data:`CALIBRATION_CHUNK` batches at a time and merges the histograms (or ranges) between
chunks. Peak calibration memory is therefore the activations of ``CALIBRATION_BATCH *
CALIBRATION_CHUNK`` samples plus the histograms, whatever the size of the calibration set.
Merging histograms chunk by chunk re-bins the earlier ones, so ``entropy``/``percentile``
ranges can differ slightly from one pass over all samples.
"""

from __future__ import annotations

import importlib
import logging
import math
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from tfcompress._compat.onnx import (
    float16_converter,
    onnx_module,
    ort_errors,
    ort_quantization,
    quiet_onnx_tools,
)
from tfcompress._files import PathLike
from tfcompress.data import DataLike, Dataset
from tfcompress.data.calibration import DEFAULT_CALIBRATION_SAMPLES
from tfcompress.errors import (
    ConversionError,
    InvalidInputError,
    ResourceLimitError,
    UnsupportedModelError,
)
from tfcompress.models.onnx import OnnxModel, onnx_graphs

logger = logging.getLogger(__name__)

#: Calibration methods, as tfcompress names them -> ``CalibrationMethod`` member names.
CALIBRATION_METHODS = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile"}
#: Samples per ONNX Runtime run during calibration.
CALIBRATION_BATCH = 8
#: Batches ONNX Runtime collects before it reduces them to ranges or histograms.
CALIBRATION_CHUNK = 4


def check_calibration_method(method: str) -> str:
    """Return ``method`` if ONNX Runtime calibration knows it.

    Raises:
        InvalidInputError: Another name (the message lists the methods).

    Example:
        >>> check_calibration_method("entropy")
        'entropy'
    """
    if method not in CALIBRATION_METHODS:
        raise InvalidInputError(
            f"unknown calibration method {method!r}; choose one of "
            f"{', '.join(CALIBRATION_METHODS)} (minmax is the default)."
        )
    return method


def static_int8(
    model: OnnxModel,
    calibration: Dataset,
    *,
    method: str = "minmax",
    per_channel: bool = True,
    progress: bool = False,
) -> bytes:
    """Quantize to int8 with ONNX Runtime's static quantizer, in QDQ format.

    Weights and activations become int8 (weights per output channel when ``per_channel``),
    activation ranges calibrated on ``calibration``; inputs and outputs stay float32.

    Args:
        model: The float model.
        calibration: Samples keyed by the model's input names (one array for a
            single-input model), already checked against the model.
        method: ``"minmax"``, ``"entropy"`` or ``"percentile"``.
        per_channel: One weight scale per output channel (else per tensor).
        progress: Draw a progress bar over the calibration batches.

    Returns:
        The quantized model's bytes.

    Raises:
        InvalidInputError: Unknown calibration method, or no calibration samples.
        ConversionError: ONNX Runtime's quantizer failed.
        MissingDependencyError: onnxruntime is not installed.

    Example:
        >>> content = static_int8(float_model, Dataset(x_calib))  # doctest: +SKIP
    """
    from tfcompress._child import call

    check_calibration_method(method)
    content, _ = call(
        "tfcompress.targets.onnx.ort_quantize:calibrate_static",
        model,
        _feeds(model, calibration),
        method=method,
        per_channel=per_channel,
        progress=progress,
        what=f"ONNX Runtime's int8 calibration of {model.name!r}",
        echo=progress,
    )
    return content


def calibrate_static(
    model: OnnxModel,
    feeds: list[dict[str, np.ndarray]],
    *,
    method: str,
    per_channel: bool,
    progress: bool = False,
) -> tuple[bytes, dict[str, int]]:
    """:func:`static_int8`'s work, in its child: ONNX Runtime runs the user's graph on the data.

    Returns:
        The quantized bytes, and how the reader was read: ``largest_chunk`` (batches one
        range held at most) and ``ranges`` (ranges collected one after the other).
    """
    quantization = ort_quantization()
    chosen = getattr(quantization.CalibrationMethod, CALIBRATION_METHODS[method])
    reader = make_reader(quantization.CalibrationDataReader, feeds, progress=progress)
    options = {"CalibStridedMinMax": CALIBRATION_CHUNK}
    content = _run(
        model,
        "static int8",
        lambda source, target: quantization.quantize_static(
            source,
            target,
            reader,
            quant_format=quantization.QuantFormat.QDQ,
            activation_type=quantization.QuantType.QInt8,
            weight_type=quantization.QuantType.QInt8,
            per_channel=per_channel,
            calibrate_method=chosen,
            extra_options=options,
        ),
    )
    return content, {"largest_chunk": reader.largest_chunk, "ranges": reader.ranges}


def dynamic_int8(model: OnnxModel, *, per_channel: bool = True) -> bytes:
    """Quantize weights to int8 with ONNX Runtime's dynamic quantizer.

    Activations are quantized at run time (``DynamicQuantizeLinear``, uint8): no
    calibration. Convolutions become ``ConvInteger``, matrix products ``MatMulInteger``.

    Args:
        model: The float model.
        per_channel: One weight scale per output channel (else per tensor).

    Returns:
        The quantized model's bytes.

    Raises:
        ConversionError: ONNX Runtime's quantizer failed.
        MissingDependencyError: onnxruntime is not installed.

    Example:
        >>> content = dynamic_int8(float_model)  # doctest: +SKIP
    """
    quantization = ort_quantization()
    return _run(
        model,
        "dynamic int8",
        lambda source, target: quantization.quantize_dynamic(
            source, target, weight_type=quantization.QuantType.QInt8, per_channel=per_channel
        ),
    )


def float16(model: OnnxModel) -> bytes:
    """Convert weights and computation to float16; inputs and outputs stay float32.

    Uses ONNX Runtime's copy of onnxconverter-common's converter (or onnxconverter-common),
    with its default list of ops kept in float32.

    Raises:
        ConversionError: The converter failed.
        MissingDependencyError: No float16 converter is installed (names the package).

    Example:
        >>> content = float16(float_model)  # doctest: +SKIP
    """
    converter = float16_converter()
    onnx = onnx_module()
    proto = onnx.load_from_string(model.content)
    try:
        with quiet_onnx_tools("float16"):
            converted = converter.convert_float_to_float16(proto, keep_io_types=True)
    except (ValueError, RuntimeError, KeyError, AssertionError) as error:
        raise ConversionError(
            f"the float16 converter could not convert {model.name} "
            f"({type(error).__name__}: {error})."
        ) from error
    return bytes(converted.SerializeToString())


def make_reader(base: type, feeds: list[dict[str, np.ndarray]], *, progress: bool = False) -> Any:
    """A strided ``CalibrationDataReader`` over ``feeds``, one batch per ``get_next``.

    Its length is the batch count rounded up to a multiple of :data:`CALIBRATION_CHUNK`
    (ONNX Runtime requires a multiple); ``set_range`` clamps to the real batches, and no
    chunk is empty, since every chunk starts below the batch count.

    Args:
        base: ``onnxruntime.quantization.CalibrationDataReader``.
        feeds: One feed (input name -> batch) per batch.
        progress: Draw a progress bar over the batches.

    Returns:
        The reader; ``largest_chunk`` says how many batches one range held at most and
        ``ranges`` how many ranges ONNX Runtime collected one after the other.
    """
    batches = len(feeds)
    padded = math.ceil(batches / CALIBRATION_CHUNK) * CALIBRATION_CHUNK

    class StridedReader(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            self.next, self.stop, self.largest_chunk, self.ranges = 0, batches, 0, 0
            self.bar = tqdm(total=batches, desc="calibrating", unit="batch", disable=not progress)

        def get_next(self) -> dict[str, np.ndarray] | None:
            if self.next >= self.stop:
                return None
            feed = feeds[self.next]
            self.next += 1
            self.bar.update(1)
            if self.next == batches:
                self.bar.close()
            return feed

        def __len__(self) -> int:
            return padded

        def set_range(self, start_index: int, end_index: int) -> None:
            self.next, self.stop = start_index, min(end_index, batches)
            self.largest_chunk = max(self.largest_chunk, self.stop - self.next)
            self.ranges += 1

    return StridedReader()


def _feeds(model: OnnxModel, calibration: Dataset) -> list[dict[str, np.ndarray]]:
    """The calibration samples in calls ONNX Runtime can run, by input name, model layout.

    :data:`CALIBRATION_BATCH` samples per call, or the model's own static batch (a file
    exported at batch 1 runs calls of 1, as ``benchmark`` and ``gate`` run it); a state
    whose batch is not its first dimension and a scalar input are fed as the model takes
    them (:func:`tfcompress.data.calibration.model_feeds`).
    """
    from tfcompress.data.calibration import CalibrationSet, model_feeds
    from tfcompress.models.feeding import feed_layout
    from tfcompress.models.signature import model_signature

    signature = model_signature(model)
    names = signature.input_names
    x = calibration.x
    arrays: Mapping[str, np.ndarray] = x if isinstance(x, Mapping) else {names[0]: x}
    missing = [name for name in names if name not in arrays]
    if missing:
        raise InvalidInputError(
            f"calibration data has no input {missing[0]!r} of {model.name} (it has "
            f"{', '.join(map(repr, arrays))})."
        )
    count = len(calibration)
    if count == 0:
        raise InvalidInputError("no calibration samples; pass a few hundred typical samples.")
    layout = getattr(calibration, "layout", None)
    if layout is None or [t.name for t in layout.inputs] != list(names):
        # Read for the Keras model (batch first): this export's own static batch, if any.
        calibration = CalibrationSet(
            {name: arrays[name] for name in names}, layout=feed_layout(signature)
        )
    return list(model_feeds(calibration, CALIBRATION_BATCH, names[:1]))


def constants_as_initializers(content: bytes) -> bytes:
    """``Constant`` nodes that hold float weights, moved to the graph's initializers.

    Paddle2ONNX and some PyTorch exports keep weights in ``Constant`` nodes; ONNX Runtime's
    quantizers only quantize initializers, so such a model came out of int8 3-5% *larger*
    (scales added, nothing quantized). The same tensor under the same name is the same
    model; ``content`` comes back unchanged when it has no such node.

    Example:
        >>> constants_as_initializers(content) == content  # no Constant weights
        ... # doctest: +SKIP
        True
    """
    onnx = onnx_module()
    proto = onnx.load_from_string(content)
    moved = 0
    for graph in onnx_graphs(proto.graph):
        kept = []
        for node in graph.node:
            tensor = _float_constant(onnx, node)
            if tensor is None:
                kept.append(node)
                continue
            tensor.name = node.output[0]
            graph.initializer.append(tensor)
            moved += 1
        if len(kept) != len(graph.node):
            del graph.node[:]
            graph.node.extend(kept)
    if not moved:
        return content
    logger.info("%d Constant node weight(s) moved to initializers to be quantized", moved)
    return bytes(proto.SerializeToString())


def _float_constant(onnx: Any, node: Any) -> Any | None:
    """The float tensor of a ``Constant`` node worth quantizing (a weight), else None."""
    if node.op_type != "Constant" or node.domain not in ("", "ai.onnx") or len(node.output) != 1:
        return None
    for attribute in node.attribute:
        if attribute.name == "value" and attribute.HasField("t"):
            tensor = attribute.t
            floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE)
            if tensor.data_type in floats and len(tensor.dims) >= 1:
                copy = onnx.TensorProto()
                copy.CopyFrom(tensor)
                return copy
    return None


# DequantizeLinear gained ``axis`` (per-channel scales) in opset 13.
PER_CHANNEL_OPSET = 13


def per_channel_ready(model: OnnxModel) -> tuple[OnnxModel, bool, str | None]:
    """``model`` at an opset whose DequantizeLinear takes per-channel scales, and a note.

    Paddle2ONNX, keras2onnx and many shipped files are opset 11/12, where ONNX Runtime's
    per-channel QDQ output does not load ("Unrecognized attribute: axis"). Such a model is
    upgraded with onnx's version converter; where that fails, the weights get per-tensor
    scales instead. Returns the model to quantize, whether per-channel scales stay possible,
    and what was done (None when the opset already allows them).
    """
    onnx = onnx_module()
    proto = onnx.load_from_string(model.content)
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None or opset >= PER_CHANNEL_OPSET:
        return model, True, None
    converter = importlib.import_module("onnx.version_converter")
    try:
        with quiet_onnx_tools("onnx version converter"):
            upgraded = converter.convert_version(proto, PER_CHANNEL_OPSET)
        content = bytes(upgraded.SerializeToString())
    except (converter.ConvertError, RuntimeError, ValueError, IndexError) as error:
        why = " ".join(str(error).split())[:200]
        return (
            model,
            False,
            (
                f"opset {opset} has no per-channel DequantizeLinear and onnx's version converter "
                f"could not upgrade {model.name} ({why}): weights quantized per tensor"
            ),
        )
    note = (
        f"opset {opset} upgraded to {PER_CHANNEL_OPSET} (onnx's version converter) for "
        "per-channel weight scales; the float file given is unchanged"
    )
    return OnnxModel(content, label=model.name), True, note


def _run(model: OnnxModel, what: str, quantize: Any) -> bytes:
    """Write ``model`` to a private folder, run ``quantize(source, target)``, read the result.

    Weights kept as ``Constant`` nodes are moved to initializers first
    (:func:`constants_as_initializers`), so the 8-bit quantizers see them.
    """
    with tempfile.TemporaryDirectory(prefix="tfcompress-onnx-") as folder:
        source, target = Path(folder) / "float.onnx", Path(folder) / "quantized.onnx"
        source.write_bytes(constants_as_initializers(model.content))
        # ONNX Runtime's own errors (InvalidArgument: a calibration call the model refuses)
        # derive from Exception only: one ConversionError naming the step, not exit 3.
        errors = (*ort_errors(), KeyError, TypeError, AssertionError)
        try:
            with quiet_onnx_tools(f"onnxruntime {what}"):
                quantize(str(source), str(target))
        except errors as error:
            words = " ".join(str(error).split())
            node = re.search(r"while running (\w+) node", words)
            if "Failed to allocate memory" in words:  # a tensor the data sized, in the child
                raise ResourceLimitError(
                    f"ONNX Runtime ran out of memory running {model.name}"
                    f"{f' (its {node[1]} node)' if node else ''} for {what} quantization; "
                    "set TFCOMPRESS_MEMORY_LIMIT=BYTES to allow more, if the model really "
                    "needs it."
                ) from error
            raise ConversionError(
                f"ONNX Runtime could not apply {what} quantization to {model.name} "
                f"({type(error).__name__}: {words[:300]})."
            ) from error
        return target.read_bytes()


def quantize_onnx_static(
    model: OnnxModel | PathLike,
    representative_data: DataLike,
    path: PathLike | None = None,
    *,
    per_channel: bool = True,
    max_samples: int = DEFAULT_CALIBRATION_SAMPLES,
    calibration_method: str = "minmax",
    overwrite: bool = False,
) -> OnnxModel:
    """Quantize a float ``.onnx`` to int8 (QDQ) on its own, without the Keras model.

    :func:`tfcompress.quantize` with ``format="onnx"`` is the verb (it exports, verifies,
    calibrates and returns sizes next to the float reference); this is its engine for a
    model already in ONNX, with the same representative-data adapter.

    Args:
        model: The float ONNX model or its path.
        representative_data: Samples like the ones the model will see (labels ignored), one
            array or one per input name.
        path: Where to write the quantized ``.onnx``; None keeps it in memory.
        per_channel: One scale per output channel for weights.
        max_samples: Calibration samples used at most (a seeded random subset).
        calibration_method: ``"minmax"``, ``"entropy"`` or ``"percentile"``.
        overwrite: Replace ``path`` if it exists.

    Returns:
        The int8 ONNX model.

    Raises:
        UnsupportedModelError: Not an ``.onnx`` model.
        InvalidDataError: The data does not fit the model's inputs.
        ConversionError: ONNX Runtime's quantizer failed.
        MissingDependencyError: onnxruntime is not installed.

    Example:
        >>> int8 = quantize_onnx_static("m.onnx", x_train, "m_int8.onnx")  # doctest: +SKIP
    """
    from tfcompress._files import check_output_path, write_bytes_atomic
    from tfcompress.data.calibration import calibration_set
    from tfcompress.models.loading import resolve_model
    from tfcompress.models.signature import model_signature

    source = model if isinstance(model, OnnxModel) else resolve_model(model)
    if not isinstance(source, OnnxModel):
        raise UnsupportedModelError("quantize_onnx_static takes an .onnx model; export first.")
    check_calibration_method(calibration_method)
    calibration = calibration_set(
        model_signature(source), representative_data, limit=max_samples, seed=0
    )
    if path is not None:
        check_output_path(path, overwrite=overwrite)
    content = static_int8(source, calibration, method=calibration_method, per_channel=per_channel)
    stem = Path(source.name).stem.removesuffix("_float32")
    if path is None:
        return OnnxModel(content, label=f"{stem}_int8.onnx")
    return OnnxModel(content, write_bytes_atomic(path, content, overwrite=overwrite))
