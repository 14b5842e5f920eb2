"""What a gate checks: threshold, metric, mode, interval and backend, validated in one place.

The pytest plugin resolves these from marker, command line and ini file; the CLI from its
flags; :func:`~tfcompress.testing.assert_accuracy_drop` from its keyword arguments. Importing
this module imports no TensorFlow.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tfcompress._config_fields import MAX_SEED, check_fields, integer, option
from tfcompress.bench.metrics import MetricLike, resolve_metric
from tfcompress.bench.thresholds import DEFAULT_MAX_DROP, finite_number, get_threshold
from tfcompress.errors import InvalidInputError
from tfcompress.testing.stats import INTERVAL_METHODS, check_confidence

__all__ = ["DEFAULT_BACKEND", "DEFAULT_MAX_DROP", "GATE_MODES", "GateSettings", "parse_max_drop"]

GATE_MODES = ("strict", "tolerant", "proven")
DEFAULT_BACKEND = "cpu"


def _backend_name(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInputError(f"{name} must be a backend name such as 'cpu', got {value!r}.")
    return value


@dataclass(frozen=True)
class GateSettings:
    """The options of one accuracy gate; invalid values raise on construction.

    Attributes:
        max_drop: Largest allowed drop as a fraction in [0, 1] (0.01 = one point).
        metric: ``"top1"``/``"accuracy"``, ``"topK"`` or ``callable(labels, outputs)``.
        mode: ``"strict"`` (point estimate <= max_drop), ``"tolerant"`` (fail only when the
            interval's lower bound exceeds max_drop) or ``"proven"`` (pass only when its upper
            bound is within max_drop).
        backend: Runtime for the candidate ``.tflite`` (``"cpu"``, ``"gpu"``, ``"edgetpu"``...).
        confidence: Two-sided level of the interval of the drop.
        interval: ``"mcnemar"``, ``"bootstrap"`` or ``"auto"`` (McNemar for top-k metrics,
            bootstrap for callables). ``"mcnemar"`` is a conservative interval (two
            Clopper-Pearson intervals, Bonferroni-combined) with McNemar's exact p-value.
        resamples: Bootstrap resamples.
        seed: Bootstrap seed.

    Raises:
        InvalidInputError: A value out of range or an unknown name; the message lists the
            allowed ones.

    Example:
        >>> GateSettings(max_drop=0.02, mode="tolerant").mode
        'tolerant'
    """

    max_drop: float = DEFAULT_MAX_DROP
    metric: MetricLike = "top1"
    mode: str = "strict"
    backend: str = option(
        DEFAULT_BACKEND,
        help="runtime of a .tflite candidate",
        parse="registered_backend",  # built-ins and backends a program registered
        names="BACKENDS",
        check=_backend_name,
    )
    confidence: float = option(0.95, help="two-sided level of the interval of the drop")
    interval: str = option(
        "auto",
        choices=("auto", "mcnemar", "bootstrap"),  # "auto" and testing.stats.INTERVAL_METHODS
        help="auto = exact McNemar where the metric is per-sample correctness, else bootstrap",
    )
    resamples: int = field(default=2000, metadata={"check": integer(1)})
    seed: int = field(default=0, metadata={"check": integer(0, MAX_SEED)})

    def __post_init__(self) -> None:
        check_fields(self)
        object.__setattr__(self, "max_drop", parse_max_drop(self.max_drop))
        if self.mode not in GATE_MODES:
            raise InvalidInputError(
                f"unknown gate mode {self.mode!r}; choose one of {', '.join(GATE_MODES)}."
            )
        resolve_metric(self.metric)
        confidence = finite_number(self.confidence, "confidence")
        check_confidence(confidence)
        object.__setattr__(self, "confidence", confidence)
        if self.interval not in ("auto", *INTERVAL_METHODS):
            raise InvalidInputError(
                f"unknown interval {self.interval!r}; choose auto, {', '.join(INTERVAL_METHODS)}."
            )
        if self.interval == "mcnemar" and callable(self.metric):
            raise InvalidInputError(
                "interval='mcnemar' needs per-sample correctness (top1/topK metrics); use "
                "interval='bootstrap' with a callable metric."
            )

    @property
    def metric_name(self) -> str:
        """The metric's display name ("accuracy", "top5", a callable's name)."""
        return resolve_metric(self.metric)[0]

    @property
    def top_k(self) -> int | None:
        """The k of top-k metrics (1 for accuracy), None for a callable metric."""
        name = self.metric_name
        if callable(self.metric):
            return None
        return 1 if name == "accuracy" else int(name[3:])

    @property
    def interval_method(self) -> str:
        """The interval actually used once ``"auto"`` is resolved."""
        if self.interval != "auto":
            return self.interval
        return "mcnemar" if self.top_k is not None else "bootstrap"

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the metric by name)."""
        data = asdict(self)
        data["metric"] = self.metric_name
        return data

    def __str__(self) -> str:
        return (
            f"max_drop={self.max_drop:g} metric={self.metric_name} mode={self.mode} "
            f"backend={self.backend} confidence={self.confidence:g} interval={self.interval_method}"
        )


def parse_max_drop(value: Any, *, source: str = "max_drop") -> float:
    """A drop of accuracy-like metrics: a fraction in [0, 1], from a number or "0.01".

    The threshold table's check (:meth:`~tfcompress.bench.thresholds.ThresholdDef.check`)
    with the fraction unit: one check and one message for ``max_drop`` wherever it is given.

    Args:
        value: The threshold.
        source: Where it came from, for the message ("--tfc-max-drop", "ini tfc_max_drop").

    Raises:
        InvalidInputError: Not a finite number, or outside [0, 1].

    Example:
        >>> parse_max_drop("0.005")
        0.005
    """
    return get_threshold("max_drop").check(
        value, source=source, unit="fraction", metric="accuracy-like metrics"
    )


def refuse_with_settings(**options: Any) -> None:
    """Refuse options that ``settings=`` already fixes, unless left at their defaults.

    A function that takes ready-made :class:`GateSettings` and the loose options they hold
    must not let one silently win: an option changed from its default next to ``settings=``
    is an error.

    Raises:
        InvalidInputError: An option given a non-default value next to ``settings=``.

    Example:
        >>> refuse_with_settings(mode="strict", confidence=0.95)
        >>> refuse_with_settings(mode="tolerant")  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        tfcompress.errors.InvalidInputError: ...
    """
    defaults = GateSettings()
    changed = [name for name, value in options.items() if value != getattr(defaults, name)]
    if changed:
        raise InvalidInputError(
            f"settings= already holds {', '.join(changed)}: set it on the GateSettings, or "
            "drop settings=."
        )
