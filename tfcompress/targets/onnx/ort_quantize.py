"""ONNX Runtime's quantizers on in-memory ``.onnx`` bytes: static int8 (QDQ), dynamic, float16.

Static int8 calibration streams (docs/onnx.md, "Calibration methods and memory"): a strided
:class:`CalibrationDataReader` (``CalibStridedMinMax``) hands ONNX Runtime batches of
:data:`CALIBRATION_BATCH` samples, :data:`CALIBRATION_CHUNK` batches per range, since its
histogram calibrators keep every activation fed within one ``collect_data`` (onnxruntime
1.32); peak memory is one chunk's activations, whatever the calibration set's size.
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
    activation ranges calibrated on ``calibration`` (samples keyed by the model's input
    names, already checked against the model) with ``method`` (``"minmax"``, ``"entropy"``
    or ``"percentile"``); inputs and outputs stay float32. Returns the quantized bytes.

    Raises:
        InvalidInputError: Unknown calibration method, or no calibration samples.
        ConversionError: ONNX Runtime's quantizer failed.
        MissingDependencyError: onnxruntime is not installed.
    """
    from tfcompress._child import call

    check_calibration_method(method)

    def run(batch: int, chunk: int) -> bytes:
        return call(
            "tfcompress.targets.onnx.ort_quantize:calibrate_static",
            model,
            _feeds(model, calibration, batch),
            method=method,
            per_channel=per_channel,
            chunk=chunk,
            progress=progress,
            what=f"ONNX Runtime's int8 calibration of {model.name!r}",
            echo=progress,
        )[0]

    # A long input (DNSMOS: 144,160 audio samples) can need more than the call's memory in one
    # run of 8; its activations grow with the batch, so one sample per run is the retry.
    try:
        return run(CALIBRATION_BATCH, CALIBRATION_CHUNK)
    except ResourceLimitError:
        logger.warning("%s: calibration ran out of memory; one sample per run", model.name)
    return run(1, 1)


def calibrate_static(
    model: OnnxModel,
    feeds: list[dict[str, np.ndarray]],
    *,
    method: str,
    per_channel: bool,
    chunk: int = CALIBRATION_CHUNK,
    progress: bool = False,
) -> tuple[bytes, dict[str, int]]:
    """:func:`static_int8`'s work, in its child: ONNX Runtime runs the user's graph on the data.

    Returns:
        The quantized bytes, and how the reader was read: ``largest_chunk`` (batches one
        range held at most) and ``ranges`` (ranges collected one after the other).
    """
    quantization = ort_quantization()
    chosen = getattr(quantization.CalibrationMethod, CALIBRATION_METHODS[method])
    reader = make_reader(quantization.CalibrationDataReader, feeds, chunk, progress=progress)
    options = {"CalibStridedMinMax": chunk}
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

    Raises:
        ConversionError: ONNX Runtime's quantizer failed.
        MissingDependencyError: onnxruntime is not installed.
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
    """
    converter = float16_converter()
    proto = onnx_module().load_from_string(model.content)
    try:
        with quiet_onnx_tools("float16"):
            converted = converter.convert_float_to_float16(proto, keep_io_types=True)
    except (ValueError, RuntimeError, KeyError, AssertionError) as error:
        raise ConversionError(
            f"the float16 converter could not convert {model.name} "
            f"({type(error).__name__}: {error})."
        ) from error
    return bytes(converted.SerializeToString())


def make_reader(
    base: type, feeds: list[dict[str, np.ndarray]], chunk: int, *, progress: bool = False
) -> Any:
    """A strided ``base`` (ONNX Runtime's ``CalibrationDataReader``), a batch per ``get_next``.

    Its length is rounded up to a multiple of ``chunk`` (ONNX Runtime requires one);
    ``set_range`` clamps to the real batches. ``largest_chunk``: batches one range held at
    most; ``ranges``: ranges ONNX Runtime collected one after the other.
    """
    batches = len(feeds)
    padded = math.ceil(batches / chunk) * chunk

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


def _feeds(model: OnnxModel, calibration: Dataset, batch: int) -> list[dict[str, np.ndarray]]:
    """The calibration samples in calls ONNX Runtime can run, by input name, model layout.

    ``batch`` samples per call, or the model's own static batch (as ``benchmark`` runs it);
    states and scalars fed as the model takes them (``data.calibration.model_feeds``).
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
    return list(model_feeds(calibration, batch, names[:1]))


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

    Weights kept as ``Constant`` nodes become initializers (:func:`_renamed`), and inner
    tensors go under short names (ONNX Runtime 1.32's numbered bias copies met basic-pitch's
    tf2onnx name ``conv1d_252``: an int8 file it could not load), the given ones back after.
    """
    names: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="tfcompress-onnx-") as folder:
        source, target = Path(folder) / "float.onnx", Path(folder) / "quantized.onnx"
        short = lambda n: names.setdefault(n, f"tfcq{len(names)}x")  # noqa: E731
        source.write_bytes(_renamed(model.content, short, weights=True))
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
        # The model's own tensors get their names back; those ONNX Runtime added keep short
        # ones (basic-pitch: 232,221 B, against 367,776 B with tf2onnx's long names in each).
        given = {short: name for name, short in names.items()}
        return _renamed(target.read_bytes(), lambda n: given.get(n, n))


def _renamed(content: bytes, rename: Any, *, weights: bool = False) -> bytes:
    """``content`` with every tensor name but the model's inputs' and outputs' ``rename``d.

    ``weights``: float ``Constant`` nodes become initializers too (Paddle2ONNX, some PyTorch
    exports): ONNX Runtime quantizes only initializers, and such a model came out of int8
    3-5% *larger* (scales added, nothing quantized).
    """
    from tfcompress.inspection.onnx import constant_tensors

    onnx = onnx_module()
    proto = onnx.load_from_string(content)
    kept = {"", *(v.name for v in (*proto.graph.input, *proto.graph.output))}
    new = lambda name: name if name in kept else rename(name)  # noqa: E731
    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE)
    for graph in onnx_graphs(proto.graph):
        for node, tensor in list(constant_tensors(graph)) if weights else []:
            if tensor.data_type in floats and len(tensor.dims) >= 1:  # a weight, not a scalar
                weight = graph.initializer.add()
                weight.CopyFrom(tensor)
                weight.name = node.output[0]
                graph.node.remove(node)
        for node in graph.node:
            node.input[:], node.output[:] = [*map(new, node.input)], [*map(new, node.output)]
        for entry in (*graph.initializer, *graph.value_info, *graph.input, *graph.output):
            entry.name = new(entry.name)
    return bytes(proto.SerializeToString())


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

    Raises:
        UnsupportedModelError: Not an ``.onnx`` model.
        InvalidDataError: The data does not fit the model's inputs.
        ConversionError: ONNX Runtime's quantizer failed.
        MissingDependencyError: onnxruntime is not installed.
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
