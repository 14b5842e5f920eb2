"""Selective quantization: rank layers by their int8 error, keep the worst ones in float.

Both halves reuse what TensorFlow's own ``tf.lite.experimental.QuantizationDebugger`` does:
the model is converted once with ``_experimental_calibrate_only`` (a float ``.tflite`` that
carries the calibrated ranges), then quantized by the converter's MLIR quantizer
(``mlir_quantize``) with ``denylisted_nodes``: the op outputs named there stay float, every
other op is quantized as plain ``int8`` would. That second step is a pure function of the
calibrated bytes, so the same recipe on the same model and data gives the same bytes.

:func:`rank_layers` instruments that quantized model with NumericVerify ops (the debugger's
debug mode) and reports, per op output, the root-mean-square difference between the int8 op
and the float op run on the same (dequantized) input, divided by the output's quantization
step (``scale``). Rounding alone gives ``rmse/scale`` about 0.29 (``1/sqrt(12)``); a layer far
above that loses more than rounding, usually because its weights or outputs have a range
that a single int8 scale cannot cover. The number is local to the op: it does not say how
much the model's accuracy drops; check that with :func:`tfcompress.check_gate`.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from tqdm.auto import tqdm

from tfcompress._compat.tf import tensorflow
from tfcompress.data import DataLike, Dataset
from tfcompress.data.calibration import calibration_set
from tfcompress.errors import ConversionError, InvalidInputError
from tfcompress.models.loading import ModelLike, keras_layer_names, model_name, resolve_model
from tfcompress.models.signature import model_signature
from tfcompress.models.tflite_file import read_tflite
from tfcompress.quantization.converter import (
    Conversion,
    ConverterSettings,
    convert_all,
)
from tfcompress.quantization.converter_errors import first_error
from tfcompress.quantization.recipes import Recipe
from tfcompress.quantization.selective_names import (
    check_nodes,
    float_name,
    layer_of,
    node_names,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LayerSensitivity:
    """How much one op loses to int8, from TFLite's QuantizationDebugger.

    Attributes:
        node: The op's output tensor name, as ``Recipe(float_nodes=...)`` and the converter's
            ``denylisted_nodes`` take it.
        op_type: The TFLite op (``FULLY_CONNECTED``, ``CONV_2D``...).
        rmse: Root-mean-square difference between the int8 op and the float op on the same
            input, in the output's units, averaged over the samples.
        scale: The output's int8 quantization step.
        rmse_per_scale: ``rmse / scale``: about 0.29 is rounding alone; higher is worse.
        layer: The Keras layer the op belongs to, when its name can be read from the
            node name; else None.
    """

    node: str
    op_type: str
    rmse: float
    scale: float
    rmse_per_scale: float
    layer: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports."""
        return asdict(self)

    def __str__(self) -> str:
        where = f"layer {self.layer!r}" if self.layer else "no Keras layer"
        return (
            f"{self.node} [{self.op_type}, {where}]: rmse/scale {self.rmse_per_scale:.3g} "
            f"(rmse {self.rmse:.3g}, scale {self.scale:.3g})"
        )


