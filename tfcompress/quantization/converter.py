"""The one path from an in-memory model to ``.tflite`` bytes, used by PTQ, QAT and pruning.

Most of a conversion is tracing the model and the graph work around it, not calibration. So a
model is traced once, into a temporary SavedModel, and every output asked of it (the float32
reference and the quantized file of :func:`~tfcompress.quantize`) is converted from that one
export. A converter that another conversion configured is never reused, so no setting of one
output can leak into the next; one that converted with its defaults (the float32 reference)
is still in its defaults and serves the next output, which saves loading the SavedModel again;
and a converter loads its SavedModel once, not once more per ``convert()``
(:mod:`tfcompress._compat.tflite_loads`).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfcompress._compat.heap import sparing_collections
from tfcompress._compat.keras import KerasFlavour, flavour_of
from tfcompress._compat.tf import tensorflow
from tfcompress._compat.tflite_loads import Loads, loads_shared
from tfcompress.errors import ConversionError, NativeCrashError, UnsupportedModelError
from tfcompress.models.loading import (
    KerasFile,
    SavedModelDir,
    TFLiteModel,
    loaded_keras,
    model_name,
    saved_model_errors,
)
from tfcompress.quantization.converter_errors import (
    DYNAMIC_LIST,
    Captured,
    capture_warnings,
    explain,
    first_error,
    saved_model_rnn,
    static_batch_crash,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Conversion:
    """Bytes out of the converter, with how long it took and what it warned about.

    ``seconds`` and ``warnings`` include the model's one trace, which every output of a
    :func:`convert_all` call needed.
    """

    content: bytes
    seconds: float
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class ConverterSettings:
    """What one conversion asks of the TFLite converter, as data that crosses to its child.

    Attributes:
        recipe: The :class:`~tfcompress.quantization.recipes.Recipe` whose converter
            settings apply (its optimizations, types, per-channel switch).
        calibration: Representative samples (a :class:`~tfcompress.data.dataset.Dataset`),
            fed one at a time by input name; None when the recipe needs none.
        calibrate_only: Stop after calibration (a float file with its ranges, quantized
            later with nodes kept float or with edited ranges).
        progress: Draw a bar while calibrating (on the caller's stderr).
    """

    recipe: Any
    calibration: Any = None
    calibrate_only: bool = False
    progress: bool = False

    def apply(self, converter: Any) -> None:
        """Set this conversion's options on a fresh ``TFLiteConverter``."""
        tf = tensorflow()
        self.recipe.spec.configure(converter, self.recipe, tf)
        if not self.recipe.per_channel:
            converter._experimental_disable_per_channel = True  # the API's only switch
        if self.calibration is not None:
            calibration, progress = self.calibration, self.progress
            batch = self.recipe.static_batch or 1
            converter.representative_dataset = lambda: _by_name(calibration, progress, batch)
        if self.calibrate_only:
            calibrate_only(converter)


def calibrate_only(converter: Any) -> None:
    """Make ``converter`` stop after calibration, as the QuantizationDebugger does."""
    converter.experimental_new_quantizer = True
    converter._experimental_calibrate_only = True  # the debugger's switch; no public one


def _by_name(data: Any, progress: bool = False, batch: int = 1) -> Iterator[Any]:
    """Calibration samples as the converter reads them: a dict by input name for several.

    A file traced at a static batch takes calls of that batch only (its RESHAPEs are fixed
    to it): the samples go in chunks of ``batch``, the last one filled from the first samples.
    """
    import numpy as np
    from tqdm.auto import tqdm

    if getattr(data, "layout", None) is not None:  # a state, a scalar, a static batch
        from tfcompress.data.calibration import model_feeds

        names = tuple(t.name for t in data.layout.inputs)
        calls = list(model_feeds(data, batch, names[:1], static=batch > 1))
        unit = "call" if len(calls) != len(data) else "sample"
        for feed in tqdm(calls, desc="calibrating", unit=unit, disable=not progress):
            yield feed if len(feed) > 1 else list(feed.values())
        return
    x = data.x
    if isinstance(x, dict) and len(x) == 1:  # one input: by position, whatever its key
        (x,) = x.values()
    count = len(data)
    starts = range(0, count, batch)
    unit = "sample" if batch == 1 else f"call of {batch}"
    for i in tqdm(starts, desc="calibrating", unit=unit, disable=not progress):
        rows = slice(i, i + 1) if batch == 1 else np.arange(i, i + batch) % count
        if isinstance(x, dict):
            yield {name: array[rows] for name, array in x.items()}
        else:
            yield [x[rows]]


def warm_converter(model: Any) -> None:
    """Start the converter's child now (it imports TensorFlow while the caller loads the model).

    Skipped for a ``.tflite`` (LiteRT Quantizer's input: no TFLite converter runs).
    """
    if isinstance(model, TFLiteModel) or str(model).lower().endswith(".tflite"):
        return
    from tfcompress._child.warm import CONVERTER, prestart

    prestart(CONVERTER)


def _import_converter() -> None:
    """What the converter's child imports before its first call (``warm.CONVERTER``)."""
    tensorflow().lite.TFLiteConverter  # noqa: B018 - the lazy module loads on first touch


def convert_all(
    model: Any, configures: Sequence[ConverterSettings | None], *, static_batch: int | None = None
) -> tuple[Conversion, ...]:
    """Convert ``model`` once per entry of ``configures``, tracing the model only once.

    The model is traced here, into a temporary SavedModel; the converter and its quantizer,
    native code that the model's weights and the calibration data drive, run in a child
    process (:mod:`tfcompress._child`), so a crash there is one error, not the caller's death.

    Args:
        model: A Keras model (either flavour) or a :class:`SavedModelDir`.
        configures: One :class:`ConverterSettings` per output, or None for the converter's
            defaults (float32). Every entry gets a converter no other entry touched.
        static_batch: Trace with this static batch dimension (every shape in the file fixed,
            as the Edge TPU compiler needs); None keeps the model's own batch dimension.

    Returns:
        One conversion per entry, in order. Each one's ``seconds`` is the trace plus its own
        conversion, and its ``warnings`` are the trace's followed by its own.

    Raises:
        UnsupportedModelError: ``model`` is already a ``.tflite``, or a static batch was
            asked of a model whose input signature cannot be read.
        ModelLoadError: TensorFlow cannot read the SavedModel.
        ConversionError: The converter rejected the model.
        NativeCrashError: The converter crashed in its child process.
        ChildTimeoutError: The conversion ran past its time limit (``TFCOMPRESS_TIMEOUT``).

    Example:
        >>> reference, quantized = convert_all(model, [None, settings])  # doctest: +SKIP
    """
    name = model_name(model)
    with sparing_collections(), capture_warnings() as captured:
        start = time.perf_counter()
        with _traced(model, static_batch) as (path, shown):
            trace_seconds = time.perf_counter() - start
            trace_warnings = captured.take()
            made = _in_child(model, path, shown, list(configures), name, static_batch)
    return tuple(
        Conversion(content, trace_seconds + seconds, trace_warnings + said)
        for content, seconds, said in made
    )


Made = list[tuple[bytes, float, tuple[str, ...]]]
#: What the converter's child runs (tests point it at a program that really crashes).
CHILD_TARGET = "tfcompress.quantization.converter:convert_saved_model"


def _in_child(
    model: Any,
    path: str | KerasFile,
    shown: str | None,
    configures: list[ConverterSettings | None],
    name: str,
    static_batch: int | None,
) -> Made:
    """Convert the SavedModel at ``path`` in the converter's child; its errors, told."""
    from tfcompress._child import call

    # A SavedModel's recurrent layers keep the exported dynamic batch in their
    # tensor lists (a constant element_shape): re-tracing the signature at a
    # static batch cannot reach them, the converter's single-batch switch can.
    single = isinstance(model, SavedModelDir) and static_batch == 1
    try:
        return call(
            CHILD_TARGET,
            path,
            list(configures),
            name=name,
            shown=shown,
            single_batch_lists=single,
            static_batch=static_batch,
            what=f"the TFLite converter on {name!r}",
            echo=any(c is not None and c.progress for c in configures),
        )
    except ConversionError as error:
        rnn = DYNAMIC_LIST.search(str(error)) is not None
        if rnn and isinstance(model, SavedModelDir) and static_batch != 1:
            raise ConversionError(saved_model_rnn(name, static_batch)) from error
        raise
    except NativeCrashError as crash:
        if static_batch is None or crash.signal_number == signal.SIGKILL:
            raise  # not the batch's doing: the data's, or the memory's
        raise static_batch_crash(crash, name, configures, static_batch) from crash


def convert_saved_model(
    path: str | KerasFile,
    configures: Sequence[ConverterSettings | None],
    *,
    name: str,
    shown: str | None,
    single_batch_lists: bool = False,
    static_batch: int | None = None,
) -> Made:
    """Convert the SavedModel at ``path`` once per entry (what the child of convert_all runs).

    Args:
        path: The SavedModel folder, or a Keras file loaded and traced here first.
        configures: Settings per output (None: float32).
        name: The model's name, for messages.
        shown: The folder the user named, when ``path`` is the user's own SavedModel (its
            load errors are then the user's model's); None for our own export.
        single_batch_lists: Tensor lists whose batch is unknown take a batch of 1 (a
            SavedModel's RNN converted at ``static_batch=1``).
        static_batch: The batch a Keras file is traced at (None: its own).

    Returns:
        ``(content, seconds, warnings)`` per entry.
    """
    if isinstance(path, KerasFile):  # loaded and traced here, where TensorFlow is
        with capture_warnings() as captured, _traced(loaded_keras(path), static_batch) as traced:
            said = captured.take()
            made = convert_saved_model(traced[0], configures, name=name, shown=None)
        return [(content, seconds, said + warned) for content, seconds, warned in made]
    source = None if shown is None else (Path(shown), Path(path))

    def new_converter() -> Any:
        converter = _from_saved_model(path, source)
        if single_batch_lists:  # the converter's own switch for an RNN's unknown batch
            converter._experimental_default_to_single_batch_in_tensor_list_ops = True
        return converter

    with sparing_collections(), capture_warnings() as captured:
        return _convert_each(new_converter, configures, name, captured)


def _convert_each(
    new_converter: Callable[[], Any],
    configures: Sequence[ConverterSettings | None],
    name: str,
    captured: Captured,
) -> Made:
    made: Made = []
    converter: Any = None
    loads: Loads = {}  # what this converter loaded: convert() reuses it
    calibrated: dict[tuple[int, int], tuple[bytes, float]] = {}  # by recipe and samples
    for configure in configures:
        start = time.perf_counter()
        key = (id(getattr(configure, "recipe", None)), id(getattr(configure, "calibration", None)))
        if configure is not None and configure.calibrate_only and key in calibrated:
            made.append((*calibrated[key], captured.take()))  # its seconds: its calibration's
            continue  # the calibrated model an earlier conversion quantized: none more
        if converter is None:
            loads = {}
            with loads_shared(loads):
                converter = new_converter()
        if configure is not None:
            configure.apply(converter)
        with loads_shared(loads), _kept_calibration(calibrated, key):
            content = _run(converter, name)
        if configure is not None:  # its settings must not reach the next output
            converter = None
        made.append((bytes(content), time.perf_counter() - start, captured.take()))
    return made


@contextlib.contextmanager
def _kept_calibration(kept: dict[tuple[int, int], Any], key: tuple[int, int]) -> Iterator[None]:
    """Inside, the calibrated model the quantizer is given is kept in ``kept[key]``.

    A calibrate-only conversion of the same recipe and samples after it is that model: no
    second conversion or pass over the samples (issue 39; it lacks only the converter's
    CONVERSION_METADATA entry, which nothing reads).
    """
    from tensorflow.lite.python.optimize import calibrator

    real = calibrator.Calibrator.calibrate

    def calibrate(self: Any, dataset_gen: Any) -> Any:
        start = time.perf_counter()
        result = real(self, dataset_gen)
        kept[key] = (bytes(result), time.perf_counter() - start)  # with its pass's seconds
        return result

    calibrator.Calibrator.calibrate = calibrate
    try:
        yield
    finally:
        calibrator.Calibrator.calibrate = real


@contextlib.contextmanager
def _traced(model: Any, static_batch: int | None = None) -> Iterator[tuple[Any, str | None]]:
    """Trace ``model`` once; yield ``(SavedModel folder, the user's folder or None)``.

    Keras 3 models are exported with their serving function and tf-keras models saved with
    ``tf.saved_model.save``: what ``from_keras_model`` does internally for each flavour, done
    once instead of once per conversion. A ``static_batch`` re-traces the serving
    function with that batch, for each kind of model. A tf-keras model TensorFlow cannot
    save is saved frozen (:func:`_save_frozen`), so its conversion still runs in the child.
    A :class:`KerasFile` is yielded as it is: the child loads and traces it.
    """
    if isinstance(model, TFLiteModel):
        raise UnsupportedModelError(
            f"{model.name} is already a .tflite; quantize the original Keras model or SavedModel."
        )
    if isinstance(model, SavedModelDir) and static_batch is None:
        yield str(model.path), str(model.shown)  # the child reads it: no TensorFlow here
        return
    if isinstance(model, KerasFile):  # no TensorFlow here
        yield model, None
        return
    tf = tensorflow()
    with tempfile.TemporaryDirectory(prefix="tfcompress-export-") as export_dir:
        if isinstance(model, SavedModelDir):
            _resave_with_batch(model, export_dir, static_batch or 1)
        elif flavour_of(model) is KerasFlavour.TF_KERAS:
            if static_batch is not None:
                _save_tf_keras_with_batch(model, export_dir, static_batch)
            elif not _save_tf_keras(model, export_dir, tf):
                _save_frozen(model, export_dir)
        else:
            _export_keras3(model, export_dir, static_batch)
        yield export_dir, None


def _export_keras3(model: Any, export_dir: str, static_batch: int | None = None) -> None:
    """Export a Keras 3 model as ``model.export`` does, keeping its tensor names.

    ``model.export`` names a list of outputs ``output_0``, ``output_1``...; serving a dict
    keyed by the Keras output names instead carries them into the ``.tflite``'s signature,
    so labels saved as ``y_<output name>`` and ``--output NAME`` mean the same head in the
    Keras model and in every artifact made from it. Inputs keep their ``keras.Input`` names.
    """
    from tfcompress._compat.keras import keras_module

    try:
        specs, serve = _serving_function(model, static_batch)
    except UnsupportedModelError:  # subclassed, never built: let Keras find its signature
        if static_batch is not None:
            raise
        model.export(export_dir, format="tf_saved_model", verbose=False)
        return
    function = tensorflow().function(serve, input_signature=specs, autograph=False)
    if save_serving_function(model, function, export_dir):
        return
    # It reads a resource besides its variables (a lookup table): Keras finds and tracks it.
    archive = keras_module(KerasFlavour.KERAS3).export.ExportArchive()
    archive.track(model)
    archive.add_endpoint("serve", serve, input_signature=specs)
    archive.write_out(export_dir, verbose=False)


def save_serving_function(model: Any, function: Any, path: str | Path) -> bool:
    """Save ``function`` as the serving signature, with the model's variables and nothing else.

    The converter reads the serving signature and the variables it captures. Saving the
    model object as well (``model.export``, ``tf.saved_model.save(model)``) makes TensorFlow
    walk every layer and tf-keras trace every layer's call, for nothing the converter reads:
    ``quantize`` of MobileNetV2 0.35 took 1.7 to 2.4 times as long (benchmarks/export_lean.py). The
    ``.tflite`` is the same but for the names of two internal tensors (``model.export``'s
    second signature, an alias, renumbered them).

    Args:
        model: A built Keras model (Keras 3 or tf-keras) whose variables ``function`` reads.
        function: A ``tf.function`` with an input signature, returning a dict of outputs.
        path: An empty or missing folder for the SavedModel.

    Returns:
        False, with nothing left at ``path``, when ``function`` reads a resource that is not
        one of the model's variables (a lookup table): save the model whole instead, which
        tracks it.

    Example:
        >>> save_serving_function(model, serve, "/tmp/export")  # doctest: +SKIP
        True
    """
    tf = tensorflow()
    holder = tf.Module()
    # A Keras 3 variable wraps the tf.Variable the function captures; tf-keras' are those.
    holder.model_variables = [v if isinstance(v, tf.Variable) else v.value for v in model.variables]
    holder.serve = function
    try:
        tf.saved_model.save(holder, str(path), signatures={"serving_default": function})
    # TensorFlow refuses a function that captures an untracked resource with an
    # AssertionError ("references an 'untracked' resource").
    except AssertionError as error:
        logger.info("saving %s whole for conversion (%s)", model_name(model), first_error(error))
        shutil.rmtree(path, ignore_errors=True)
        return False
    return True


def _serving_function(model: Any, static_batch: int | None) -> tuple[list[Any], Callable[..., Any]]:
    """Input specs (batch fixed when asked) and a function returning outputs by Keras name."""
    from tfcompress.models.signature import model_signature

    tf = tensorflow()
    try:
        signature = model_signature(model)
    except UnsupportedModelError as error:
        if static_batch is None:
            raise
        raise UnsupportedModelError(
            f"{error} A static batch size needs the model's input shapes: call the model once "
            "on a batch (or build it) first."
        ) from error
    names = signature.output_names

    def shape(spec: Any) -> tuple[int | None, ...]:
        dims = tuple(spec.shape)
        return dims if static_batch is None or not dims else (static_batch, *dims[1:])

    specs = [tf.TensorSpec(shape(s), s.dtype, name=s.name) for s in signature.inputs]

    def serve(*inputs: Any) -> dict[str, Any]:
        outputs = model(list(inputs) if len(inputs) > 1 else inputs[0], training=False)
        if isinstance(outputs, dict):
            return {name: outputs[name] for name in names}
        if not isinstance(outputs, list | tuple):
            outputs = [outputs]
        return dict(zip(names, outputs, strict=True))

    return specs, serve


def _save_frozen(model: Any, export_dir: str) -> None:
    """Save the model's call alone, its weights as constants.

    What ``from_keras_model`` converts when TensorFlow cannot save a tf-keras model whole;
    done here, so the converter still runs in its child on a SavedModel.
    """
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    tf = tensorflow()
    specs, serve = _serving_function(model, None)
    traced = tf.function(serve, input_signature=specs).get_concrete_function()
    frozen = convert_variables_to_constants_v2(traced)
    holder = tf.Module()
    holder.serve = tf.function(
        lambda *xs: tf.nest.pack_sequence_as(traced.structured_outputs, frozen(*xs)),
        input_signature=specs,
    )
    tf.saved_model.save(holder, export_dir, signatures={"serving_default": holder.serve})


def _save_tf_keras_with_batch(model: Any, export_dir: str, static_batch: int) -> None:
    """Save a tf-keras model whose serving signature has a static batch dimension."""
    tf = tensorflow()
    specs, serve = _serving_function(model, static_batch)
    function = tf.function(serve, input_signature=specs)
    if not save_serving_function(model, function, export_dir):
        tf.saved_model.save(model, export_dir, signatures={"serving_default": function})


def _resave_with_batch(source: SavedModelDir, export_dir: str, static_batch: int) -> None:
    """Save a SavedModel again with its serving signature re-traced at ``static_batch``.

    The loaded signature keeps its dynamic batch; calling it from a function whose inputs
    are fixed lets the converter's shape inference fix every tensor after it.
    """
    tf = tensorflow()
    with saved_model_errors(source.shown, copy=source.path):
        loaded = tf.saved_model.load(str(source.path))
        signatures = dict(loaded.signatures)
    if not signatures:
        raise UnsupportedModelError(
            f"{source.shown}: the SavedModel has no serving signature; save it with one "
            "(tf.saved_model.save(..., signatures=...)) to fix its batch size."
        )
    signature = signatures.get("serving_default") or next(iter(signatures.values()))
    specs = {
        name: tf.TensorSpec((static_batch, *spec.shape[1:]), spec.dtype, name=name)
        for name, spec in signature.structured_input_signature[1].items()
    }
    wrapper = tf.Module()
    wrapper.loaded = loaded  # keeps the variables the signature reads
    wrapper.serve = tf.function(lambda **feed: signature(**feed))
    concrete = wrapper.serve.get_concrete_function(**specs)
    tf.saved_model.save(wrapper, export_dir, signatures={"serving_default": concrete})


def _from_saved_model(path: str, source: tuple[Path, Path] | None) -> Any:
    tf = tensorflow()
    if source is None:  # our own fresh export: its errors are conversion errors
        return tf.lite.TFLiteConverter.from_saved_model(path)
    # Not around the conversion: its errors pass as conversion errors.
    shown, copy = source
    with saved_model_errors(shown, copy=copy):
        return tf.lite.TFLiteConverter.from_saved_model(path)


def _save_tf_keras(model: Any, export_dir: str, tf: Any) -> bool:
    """Save a tf-keras model the way ``from_keras_model`` does; False when it cannot be saved.

    ``from_keras_model`` itself falls back to freezing the model's call when saving fails
    (some subclassed models); returning False keeps that path for such models.
    """
    options = tf.saved_model.SaveOptions(save_debug_info=True)
    try:
        tf.saved_model.save(model, export_dir, options=options)
    # The converter catches everything here too; the reason is logged, and the conversion
    # still runs (through from_keras_model), so nothing the user asked for is lost.
    except Exception as error:
        logger.info(
            "tf.saved_model.save failed for %s (%s); converting with from_keras_model",
            model_name(model),
            first_error(error),
        )
        return False
    return True


def _run(converter: Any, name: str) -> bytes:
    try:
        return bytes(converter.convert())
    except Exception as error:  # the converter raises ConverterError, RuntimeError...
        raise ConversionError(explain(error, name)) from error
