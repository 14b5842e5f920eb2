"""What every training-time technique does first and in the middle: check, bridge, fine-tune."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfcompress._compat.bridge import ensure_graph_model, to_tf_keras
from tfcompress._compat.tfmot import tf_keras
from tfcompress.data import DataLike, Dataset, load_data
from tfcompress.data.validation import validate_for_signature
from tfcompress.errors import InvalidDataError, InvalidInputError, UnsupportedModelError
from tfcompress.models.loading import ModelLike, SavedModelDir, TFLiteModel, model_name
from tfcompress.models.loading import resolve_model as _resolve
from tfcompress.models.matching import match_tensors
from tfcompress.models.onnx import OnnxModel
from tfcompress.models.signature import ModelSignature, model_signature
from tfcompress.runtime import create_runner, default_backend
from tfcompress.testing.settings import GateSettings
from tfcompress.training.batchnorm import freeze_batchnorm
from tfcompress.training.configs import TrainingConfig
from tfcompress.training.gating import GateLike, TrainingGate, plan_gate, rehearse_gate
from tfcompress.training.isolation import run_isolated
from tfcompress.training.scoring import choose_score_metric
from tfcompress.training.tasks import Labels, OutputTask, plan_tasks, read_labels

logger = logging.getLogger(__name__)

BRIDGE_SAMPLES = 32
#: Share of the training data held out to score the models when no eval data is given.
HOLD_OUT_FRACTION = 0.2
MIN_HOLD_OUT_SAMPLES = 10  # below this, hold-out scores mean little: ask for eval_data
INFERENCE_BATCH = 256


@dataclass(frozen=True, eq=False)
class Setup:
    """A checked model and data, ready for tfmot.

    Attributes:
        original: The model as the user gave it (Keras 3 or tf-keras), never modified.
        legacy: A tf-keras copy with the same weights, the one tfmot rewrites.
        signature: The model's inputs and outputs, named, in order.
        train: Training samples (``x`` keyed by input name; labels keyed by output name, or
            None).
        val: Validation samples, the same way.
        name: The model's name.
        bridge_difference: Max abs output difference between ``original`` and ``legacy``.
        tasks: The loss of every output, in output order.
        targets: What every output is fitted to: its labels, or the float model's own
            outputs on the training inputs (self-distillation), in output order.
        val_labels: Every output's eval labels (None where there are none).
        val_reference: The original model's outputs on the eval inputs, in output
            order: the baseline every score and the gate compare to.
        gate: What to check on the export (already rehearsed on the eval data), or
            None.
        notes: Decisions the caller should know of (a held-out eval split).
    """

    original: Any = field(repr=False)
    legacy: Any = field(repr=False)
    signature: ModelSignature
    train: Dataset = field(repr=False)
    val: Dataset = field(repr=False)
    name: str
    bridge_difference: float
    tasks: tuple[OutputTask, ...]
    targets: tuple[np.ndarray, ...] = field(repr=False)
    val_labels: tuple[Labels | None, ...] = field(repr=False)
    val_reference: tuple[np.ndarray, ...] = field(repr=False)
    gate: TrainingGate | None = None
    notes: tuple[str, ...] = ()

    @property
    def train_inputs(self) -> list[np.ndarray]:
        """Training samples, one array per input, in input order."""
        return inputs_in_order(self.train, self.signature)

    @property
    def val_inputs(self) -> list[np.ndarray]:
        """Validation samples, one array per input, in input order."""
        return inputs_in_order(self.val, self.signature)

    @property
    def loss_functions(self) -> dict[str, str]:
        """``{output name: loss}``, e.g. ``{"box": "mse (self-distillation)"}``."""
        return {task.output: task.description for task in self.tasks}


def run_technique(
    model: ModelLike,
    config: TrainingConfig,
    work: Callable[[Setup], Any],
    *,
    train_data: DataLike,
    eval_data: DataLike | None,
    safe_mode: bool,
    gate: GateLike | None,
    gate_settings: GateSettings | None,
    isolate: bool,
) -> Any:
    """Check the gate, then run the whole verb in a child or ``work(prepare(...))`` here.

    What qat, prune and cluster share; ``isolate`` decides where the work runs.
    """
    planned = plan_gate(gate, gate_settings)
    if isolate:
        return run_isolated(
            model,
            config,
            safe_mode=safe_mode,
            train_data=train_data,
            eval_data=eval_data,
            gate=gate,
            gate_settings=gate_settings,
        )
    return work(
        prepare(model, train_data, eval_data, safe_mode=safe_mode, seed=config.seed, gate=planned)
    )


def prepare(
    model: ModelLike,
    train_data: DataLike,
    eval_data: DataLike | None = None,
    *,
    safe_mode: bool = True,
    seed: int = 0,
    gate: TrainingGate | None = None,
) -> Setup:
    """Load and check the model and the data, bridge the model to tf-keras, plan the losses.

    Every input is matched by name (one array for a single-input model); labels are
    optional, per output. Each output's loss follows its labels (see
    :mod:`tfcompress.training.tasks`); outputs without labels are self-distilled from the
    float model's outputs on the training inputs, computed here, once, before any transform.
    The metric of every output's score (:func:`~tfcompress.training.scoring.choose_score_metric`)
    and the ``gate`` (:func:`~tfcompress.training.gating.rehearse_gate`) are planned on the
    eval data here too, so neither can fail after fine-tuning.

    Args:
        model: A Keras model (either flavour) or a path to one.
        train_data: Samples to fine-tune on, with labels for some, all or none of the outputs.
        eval_data: Samples to score the models on (labels optional, per output). None holds
            out :data:`HOLD_OUT_FRACTION` of ``train_data`` (seeded) and says so in
            :attr:`Setup.notes`.
        safe_mode: See :func:`tfcompress.models.load_model`.
        seed: Seed of the held-out split.
        gate: What to check on the export (see :func:`~tfcompress.training.gating.plan_gate`).

    Raises:
        UnsupportedModelError: Not a Keras Sequential/Functional model, or it cannot be bridged.
        InvalidDataError: Data or labels that do not match the model, or too few samples to
            hold out a eval split; a gate's task metric on an output without labels.
        InvalidInputError: Labels that fit no metric, or a gate check that cannot apply to
            the model's outputs (see :func:`tfcompress.testing.judge_outputs_by_name`).

    Example:
        >>> setup = prepare(two_heads, two_input_data(digits().train))  # doctest: +SKIP
        >>> setup.loss_functions  # doctest: +SKIP
        {'cls': 'sparse_categorical_crossentropy', 'box': 'mse'}
    """
    loaded, signature = load_keras(model, safe_mode)
    train = read_samples(train_data, signature, "training data")
    notes: tuple[str, ...] = ()
    if eval_data is None:
        train, val = _hold_out(train, seed)
        notes = (
            f"no eval data: {len(val)} of the training samples ({HOLD_OUT_FRACTION:.0%}) "
            f"were held out to score the models, and fine-tuning used the other {len(train)}",
        )
        logger.info("%s", notes[0])
    else:
        val = read_samples(eval_data, signature, "eval data")
    bridge_x = [array[:BRIDGE_SAMPLES] for array in inputs_in_order(train, signature)]
    legacy, difference = to_tf_keras(loaded, bridge_x)
    names = signature.output_names
    float_outputs = model_outputs(legacy, inputs_in_order(train, signature), signature)
    shapes = [tuple(int(d) for d in outputs.shape[1:]) for outputs in float_outputs]
    train_labels = _labels(train, names, shapes, "training data")
    val_labels = _labels(val, names, shapes, "eval data")
    tasks, targets = plan_tasks(names, float_outputs, train_labels)
    logger.info("losses: %s", {task.output: task.description for task in tasks})
    val_reference = model_outputs(loaded, inputs_in_order(val, signature), signature)
    for name, reference, labels in zip(names, val_reference, val_labels, strict=True):
        choose_score_metric(name, reference, labels)  # labels no metric fits fail now
    if gate is not None:
        rehearse_gate(gate, names, val_labels, val_reference)
    return Setup(
        original=loaded,
        legacy=legacy,
        signature=signature,
        train=train,
        val=val,
        name=model_name(loaded),
        bridge_difference=difference,
        tasks=tasks,
        targets=tuple(targets),
        val_labels=tuple(val_labels),
        val_reference=tuple(val_reference),
        gate=gate,
        notes=notes,
    )


def fine_tune(
    model: Any,
    setup: Setup,
    config: TrainingConfig,
    *,
    callbacks: list[Any] | None = None,
) -> tuple[float, tuple[float, ...]]:
    """Compile ``model`` (a tf-keras model) with Adam and each output's loss, then fit it.

    ``config`` gives the epochs, batch size, learning rate and seed; with
    ``config.freeze_batchnorm`` every BatchNormalization layer stays in inference mode (its
    moving statistics, scale and offset fixed; why: :mod:`tfcompress.training.batchnorm`).

    Inputs and targets are passed in input and output order (tfmot's wrappers rename
    layers, so names would not match). Every output's loss weighs 1.

    Raises:
        InvalidDataError: The loss became NaN or infinite.
    """
    keras2 = tf_keras()
    keras2.utils.set_random_seed(config.seed)
    if config.freeze_batchnorm:
        freeze_batchnorm(model)
    losses = [task.keras_loss(keras2) for task in setup.tasks]
    single = len(losses) == 1
    model.compile(
        optimizer=keras2.optimizers.Adam(config.learning_rate),
        loss=losses[0] if single else losses,
    )
    inputs = setup.train_inputs
    targets = list(setup.targets)
    start = time.perf_counter()
    history = model.fit(
        inputs[0] if len(inputs) == 1 else inputs,
        targets[0] if single else targets,
        epochs=config.epochs,
        batch_size=config.batch_size,
        callbacks=callbacks or [],
        shuffle=True,
        verbose=0,
    )
    seconds = time.perf_counter() - start
    epoch_losses = tuple(float(v) for v in history.history.get("loss", []))
    if epoch_losses and not all(math.isfinite(v) for v in epoch_losses):
        raise InvalidDataError(
            f"fine-tuning diverged (loss {epoch_losses[-1]}); lower learning_rate or check the "
            "labels."
        )
    logger.info("fine-tuned %d epoch(s) in %.1fs, loss %s", config.epochs, seconds, epoch_losses)
    return seconds, epoch_losses


def tune_wrapped(
    setup: Setup,
    config: TrainingConfig,
    coverage: Sequence[Any],
    status: str,
    wrap: Callable[[Any], Any],
    strip: Callable[[Any], Any],
    callbacks: list[Any] | None = None,
) -> tuple[Any, float, tuple[float, ...]]:
    """Wrap (tfmot's ``wrap``) the layers whose coverage row says ``status``, fine-tune, strip.

    Raises:
        InvalidInputError: No layer has that status: the technique would change nothing.
    """
    names = {row.layer for row in coverage if row.status == status}
    if not names:
        why = "; ".join(f"{row.layer}: {row.reason}" for row in coverage) or "it has no weights"
        raise InvalidInputError(
            f"no layer of {setup.name!r} can be {status} ({why}); that would change nothing."
        )
    logger.info("%s: %d layer(s)", status, len(names))
    wrapped = tf_keras().models.clone_model(
        setup.legacy, clone_function=lambda layer: wrap(layer) if layer.name in names else layer
    )
    seconds, losses = fine_tune(wrapped, setup, config, callbacks=callbacks)
    return strip(wrapped), seconds, losses


def model_outputs(
    model: Any, inputs: Sequence[np.ndarray], signature: ModelSignature
) -> list[np.ndarray]:
    """Run any variant of the model (Keras either flavour, or ``.tflite``) on ``inputs``.

    Keras variants (the original, its tf-keras copy, a fine-tuned copy whose layers tfmot
    renamed) keep the input and output order, so they are fed and read by position; a
    ``.tflite`` (exported under the original names, see
    :func:`tfcompress.training.export.export`) is matched to ``signature`` by name (see
    :func:`tfcompress.models.matching.match_tensors`).
    """
    backend = default_backend(model)
    options = {"threads": 1} if isinstance(model, TFLiteModel) else {}
    with create_runner(model, backend=backend, **options) as runner:
        own = runner.signature
        if isinstance(model, TFLiteModel):
            by_input = match_tensors(signature.inputs, own.inputs, what="inputs")
            position = {name: i for i, name in enumerate(signature.input_names)}
            feed = {name: inputs[position[ref]] for name, ref in by_input.items()}
        else:
            feed = dict(zip(own.input_names, inputs, strict=True))
        results = runner.run(feed, batch_size=INFERENCE_BATCH)
    if isinstance(model, TFLiteModel):
        by_output = match_tensors(signature.outputs, own.outputs, candidate_name="the .tflite")
        named = {by_output[name]: results[name] for name in own.output_names}
        return [named[name] for name in signature.output_names]
    return [results[name] for name in own.output_names]


def inputs_in_order(dataset: Dataset, signature: ModelSignature) -> list[np.ndarray]:
    """``dataset.x`` as one array per input, in the signature's input order."""
    x = _x(dataset)
    return [x[name] for name in signature.input_names]


def _x(dataset: Dataset) -> dict[str, np.ndarray]:
    if not isinstance(dataset.x, dict):  # pragma: no cover - read_samples always keys by name
        raise InvalidDataError("samples must be keyed by input name here.")
    return dataset.x


def read_samples(source: DataLike, signature: ModelSignature, what: str) -> Dataset:
    """Load ``source`` and check it against the model's inputs (and labels its outputs).

    Raises:
        InvalidDataError: Samples that do not fit the model.
    """
    rank = len(signature.inputs[0].sample_shape) if len(signature.inputs) == 1 else None
    return validate_for_signature(load_data(source, sample_rank=rank), signature, what=what)


def load_keras(model: ModelLike, safe_mode: bool) -> tuple[Any, ModelSignature]:
    """The Sequential/Functional Keras model ``model`` is (or names), and its signature.

    Raises:
        UnsupportedModelError: Not a Keras model, or a subclassed one.
    """
    loaded = _resolve(model, safe_mode=safe_mode)
    if isinstance(loaded, TFLiteModel | SavedModelDir | OnnxModel):
        raise UnsupportedModelError(
            f"{model_name(loaded)} is not a Keras model; training-time compression fine-tunes "
            "weights, so pass the Keras model (.keras/.h5) it came from."
        )
    ensure_graph_model(loaded)  # a subclassed model is refused here
    return loaded, model_signature(loaded)


def _hold_out(train: Dataset, seed: int) -> tuple[Dataset, Dataset]:
    count = round(len(train) * HOLD_OUT_FRACTION)
    if count < MIN_HOLD_OUT_SAMPLES:
        raise InvalidDataError(
            f"training data has {len(train)} samples, too few to hold out an eval split "
            f"of {MIN_HOLD_OUT_SAMPLES} or more; pass eval_data (--eval) to score the models on."
        )
    order = np.random.default_rng(seed).permutation(len(train))
    held, kept = np.sort(order[:count]), np.sort(order[count:])
    return _rows(train, kept), _rows(train, held)


def _rows(dataset: Dataset, rows: np.ndarray) -> Dataset:
    x = {name: array[rows] for name, array in _x(dataset).items()}
    y = dataset.y
    labels = {name: array[rows] for name, array in y.items()} if isinstance(y, dict) else None
    return Dataset(x, labels)


def _labels(
    dataset: Dataset, names: Sequence[str], shapes: Sequence[tuple[int, ...]], what: str
) -> list[Labels | None]:
    given = dataset.y if isinstance(dataset.y, dict) else {}
    return [
        read_labels(given[name], shape, output=name, what=what) if name in given else None
        for name, shape in zip(names, shapes, strict=True)
    ]