def rank_layers(
    model: ModelLike,
    *,
    representative_data: DataLike,
    eval_data: DataLike | None = None,
    recipe: str | Recipe = "int8",
    calibration_samples: int | None = None,
    seed: int = 0,
    progress: bool = False,
    safe_mode: bool = True,
) -> tuple[LayerSensitivity, ...]:
    """Rank the ops of ``model`` by their int8 quantization error, most sensitive first.

    Args:
        model: A Keras model (Keras 3 or tf-keras), a SavedModel, or a path to one.
        representative_data: Calibration samples (labels ignored), as for
            :func:`tfcompress.quantize`.
        eval_data: Samples to measure the errors on (labels ignored; at most
            ``calibration_samples`` of them, a seeded subset); default: the calibration
            samples.
        recipe: ``"int8"`` or an ``int8`` :class:`Recipe`. ``per_channel``,
            ``calibration_samples`` and ``static_batch`` are honoured; nodes already in
            ``float_nodes`` stay float and are not ranked (rank again after keeping some).
            Input/output types do not change the ops' errors and are not used.
        calibration_samples: Overrides the recipe's calibration sample count.
        seed: Seed of the calibration (and evaluation) subset.
        progress: Show a progress bar while the errors are measured.
        safe_mode: See :func:`tfcompress.models.load_model` (paths only).

    Returns:
        One entry per quantized op output, highest ``rmse_per_scale`` first.

    Raises:
        InvalidInputError: A recipe other than ``int8``, or a ``float_nodes`` name that is
            not an op output of the model.
        InvalidDataError: The data does not fit the model.
        ConversionError: The converter rejected the model.

    Example:
        >>> ranking = rank_layers(model, representative_data=x_train[:500])
        >>> recipe = Recipe("int8", float_nodes=(ranking[0].node,))
        >>> result = tfcompress.quantize(model, recipe=recipe, representative_data=x_train)
    """
    # The recipe checks the count, with the one message every way of giving it gets.
    chosen = Recipe.coerce(recipe).with_options(calibration_samples=calibration_samples)
    if chosen.name != "int8":
        raise InvalidInputError(
            f"rank_layers measures the int8 error of each op; recipe {chosen.name!r} is not "
            "int8: pass recipe='int8'."
        )
    loaded = resolve_model(model, safe_mode=safe_mode)
    signature = model_signature(loaded)
    limit, source = chosen.calibration_samples, model_name(loaded)
    calibration = calibration_set(signature, representative_data, limit=limit, seed=seed)
    samples = calibration
    if eval_data is not None:
        samples = calibration_set(signature, eval_data, limit=limit, seed=seed, what="eval data")
    settings = ConverterSettings(chosen, calibration, calibrate_only=True)  # ranges, not int8
    calibrated = convert_all(loaded, [settings], static_batch=chosen.static_batch)[0].content
    debug_model = _mlir_quantize(
        calibrated,
        source,
        check_nodes(calibrated, chosen.float_nodes, source),
        disable_per_channel=not chosen.per_channel,
        enable_numeric_verify=True,
    )
    from tfcompress._child import call

    # The debugger runs the model on the samples: native code the data drives.
    statistics = call(
        "tfcompress.quantization.selective:_debug",
        debug_model,
        samples,
        progress,
        what=f"the quantization debugger on {source!r}",
        echo=progress,
    )
    known = set(node_names(calibrated))
    ranking = _ranking(debug_model, statistics, known, keras_layer_names(loaded))
    logger.info("ranked %d ops of %s", len(ranking), source)
    return ranking


def quantize_calibrated(conversion: Conversion, recipe: Recipe, *, source: str) -> Conversion:
    """A calibrate-only conversion quantized by an ``int8`` recipe, its ``float_nodes`` float.

    The recipe's I/O types and ``per_channel`` are honoured.

    Raises:
        InvalidInputError: A ``float_nodes`` name is not an op output of the model.
        ConversionError: The quantizer rejected the model.
    """
    content = _mlir_quantize(
        conversion.content,
        source,
        check_nodes(conversion.content, recipe.float_nodes, source),
        disable_per_channel=not recipe.per_channel,
        input_type=recipe.input_type,
        output_type=recipe.output_type,
    )
    return replace(conversion, content=content)


def check_kept_float(float_ops: Sequence[str], recipe: Recipe, *, source: str) -> None:
    """With ``integer_only``, only the kept nodes may compute in float.

    Raises:
        ConversionError: More ops stayed float than ``recipe.float_nodes`` names.
    """
    if recipe.float_nodes and recipe.integer_only and len(float_ops) > len(recipe.float_nodes):
        raise ConversionError(
            f"{len(float_ops)} ops of {source!r} stayed float ({', '.join(float_ops)}) but "
            f"float_nodes names {len(recipe.float_nodes)} and the recipe is integer-only; "
            "drop integer_only (--integer-only) to accept the others."
        )


def _mlir_quantize(calibrated: bytes, source: str, nodes: Sequence[str], **options: Any) -> bytes:
    """The converter's MLIR quantizer, as the QuantizationDebugger calls it, in a child process.

    The quantizer is native code that the calibrated ranges and the weights drive (a NaN or a
    range of 1e38 has crashed it): it runs where a crash is one error (:mod:`tfcompress._child`).
    """
    from tfcompress._child import call

    return call(
        "tfcompress.quantization.selective:mlir_quantize_here",
        calibrated,
        source,
        list(nodes),
        what=f"the TFLite quantizer on {source!r}",
        **options,
    )


