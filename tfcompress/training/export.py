"""Export a fine-tuned model through the one converter path and measure it next to the original."""

from __future__ import annotations

import logging
import re
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from tfcompress._compat.tf import tensorflow
from tfcompress.data import Dataset
from tfcompress.data.calibration import DEFAULT_CALIBRATION_SAMPLES
from tfcompress.errors import ConversionError
from tfcompress.models.loading import SavedModelDir, TFLiteModel
from tfcompress.models.signature import ModelSignature
from tfcompress.quantization.converter import (
    Conversion,
    ConverterSettings,
    convert_all,
    save_serving_function,
)
from tfcompress.quantization.converter_errors import first_error
from tfcompress.quantization.recipes import Recipe
from tfcompress.runtime import default_backend
from tfcompress.training.configs import TrainingConfig
from tfcompress.training.coverage import LayerCoverage
from tfcompress.training.gating import judge_export
from tfcompress.training.result import TrainingResult
from tfcompress.training.scoring import score_outputs
from tfcompress.training.setup import Setup, model_outputs
from tfcompress.training.sparsity import measure

logger = logging.getLogger(__name__)

CALIBRATION_SAMPLES = DEFAULT_CALIBRATION_SAMPLES
#: Metrics whose score is the result's headline ``accuracy``.
_ACCURACIES = ("accuracy", "binary_accuracy")


def export(
    model: Any,
    recipe: str,
    calibration: Dataset,
    *,
    signature: ModelSignature,
    name: str = "model",
) -> Conversion:
    """Convert ``model`` with ``recipe``'s converter settings, under the original tensor names.

    tfmot renames the layers it wraps (a QAT model's head ``cls`` is ``quant_cls``), and a
    tf-keras SavedModel names its outputs after those layers. So ``model`` is saved with a
    serving function whose inputs are ``signature``'s input names and whose outputs are a
    dict keyed by ``signature``'s output names, as
    :func:`~tfcompress.quantization.converter.convert_all` does for Keras 3 models: the
    ``.tflite`` then names its tensors like the original model, so ``y_<output name>``
    labels and ``--output NAME`` mean the same head in the model and in the artifact.

    ``model`` has its QAT/prune/cluster wrappers stripped; ``calibration`` (one array per
    input, by name) is used by ``int8`` only.

    Raises:
        ConversionError: The model could not be saved, or the converter rejected it.
    """
    with tempfile.TemporaryDirectory(prefix="tfcompress-training-") as directory:
        # the folder's name is the one conversion errors show; keep it one plain path part
        saved = Path(directory) / (re.sub(r"[^\w.-]+", "_", name).strip("._") or "model")
        _save_named(model, signature, saved, name)
        return convert_all(SavedModelDir(saved), [_configure(recipe, calibration)])[0]


def _save_named(model: Any, signature: ModelSignature, path: Path, name: str) -> None:
    """Save ``model`` as a SavedModel whose serving signature uses ``signature``'s names."""
    tf = tensorflow()
    names = signature.output_names
    specs = [tf.TensorSpec(s.shape, s.dtype, name=s.name) for s in signature.inputs]

    @tf.function(input_signature=specs)
    def serve(*inputs: Any) -> dict[str, Any]:
        outputs = model(list(inputs) if len(inputs) > 1 else inputs[0], training=False)
        if not isinstance(outputs, list | tuple):
            outputs = [outputs]
        return dict(zip(names, outputs, strict=True))

    try:
        # Only what the converter reads (tf-keras would trace every layer of a whole save);
        # a function that reads more than the variables needs the whole model.
        if not save_serving_function(model, serve, path):
            tf.saved_model.save(model, str(path), signatures={"serving_default": serve})
    # TensorFlow raises ValueError, TypeError, its own OpErrors... while tracing or saving;
    # each becomes one typed error that names the model.
    except Exception as error:
        raise ConversionError(
            f"could not save the fine-tuned {name!r} for conversion: {first_error(error)}"
        ) from error


