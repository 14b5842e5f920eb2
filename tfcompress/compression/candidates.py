"""The ladder of :func:`tfcompress.compress` as data: which candidates, in which order.

A :class:`Rung` names a way to make an artifact (a PTQ recipe, a fine-tuning technique) and
what bounds the size or latency it can reach, so the search can tell when nothing left can
beat the best passing artifact (see :mod:`tfcompress.compression.search`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tfcompress.data.calibration import DEFAULT_CALIBRATION_SAMPLES
from tfcompress.errors import InvalidInputError
from tfcompress.targets.base import Target, get_target

OBJECTIVES = ("size", "latency")
#: Calibration samples of the variant rung (the plain int8 rung uses the recipe default).
CALIBRATION_VARIANT_SAMPLES = 1000

# What bounds a rung from below (see search.py's stop rule):
#   "int8":    stores at least int8 weights and runs at least the plain int8 graph, so it can
#              neither be smaller (gzip, 1% slack) nor faster than the plain int8 attempt;
#              selective steps add the float weights they keep, computed from the files
#              (tfcompress/compression/bounds.py);
#   "float16": its size follows from the float32 file (weights at half their bytes);
#   "none":    no bound known before trying (pruning/clustering shrink gzip; float may be
#              fastest).
BOUNDS = ("int8", "float16", "none")


@dataclass(frozen=True)
class Rung:
    """One step of the ladder.

    Attributes:
        name: Short label (``int8``, ``int8-calib1000``, ``selective``, ``int16x8``, ``qat``...).
        technique: ``ptq``, ``selective`` (expanded into keep-1, 2, 4... float steps at run
            time), ``per-op`` (int8 with the ops slower in int8, then the worst-error ones,
            float: :mod:`tfcompress.compression.perop`), ``qat``, ``prune`` or ``cluster``.
        recipe: For ``ptq``/``selective``: :meth:`tfcompress.Recipe.to_dict` of the recipe
            (or ``{"recipe": ..., "engine": "litert-quantizer"}``; or ``{"recipe": ...,
            "methods": "auto"}``: the post-training methods tried against plain int8 on the
            eval data, the kept recipe recorded); for the training techniques: their keyword
            options. Each technique's handler (:mod:`tfcompress.compression.handlers`) reads
            and checks it.
        bound: What bounds the rung from below: ``"int8"``, ``"float16"`` or ``"none"``.
        fallback_only: Tried only when no earlier int8-family attempt passed (int16x8 is the
            fallback of selective quantization, not a competitor).
        last_resort: Tried only when no attempt at all has passed (no rung of the built-in
            ladders is; float16 competes on its computed size instead, and the search tries
            it early when the selective steps' sizes approach it).

    Example:
        >>> Rung("int8", "ptq", {"name": "int8"}, "int8").name
        'int8'
    """

    name: str
    technique: str
    recipe: dict[str, Any] = field(default_factory=dict)
    bound: str = "none"
    fallback_only: bool = False
    last_resort: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Plain data for reports."""
        return asdict(self)


def check_choice(value: str, allowed: tuple[str, ...], what: str) -> str:
    """Refuse a value outside ``allowed`` with one line that lists them.

    Raises:
        InvalidInputError: ``value`` is not one of ``allowed``.

    Example:
        >>> check_choice("size", OBJECTIVES, "objective")
        'size'
    """
    if value not in allowed:
        raise InvalidInputError(f"unknown {what} {value!r}; choose one of {', '.join(allowed)}.")
    return value


LITERT = "litert-quantizer"


def _litert(recipe: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"recipe": recipe, "engine": LITERT, **extra}


def plan_ladder(
    *,
    objective: str,
    target: str,
    calibration_available: int,
    training: bool,
    tflite: bool = False,
    static_batch: int | None = None,
) -> tuple[Rung, ...]:
    """The candidates of one search, cheapest first.

    Args:
        objective: ``"size"`` (gzip bytes) or ``"latency"`` (measured on the target).
        target: A registered target (:func:`tfcompress.targets.base.list_targets`); the
            ladder keeps only the rungs whose recipe it admits.
        calibration_available: How many representative samples there are; the calibration
            variant is left out when it would use no more than the plain int8 rung.
        training: ``train_data`` was given (QAT, and for size pruning/clustering + int8).
        tflite: The model is a float ``.tflite``: the LiteRT Quantizer ladder (int8; per-op
            float by rule; int16x8 as the fallback; for size int4 weights; float16 as the
            last resort).
        static_batch: The search's static batch (each post-training artifact's).

    Returns:
        The rungs, in the order they are tried.

    Example:
        >>> [r.name for r in plan_ladder(objective="size", target="cpu",
        ...     calibration_available=300, training=False)]
        ['int8', 'int8-calib300', 'int8-methods', 'per-op', 'selective', 'int16x8', 'float16']
        >>> [r.name for r in plan_ladder(objective="size", target="cpu",
        ...     calibration_available=300, training=False, tflite=True)]
        ['int8', 'per-op', 'int16x8', 'int4-weights', 'float16']
    """
    check_choice(objective, OBJECTIVES, "objective")
    device = get_target(target)
    if tflite:
        return _litert_ladder(objective, device)
    rungs: list[Rung] = []
    if objective == "latency":  # float may be fastest where the device runs float at all
        rungs += [
            Rung("float32", "ptq", {"name": "float32"}),
            Rung("float16", "ptq", {"name": "float16"}),
        ]
    rungs.append(Rung("int8", "ptq", {"name": "int8", "per_channel": True}, "int8"))
    default = DEFAULT_CALIBRATION_SAMPLES
    more = min(calibration_available, CALIBRATION_VARIANT_SAMPLES)
    if more > default:
        rungs.append(
            Rung(f"int8-calib{more}", "ptq", {"name": "int8", "calibration_samples": more}, "int8")
        )
    # The post-training methods keep every op int8 (smaller than selective float, and valid
    # for integer-only targets), so they come first. One rung tries them all (they share one
    # rewrite and one calibration) and records the recipe it kept, exact and replayable.
    rungs.append(
        Rung("int8-methods", "ptq", {"recipe": {"name": "int8"}, "methods": "auto"}, "int8")
    )
    # Precision per op (compression/perop.py): int8 with the ops that run slower in int8 on
    # the target's backend, then the 1, 2, 4... ops adding most int8 error, kept float; before
    # selective (which ranks by error only). It replaced the 16-bit-activation rung: 16-bit
    # activations run on reference kernels, 16-70x slower than float32 on a CPU.
    if not device.shapes_artifact:
        rungs.append(Rung("per-op", "per-op", {"name": "int8"}, "int8"))
    rungs.append(Rung("selective", "selective", {"name": "int8"}, "int8"))
    rungs.append(Rung("int16x8", "ptq", {"name": "int16x8"}, "int8", fallback_only=True))
    if training:
        rungs.append(Rung("qat", "qat", {"epochs": 1}, "int8"))
        if objective == "size":
            rungs += [
                Rung("prune-int8", "prune", {"target_sparsity": 0.5, "epochs": 1, "then": "int8"}),
                Rung("cluster-int8", "cluster", {"clusters": 16, "epochs": 1, "then": "int8"}),
            ]
    if objective == "size":
        rungs.append(Rung("float16", "ptq", {"name": "float16"}, "float16"))
    # A rung the device cannot run (float16 or int16 tensors on the Edge TPU) is never made.
    return tuple(r for r in rungs if device.admits_recipe(rung_recipe(r)))


def rung_recipe(rung: Rung) -> str:
    """The recipe a rung's artifact ends up in (a fine-tuned rung exports through int8)."""
    recipe = rung.recipe.get("recipe", rung.recipe)
    return str(recipe.get("name") or recipe.get("then") or "int8")


def _litert_ladder(objective: str, device: Target) -> tuple[Rung, ...]:
    """The ladder of a float ``.tflite`` input: every rung made by LiteRT Quantizer."""
    if device.shapes_artifact:
        raise InvalidInputError(
            f"target {device.name} needs the converter's settings for {device.display_name} "
            "(integer I/O, a static batch, its check), which the converter makes: pass the "
            "source Keras model or SavedModel, not a .tflite."
        )
    rungs: list[Rung] = []
    if objective == "latency":
        rungs.append(Rung("float32", "ptq", _litert({"name": "float32"})))
    # int8 with ops LiteRT Quantizer cannot quantize kept float (int8's default, as the
    # converter's).
    int8 = {"name": "int8"}
    # per-op keeps float, by LiteRT Quantizer rules, the ops int8 makes slower and then the
    # worst-error ones (what float-worst did, speed-aware; 16-bit activations, which run on
    # reference kernels, are no longer a rung): it climbs only while a step closes at least
    # MIN_STEP_GAIN of the gap to the gate and runs within max_slowdown.
    rungs += [
        Rung("int8", "ptq", _litert(int8), "int8"),
        Rung("per-op", "per-op", _litert(int8), "int8"),
        Rung("int16x8", "ptq", _litert({"name": "int16x8"}), "int8", fallback_only=True),
    ]
    if objective == "size":
        rungs.append(Rung("int4-weights", "ptq", _litert({"name": "int4-weights"})))
        rungs.append(Rung("float16", "ptq", _litert({"name": "float16"}), "float16"))
    else:
        rungs.append(Rung("float16", "ptq", _litert({"name": "float16"})))
    return tuple(rungs)
