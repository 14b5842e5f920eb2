"""The ladder of :func:`tfcompress.compress` as data: which candidates, in which order.

A :class:`Rung` names a way to make an artifact (a PTQ recipe, a fine-tuning technique) and
what bounds the size or latency it can reach, so the search can tell when nothing left can
beat the best passing artifact (see :mod:`tfcompress.compression.search`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tfcompress.errors import InvalidInputError

TARGETS = ("cpu", "gpu", "edgetpu")
OBJECTIVES = ("size", "latency")
#: Backend each target is measured (and gated) on; the Edge TPU's integer model gives the same
#: outputs on the CPU, so its gate runs there when no Edge TPU is attached.
LATENCY_BACKENDS = {"cpu": "cpu", "gpu": "gpu", "edgetpu": "edgetpu"}
GATE_BACKENDS = {"cpu": "cpu", "gpu": "gpu", "edgetpu": "cpu"}
#: Calibration samples of the variant rung (the plain int8 rung uses the recipe default, 200).
CALIBRATION_VARIANT_SAMPLES = 1000

# What bounds a rung from below (see search.py's stop rule):
#   "int8": stores at least int8 weights and runs at least the plain int8 graph, so it can
#           neither be smaller (gzip, 1% slack) nor faster than the plain int8 attempt;
#   "none": no bound known before trying (pruning/clustering shrink gzip; float may be fastest).
BOUNDS = ("int8", "none")


@dataclass(frozen=True)
class Rung:
    """One step of the ladder.

    Attributes:
        name: Short label (``int8``, ``int8-calib1000``, ``selective``, ``int16x8``, ``qat``...).
        technique: ``ptq``, ``selective`` (expanded into keep-1, 2, 4... float steps at run
            time), ``qat``, ``prune`` or ``cluster``.
        recipe: For ``ptq``/``selective``: :meth:`tfcompress.Recipe.to_dict` of the recipe
            (or ``{"recipe": ..., "methods": "auto"}``: the post-training methods tried
            against plain int8 on the eval data, the kept recipe recorded); for the
            training techniques: their keyword options.
        bound: What bounds the rung from below: ``"int8"`` or ``"none"``.
        fallback_only: Tried only when no earlier int8-family attempt passed (int16x8 is the
            fallback of selective quantization, not a competitor).
        last_resort: Tried only when no attempt at all has passed (float16 for the size
            objective: half the float32 bytes, and it keeps float accuracy).

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
        return {
            "name": self.name,
            "technique": self.technique,
            "recipe": dict(self.recipe),
            "bound": self.bound,
            "fallback_only": self.fallback_only,
            "last_resort": self.last_resort,
        }


def check_choice(value: str, allowed: tuple[str, ...], what: str) -> str:
    """Refuse a value outside ``allowed`` with one line that lists them.

    Raises:
        InvalidInputError: ``value`` is not one of ``allowed``.

    Example:
        >>> check_choice("cpu", TARGETS, "target")
        'cpu'
    """
    if value not in allowed:
        raise InvalidInputError(f"unknown {what} {value!r}; choose one of {', '.join(allowed)}.")
    return value


def plan_ladder(
    *,
    objective: str,
    target: str,
    calibration_available: int,
    training: bool,
) -> tuple[Rung, ...]:
    """The candidates of one search, cheapest first.

    Args:
        objective: ``"size"`` (gzip bytes) or ``"latency"`` (measured on the target).
        target: ``"cpu"``, ``"gpu"`` or ``"edgetpu"``.
        calibration_available: How many representative samples there are; the calibration
            variant is left out when it would use no more than the plain int8 rung (200).
        training: ``train_data`` was given (QAT, and for size pruning/clustering + int8).

    Returns:
        The rungs, in the order they are tried.

    Example:
        >>> [r.name for r in plan_ladder(objective="size", target="cpu",
        ...     calibration_available=300, training=False)]
        ['int8', 'int8-calib300', 'int8-methods', 'selective', 'int16x8', 'float16']
    """
    check_choice(objective, OBJECTIVES, "objective")
    check_choice(target, TARGETS, "target")
    rungs: list[Rung] = []
    if objective == "latency" and target != "edgetpu":  # float never runs on an Edge TPU
        rungs += [
            Rung("float32", "ptq", {"name": "float32"}),
            Rung("float16", "ptq", {"name": "float16"}),
        ]
    rungs.append(Rung("int8", "ptq", {"name": "int8", "per_channel": True}, "int8"))
    default = 200  # Recipe's default calibration_samples
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
    rungs.append(Rung("selective", "selective", {"name": "int8"}, "int8"))
    if target != "edgetpu":  # the Edge TPU runs 8-bit tensors only
        rungs.append(Rung("int16x8", "ptq", {"name": "int16x8"}, "int8", fallback_only=True))
    if training:
        rungs.append(Rung("qat", "qat", {"epochs": 1}, "int8"))
        if objective == "size":
            rungs += [
                Rung("prune-int8", "prune", {"target_sparsity": 0.5, "epochs": 1, "then": "int8"}),
                Rung("cluster-int8", "cluster", {"clusters": 16, "epochs": 1, "then": "int8"}),
            ]
    if objective == "size" and target != "edgetpu":
        rungs.append(Rung("float16", "ptq", {"name": "float16"}, last_resort=True))
    return tuple(rungs)