def export_reference(
    model: Any, recipe: str, calibration: Dataset
) -> tuple[Conversion, Conversion]:
    """The original model at ``recipe`` and as float32, from one trace of the model.

    Raises:
        ConversionError: The converter rejected the model.
    """
    if recipe == "float32":
        (only,) = convert_all(model, [None])
        return only, only
    # float32 first: a converter left in its defaults serves the next output (one load less)
    float32, at_recipe = convert_all(model, [None, _configure(recipe, calibration)])
    return at_recipe, float32


def _configure(recipe: str, calibration: Dataset) -> ConverterSettings:
    chosen = Recipe(recipe)
    return ConverterSettings(chosen, calibration if chosen.spec.needs_calibration else None)


def finish(
    setup: Setup,
    tuned: Any,
    *,
    config: TrainingConfig,
    recipe: str,
    coverage: list[LayerCoverage],
    train_seconds: float,
    losses: tuple[float, ...],
    m_by_n: tuple[int, int] | None = None,
) -> TrainingResult:
    """Export ``tuned`` and the original, score every output, judge the gate, build the result.

    The scores compare the original (Keras), the fine-tuned Keras model and the exported
    ``.tflite`` on the eval data; the gate (``setup.gate``), when there is one, judges
    the ``.tflite``'s outputs against the original's.

    A failed gate does not raise: the result carries its report.

    Raises:
        ConversionError: The converter rejected a model.
    """
    technique = config.technique
    rng = np.random.default_rng(config.seed)
    count = min(CALIBRATION_SAMPLES, len(setup.train))
    chosen = np.sort(rng.choice(len(setup.train), count, False))
    signature = setup.signature
    calibration = Dataset({name: setup.train.x[name][chosen] for name in signature.input_names})
    exported = export(tuned, recipe, calibration, signature=signature, name=setup.name)
    reference, float_reference = export_reference(setup.original, recipe, calibration)
    artifact = TFLiteModel(exported.content, label=technique, verified=True)
    val_inputs = setup.val_inputs
    names = signature.output_names
    candidate = model_outputs(artifact, val_inputs, signature)
    # The original exported at the same precision (plain PTQ for int8): what fine-tuning must
    # beat, measured in the same run (docs/qat.md, "Never worse than PTQ").
    plain = TFLiteModel(reference.content, label=f"plain {recipe}", verified=True)
    scores = score_outputs(
        names,
        setup.val_labels,
        setup.val_reference,
        model_outputs(tuned, val_inputs, signature),
        candidate,
        baseline=model_outputs(plain, val_inputs, signature),
    )
    primary = next((s for s in scores if s.labelled and s.metric in _ACCURACIES), None)
    gate = None
    if setup.gate is not None:
        gate = judge_export(
            setup.gate,
            names,
            setup.val_labels,
            setup.val_reference,
            candidate,
            reference_name=f"{setup.name} (float)",
            candidate_name=f"{technique} {recipe} .tflite",
            backend=default_backend(artifact),
        )
        logger.info("%s", gate.headline())
    kernels = [layer.name for layer in setup.legacy.layers if _has_kernel(layer)]
    weights = measure(exported.content, layer_names=kernels, m_by_n=m_by_n)
    for s in scores:
        shown = (s.output, s.metric, s.format(s.tflite), s.format(s.reference))
        logger.info("%s -> %s, output %s: %s %s (reference %s)", technique, recipe, *shown)
    return TrainingResult(
        technique=technique,
        options=config.recorded(),
        source=setup.name,
        recipe=recipe,
        model_content=exported.content,
        reference_content=reference.content,
        float_content=float_reference.content,
        accuracy=None if primary is None else primary.tflite,
        keras_accuracy=None if primary is None else primary.keras,
        reference_accuracy=None if primary is None else primary.reference,
        eval_samples=len(setup.val),
        coverage=tuple(coverage),
        weights=tuple(weights),
        train_samples=len(setup.train),
        train_seconds=train_seconds,
        losses=losses,
        bridge_difference=setup.bridge_difference,
        keras_model=tuned,
        warnings=(*setup.notes, *exported.warnings),
        loss_functions=setup.loss_functions,
        scores=scores,
        gate=gate,
    )


def _has_kernel(layer: Any) -> bool:
    return any(
        hasattr(layer, attribute)
        for attribute in ("kernel", "depthwise_kernel", "pointwise_kernel")
    )
