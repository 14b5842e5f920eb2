"""The TFLite converter's post-training path: the artifact a :class:`Recipe` describes.

:func:`quantized_content` makes the quantized file alone (selection, baselines);
:func:`converter_result` makes it with its float32 reference, the post-training methods a
config asks for, the float-op checks and the target's verdict, for
:func:`tfcompress.quantize` (:mod:`tfcompress.quantization.ptq`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tfcompress.data import DataLike, Dataset
from tfcompress.data.calibration import calibration_for
from tfcompress.errors import InvalidInputError
from tfcompress.models.loading import ModelLike, TFLiteModel, model_name, resolve_model
from tfcompress.models.signature import model_signature
from tfcompress.quantization.converter import Conversion, ConverterSettings, convert_all
from tfcompress.quantization.engines import choose_engine, converter_float_nodes
from tfcompress.quantization.float_ops import check_integer_model, describe_float_ops
from tfcompress.quantization.methods.apply import ConfigureFor, check_runnable, run_methods
from tfcompress.quantization.methods.catalog import (
    AUTO_CANDIDATES,
    auto_if_plain_fails,
    plan_candidates,
)
from tfcompress.quantization.methods.registry import precision_method
from tfcompress.quantization.notes import artifact_notes
from tfcompress.quantization.recipes import Recipe
from tfcompress.quantization.selective import check_kept_float, quantize_calibrated
from tfcompress.quantization.weightless import check_weights_captured
from tfcompress.targets.base import Target

if TYPE_CHECKING:
    from tfcompress.quantization.ptq import QuantizationResult
    from tfcompress.testing.config import GateConfig

logger = logging.getLogger(__name__)


def quantized_content(
    model: ModelLike,
    *,
    recipe: str | Recipe = "int8",
    representative_data: DataLike | None = None,
    calibration_samples: int | None = None,
    seed: int = 0,
) -> Conversion:
    """The quantized ``.tflite`` of :func:`quantize`, without converting the float32 reference.

    :func:`quantize` converts the float32 ``.tflite`` of the model too (its ``reference``,
    for the size ratio, layer errors and post-training methods). A caller that keeps only
    the quantized bytes (model selection measures and scores hundreds of them) saves that
    conversion here: the model is traced once and converted once, by the same converter
    settings, calibration subset and seed, so ``content`` is byte for byte
    ``quantize(model, recipe=recipe, representative_data=..., calibration_samples=...,
    seed=seed).model_content``. The same checks run on the file (ops without an integer
    kernel are logged, or refused by an ``integer_only`` recipe; weights not captured).

    Args:
        model: A Keras model (Keras 3 or tf-keras), a SavedModel, or a path to one.
        recipe: A recipe name or :class:`Recipe` the TFLite converter makes, without
            post-training methods.
        representative_data: Calibration samples (needed by ``int8`` and ``int16x8``).
        calibration_samples: Overrides how many samples calibrate (a seeded random subset).
        seed: Seed of the calibration subset.

    Returns:
        The quantized flatbuffer (``content``), the trace and conversion time (``seconds``)
        and the converter's ``warnings``.

    Raises:
        InvalidInputError: An unknown recipe, one only LiteRT Quantizer makes, a ``.tflite``
            model, a recipe that names post-training methods (they are scored against the
            float32 reference: use :func:`quantize`), calibration data missing, or
            ``calibration_samples`` below 1.
        InvalidDataError: Calibration data does not fit the model.
        ConversionError: As for :func:`quantize`.

    Example:
        >>> int8 = quantized_content(model, representative_data=x_train)  # doctest: +SKIP
        >>> int8.content == tfcompress.quantize(model, representative_data=x_train).model_content
        ... # doctest: +SKIP
        True
    """
    if not isinstance(recipe, str | Recipe):
        raise InvalidInputError(
            f"quantized_content makes a .tflite: pass a recipe name or a Recipe, not {recipe!r}."
        )
    loaded = resolve_model(model)
    chosen = Recipe.coerce(recipe).with_options(calibration_samples=calibration_samples)
    if isinstance(loaded, TFLiteModel):
        raise InvalidInputError(
            f"{model_name(loaded)} is a .tflite, which LiteRT Quantizer quantizes; pass the "
            "Keras model or SavedModel, or use tfcompress.quantize()."
        )
    if choose_engine(None, loaded, chosen) != "converter":
        raise InvalidInputError(
            f"recipe {chosen.name!r} is made by LiteRT Quantizer from the float32 .tflite; "
            "use tfcompress.quantize() for it."
        )
    if chosen.methods:
        raise InvalidInputError(
            f"recipe {chosen.name!r} names post-training methods, which are scored against "
            "the float32 reference; use tfcompress.quantize() for it."
        )
    calibration = _calibration_set(loaded, chosen, representative_data, seed)
    _, quantized, kept = _plain_conversions(
        loaded, chosen, _configure_for(calibration, False), with_reference=False
    )
    check_weights_captured(quantized.content, loaded)
    _checked_float_ops(loaded, chosen, kept, quantized.content)
    logger.info("quantized %s with %s in %.1fs", model_name(loaded), chosen.name, quantized.seconds)
    return quantized


def converter_result(
    loaded: Any,
    chosen: Recipe,
    representative_data: DataLike | None,
    seed: int,
    progress: bool,
    chosen_target: Target | None,
    check_options: Mapping[str, Any],
    *,
    methods: str | Sequence[str] | None,
    per_op_min_snr: float | None = None,
    eval_data: DataLike | None,
    feeding: Mapping[str, Any] | None = None,
    gate: GateConfig | None = None,
    started: float | None = None,
) -> QuantizationResult:
    """The converter's artifact of ``chosen`` for :func:`tfcompress.quantize`.

    The post-training methods ``methods`` (or a failed ``gate``) asks for are tried against
    plain int8 on ``eval_data``; the file is checked (weights captured, ops left float, the
    target's verdict where it has a check).

    Raises:
        InvalidInputError: ``eval_data`` that no method would use, methods that cannot run
            on the model; what the converter and the checks refuse (see :func:`quantize`).
    """
    has_eval = eval_data is not None
    plan = plan_candidates(chosen.name, chosen.methods, methods, has_eval=has_eval)
    only_if_fails = auto_if_plain_fails(
        chosen.name, chosen.methods, methods, has_eval=has_eval, gated=gate is not None
    )
    if only_if_fails:  # plain int8 judged first; auto only if it fails the gate
        plan = (AUTO_CANDIDATES, True)
    if has_eval and not plan[0]:  # an accepted option is used or refused
        raise InvalidInputError(
            "eval_data scores the int8 post-training methods, and none run here: pass "
            "methods='auto' (--methods auto) or a gate (gate=, --min-snr...) to run them, or "
            "drop eval_data and judge the file with tfcompress.evaluate."
        )
    check_runnable(loaded, plan[0], source=model_name(loaded))  # before any data is read
    if (precision := precision_method(plan[0])) is not None:  # per-op: LiteRT's CPU only
        precision.check_target(chosen_target)
    if per_op_min_snr is not None and gate is not None:  # honoured or refused, never dropped
        raise InvalidInputError(
            "per_op_min_snr (--per-op-min-snr) is per-op's bar without a gate; the gate "
            "(--min-snr, --max-drop...) is its bar here: drop one of them."
        )
    calibration = _calibration_set(loaded, chosen, representative_data, seed, feeding)
    skipped: tuple[str, ...] = ()
    if plan[0] and _fed_otherwise(calibration):
        plan, note = _no_methods_here(loaded, chosen, methods, calibration)
        skipped = (note,)
    configure_for = _configure_for(calibration, progress)
    report = None
    kept = chosen
    if plan[0] and calibration is not None:
        outcome = run_methods(
            loaded,
            chosen,
            plan,
            calibration,
            eval_data,
            configure_for=configure_for,
            seed=seed,
            gate=gate,
            only_if_plain_fails=only_if_fails,
            started=started,
            per_op_min_snr=per_op_min_snr,
        )
        reference, quantized = outcome.reference, outcome.quantized
        chosen, report = outcome.recipe, outcome.report
        kept = chosen
    else:
        conversions, quantized, kept = _plain_conversions(
            loaded, chosen, configure_for, with_reference=True
        )
        reference = conversions[0]
    check_weights_captured(reference.content, loaded)
    float_ops = _checked_float_ops(loaded, chosen, kept, quantized.content, chosen_target)
    logger.info("quantized %s with %s in %.1fs", model_name(loaded), chosen.name, quantized.seconds)
    verdict = None
    if chosen_target is not None and chosen_target.checks:
        verdict = chosen_target.check(quantized.content, **check_options)
    from tfcompress.quantization.ptq import QuantizationResult

    return QuantizationResult(
        recipe=chosen,
        model_content=quantized.content,
        reference_content=reference.content,
        source=model_name(loaded),
        conversion_seconds=quantized.seconds,
        calibration_samples=0 if calibration is None else len(calibration),
        warnings=quantized.warnings,
        float_ops=float_ops,
        target=None if chosen_target is None else chosen_target.name,
        target_verdict=verdict,
        float_nodes=kept.float_nodes,
        notes=(*skipped, *artifact_notes(quantized.content)),
        methods=report,
    )


def _fed_otherwise(calibration: Dataset | None) -> bool:
    """Whether the model takes its samples other than batch first (a state, a scalar)."""
    layout = getattr(calibration, "layout", None)
    return layout is not None and not layout.batch_first


def _no_methods_here(
    loaded: Any, chosen: Recipe, methods: Any, calibration: Dataset | None
) -> tuple[tuple[tuple[Any, ...], bool], str]:
    """No post-training methods for a model fed otherwise than batch first.

    They score batch-first samples on LiteRT's interpreter: a model fed in another layout
    (a ``(layers, N, units)`` state, a scalar) gets plain int8 when only a gate would have
    started them (``auto`` when plain int8 fails it), with a note that says so; asked for
    (``methods=``, ``--methods``, ``auto`` included, or a recipe that records them), they
    are refused.

    Returns:
        The empty plan, and the note for the result.

    Raises:
        UnsupportedModelError: Methods asked for.
    """
    layout = getattr(calibration, "layout", None)
    how = "; ".join(layout.explain()) if layout is not None else "not batch first"
    if chosen.methods or methods is not None:
        from tfcompress.errors import UnsupportedModelError

        raise UnsupportedModelError(
            f"the post-training methods score batch-first samples, but {model_name(loaded)} "
            f"is fed otherwise ({how}); drop --methods (methods=) for the converter's int8."
        )
    note = (
        "post-training methods not tried: the model is fed otherwise than batch first "
        f"({how}), and they score batch-first samples; this is the converter's plain int8, "
        "not chosen by the gate: judge it with tfcompress.check_gate (batch_dims=, "
        "input_values=) or `tfcompress gate` (--batch-dim, --input-value)"
    )
    logger.warning("%s: %s", model_name(loaded), note)
    return ((), False), note


def _plain_conversions(
    loaded: Any, chosen: Recipe, configure_for: ConfigureFor, *, with_reference: bool
) -> tuple[tuple[Conversion, ...], Conversion, Recipe]:
    """The converter's own conversion of ``chosen`` (no methods), from one trace.

    Returns:
        The converter's outputs (the float32 reference first when ``with_reference``, or
        when ``chosen`` is ``float32``), the final quantized conversion and the recipe as
        kept (the nodes of ``float`` rules joined to ``float_nodes``).
    """
    selective = bool(chosen.float_nodes or chosen.rules)
    # One trace for both outputs (None: the float32 defaults); float32 asks for the
    # reference itself, converted once.
    configures: list[ConverterSettings | None] = []
    if with_reference or chosen.name == "float32":
        configures.append(None)
    if chosen.name != "float32":
        configures.append(configure_for(chosen, selective))
    conversions = convert_all(loaded, configures, static_batch=chosen.static_batch)
    quantized, kept = conversions[-1], chosen
    if selective:  # the nodes of float rules join float_nodes
        nodes = converter_float_nodes(quantized.content, chosen, source=model_name(loaded))
        kept = replace(chosen, float_nodes=nodes, rules=())
        quantized = quantize_calibrated(quantized, kept, source=model_name(loaded))
    return conversions, quantized, kept


def _checked_float_ops(
    loaded: Any, chosen: Recipe, kept: Recipe, content: bytes, target: Target | None = None
) -> tuple[str, ...] | None:
    """The ops that stayed float, after checking the file keeps the recipe's promises."""
    from tfcompress.models.loading import keras_layer_names

    if not chosen.spec.integer_activations:
        return None
    fix = None
    if target is not None and target.rules.integer_only:  # the user cannot drop it
        fix = (
            f"--target {target.name} runs integer kernels only: replace those layers with ones "
            "that quantize (BatchNormalization where it is a LayerNormalization, ReLU for an "
            "exotic activation), or take them out of the model and compute them outside it"
        )
    float_ops = check_integer_model(  # check what the file really holds
        content,
        recipe=chosen.name,
        input_type=chosen.input_type,
        output_type=chosen.output_type,
        integer_only=chosen.integer_only and not kept.float_nodes,
        source=model_name(loaded),
        layers=keras_layer_names(loaded),
        fix=fix,
    )
    check_kept_float(float_ops, kept, source=model_name(loaded))
    if len(float_ops) > len(kept.float_nodes):
        on_purpose = (
            f", {len(kept.float_nodes)} of them kept on purpose" if kept.float_nodes else ""
        )
        logger.warning(
            "%s: %d op(s) have no %s kernel and stayed float (%s%s); integer_only=True "
            "(--integer-only) refuses such a model",
            model_name(loaded),
            len(float_ops) - len(kept.float_nodes),
            chosen.name,
            describe_float_ops(float_ops),
            on_purpose,
        )
    return float_ops


def _calibration_set(
    model: Any,
    recipe: Recipe,
    data: DataLike | None,
    seed: int,
    feeding: Mapping[str, Any] | None = None,
) -> Dataset | None:
    """The calibration samples, read in the model's layout.

    ``feeding``: ``batch_dims`` and ``input_values``, as ``benchmark`` and ``gate`` take them.
    """
    return calibration_for(
        model_signature(model),
        data,
        recipe_name=recipe.name,
        needs_calibration=recipe.spec.needs_calibration,
        limit=recipe.calibration_samples,
        seed=seed,
        **(feeding or {}),
    )


def _configure_for(calibration: Dataset | None, progress: bool) -> ConfigureFor:
    """The converter settings of a recipe, stopping after calibration when asked.

    The samples are fed one at a time by input name (:class:`ConverterSettings`); the bar
    is drawn by the converter's child, on the caller's stderr.
    """

    def configure_for(recipe: Recipe, calibrate: bool) -> ConverterSettings:
        return ConverterSettings(recipe, calibration, calibrate_only=calibrate, progress=progress)

    return configure_for