def mlir_quantize_here(
    calibrated: bytes,
    source: str,
    nodes: Sequence[str],
    *,
    input_type: str | None = None,
    output_type: str | None = None,
    **options: Any,
) -> bytes:
    """:func:`_mlir_quantize` in this process (what its child runs); types by name."""
    tf = tensorflow()  # the supported-version check, before reaching into TensorFlow's modules
    from tensorflow.lite.python.convert import mlir_quantize

    if input_type is not None:
        options["input_data_type"] = getattr(tf, input_type)
    if output_type is not None:
        options["output_data_type"] = getattr(tf, output_type)
    try:
        return bytes(mlir_quantize(calibrated, denylisted_nodes=list(nodes) or None, **options))
    except Exception as error:  # the quantizer raises ConverterError, RuntimeError...
        raise ConversionError(
            f"the TFLite quantizer rejected {source!r} (float_nodes {list(nodes)}): "
            f"{first_error(error)}; keep other nodes float, or use plain int8."
        ) from error


def _samples(data: Dataset, order: Sequence[str] | None, progress: bool) -> Iterator[Any]:
    """One sample at a time, as the debugger reads them: a list in the model's input order."""
    x = data.x
    bar = tqdm(range(len(data)), desc="measuring", unit="sample", disable=not progress)
    if getattr(data, "layout", None) is not None and isinstance(x, dict):
        # A model fed otherwise than batch first (a state, a scalar): its own layout.
        from tfcompress.data.calibration import model_feeds

        keys = order if order is not None else list(x)
        for call, _ in zip(model_feeds(data, 1), bar, strict=False):
            yield [call[k] for k in keys]
        return
    for i in bar:
        if isinstance(x, dict):
            keys = order if order is not None else list(x)
            yield [x[k][i : i + 1] for k in keys]
        else:
            yield [x[i : i + 1]]


def _debug(debug_model: bytes, data: Dataset, progress: bool) -> dict[str, dict[str, float]]:
    """Run TFLite's QuantizationDebugger over ``data``: per NumericVerify tensor, its metrics."""
    from tfcompress.quantization.methods.calibrated import input_keys

    tf = tensorflow()
    order = None
    if isinstance(data.x, dict):  # the data's input names in the model's input order
        graph = read_tflite(debug_model).subgraphs[0]
        order = input_keys([graph.tensors[i].name for i in graph.inputs], data.x)
    samples: Callable[[], Iterator[Any]] = lambda: _samples(data, order, progress)  # noqa: E731
    with warnings.catch_warnings():  # tf.lite.Interpreter's deprecation notice, every call
        warnings.simplefilter("ignore", UserWarning)
        debugger = tf.lite.experimental.QuantizationDebugger(
            quant_debug_model_content=debug_model, debug_dataset=samples
        )
        debugger.run()
    return {name: dict(metrics) for name, metrics in debugger.layer_statistics.items()}


def _ranking(
    debug_model: bytes,
    statistics: dict[str, dict[str, float]],
    known: set[str],
    layers: tuple[set[str], str],
) -> tuple[LayerSensitivity, ...]:
    graph = read_tflite(debug_model).subgraphs[0]
    producer = {i: op.opcode for op in graph.operators for i in op.outputs}
    found = []
    for position, (verify_name, metrics) in enumerate(statistics.items()):
        # "NumericVerify/<quantized tensor name>:<its index>"
        index = int(verify_name.rsplit(":", 1)[1])
        tensor = graph.tensors[index]
        node = float_name(tensor.name, known)
        scale = tensor.quantization.scales[0] if tensor.quantization else float("nan")
        rmse = math.sqrt(float(metrics["mean_squared_error"]))
        ratio = rmse / scale if scale > 0 else float("nan")
        entry = LayerSensitivity(
            node=node,
            op_type=producer.get(index, "UNKNOWN"),
            rmse=rmse,
            scale=float(scale),
            rmse_per_scale=ratio,
            layer=layer_of(node, *layers),
        )
        found.append((-(ratio if ratio == ratio else -math.inf), position, entry))
    return tuple(entry for *_, entry in sorted(found, key=lambda t: (t[0], t[1])))
