"""What a gate judges and how, as a checked config: :class:`GateConfig`.

:func:`tfcompress.check_gate` takes one (``check_gate(reference, candidate, data,
config=GateConfig(...))``); its keyword options only build the same config
(:meth:`GateConfig.from_options`), ``tfcompress gate`` builds it from its flags, and the
report records it (``report.config``, ``"config"`` in ``report.to_dict()``). Every option is
checked here, on construction, before any model or data is read.

How the verdicts are judged (mode, interval, confidence, the candidate's backend, the
bootstrap's resamples and seed) is a :class:`~tfcompress.testing.settings.GateSettings`, the
same object the pytest plugin and :func:`~tfcompress.testing.check_accuracy_drop` resolve:
the config holds one (``settings``) rather than a second copy of its fields and checks.
What it judges (outputs, metrics, thresholds or ready-made checks) and how both models are
fed (threads, batch dimensions, input values) are the config's own fields.

The models, the data, ``safe_mode`` (whether a model file may be trusted to run code) and
``on``/``device`` (where the candidate runs: the same gate on a laptop or on a device) stay
keywords of :func:`~tfcompress.testing.output_gates.check_gate`.

Example:
    >>> config = GateConfig.from_options(outputs="cls", min_snr=25, mode="tolerant")
    >>> config.settings.mode, GateConfig.from_dict(config.to_dict()) == config
    ('tolerant', True)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from tfcompress._config_fields import (
    CONFIG_VERSION,
    check_version,
    checked_fields,
    name_list,
    require_int,
    shown,
)
from tfcompress.errors import InvalidInputError
from tfcompress.testing.settings import GateSettings, refuse_with_settings

if TYPE_CHECKING:
    from tfcompress.testing.judge import Check


@dataclass(frozen=True, kw_only=True)
class GateConfig:
    """Everything that decides a gate's verdicts: what is checked, how it is judged and fed.

    ``outputs`` empty gates every output (a name is read as one); ``metrics`` empty chooses
    one per output from its shape and the data; ``thresholds`` holds the threshold table's
    keywords with their values. Ready-made ``checks`` (:class:`~tfcompress.testing.judge.Check`)
    replace those three (``metrics`` and ``thresholds`` then stay empty). ``settings`` says
    how verdicts are judged: mode, backend (of a ``.tflite`` candidate), confidence,
    interval, bootstrap resamples and seed (its ``max_drop`` and ``metric`` are the
    single-output gate's; this gate's travel on the checks). ``threads``, ``batch_dims``
    (``--batch-dim h=1``) and ``input_values`` (``--input-value sr=16000``) feed both runs.

    Raises:
        InvalidInputError: An unknown threshold, metric or setting; a threshold no metric
            uses; checks next to metrics or thresholds; a value of the wrong type or range.

    Example:
        >>> GateConfig(thresholds={"max_drop": 0.02}).checks_to_run[0].threshold
        0.02
    """

    outputs: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    thresholds: Mapping[str, float] = field(default_factory=dict)
    checks: tuple[Check, ...] | None = None
    settings: GateSettings = field(default_factory=GateSettings)
    threads: int = 1
    batch_dims: Mapping[str, int] = field(default_factory=dict)
    input_values: Mapping[str, float] = field(default_factory=dict)
    version: int = CONFIG_VERSION

    def __post_init__(self) -> None:
        from tfcompress.bench.thresholds import check_threshold_names
        from tfcompress.testing.judge import Check

        set_ = object.__setattr__
        check_version("gate", self.version)
        set_(self, "outputs", name_list("outputs", self.outputs))
        set_(self, "metrics", name_list("metrics", self.metrics))
        if not isinstance(self.thresholds, Mapping):
            raise InvalidInputError(
                f"thresholds must map threshold names to values, got {shown(self.thresholds)}."
            )
        given = {k: v for k, v in self.thresholds.items() if v is not None}
        set_(self, "thresholds", check_threshold_names(given, where="check_gate"))
        if self.checks is not None:
            checks = list(self.checks) if isinstance(self.checks, Sequence) else None
            if checks is None or not all(isinstance(c, Check) for c in checks):
                raise InvalidInputError(
                    f"checks must be tfcompress.testing.Check objects, got {shown(self.checks)}."
                )
            if self.metrics or self.thresholds:
                raise InvalidInputError(
                    "pass either checks=[...] or the metric and threshold options, not both."
                )
            set_(self, "checks", tuple(checks))
        if not isinstance(self.settings, GateSettings):
            raise InvalidInputError(
                f"settings must be a tfcompress.testing.GateSettings, got "
                f"{type(self.settings).__name__}."
            )
        _ = self.checks_to_run  # the outputs, metrics and thresholds, checked together
        require_int("threads", self.threads, 1, 2**31 - 1, "a positive integer")
        # one check of the feeding options for every config (models/feeding.py)
        from tfcompress.models.feeding import config_batch_dims, config_input_values

        set_(self, "batch_dims", config_batch_dims(self.batch_dims))
        set_(self, "input_values", config_input_values(self.input_values))

    def __hash__(self) -> int:  # the mappings are not hashable
        values = [
            tuple(sorted(v.items())) if isinstance(v, Mapping) else v
            for v in (getattr(self, f.name) for f in fields(self))
        ]
        return hash(tuple(values))

    @property
    def checks_to_run(self) -> tuple[Check, ...]:
        """The checks: ``checks``, or one per (output, metric) built from the options."""
        from tfcompress.testing.judge import build_checks

        if self.checks is not None:
            return self.checks
        return build_checks(self.outputs or None, self.metrics or None, **self.thresholds)

    @classmethod
    def from_options(cls, **options: Unpack[CheckGateOptions]) -> GateConfig:
        """The config :func:`~tfcompress.testing.output_gates.check_gate`'s keywords describe.

        A keyword left None keeps the default; ``mode``, ``backend``, ``confidence`` and
        ``interval`` build the :class:`GateSettings` (refused next to ``settings=`` unless
        they equal its defaults, as before); the other keywords not among the fields are
        the threshold table's.

        Raises:
            InvalidInputError: What :class:`GateConfig` or :class:`GateSettings` refuses.

        Example:
            >>> GateConfig.from_options(metrics="snr", min_snr=30).thresholds
            {'min_snr': 30}
        """
        given: dict[str, Any] = {k: v for k, v in options.items() if v is not None}
        loose = {
            k: given.pop(k) for k in ("mode", "backend", "confidence", "interval") if k in given
        }
        settings = given.pop("settings", None)
        if settings is None:
            settings = GateSettings(**loose)
        else:
            refuse_with_settings(**loose)
        if "checks" in given:
            given["checks"] = tuple(given["checks"])
        fields = ("outputs", "metrics", "threads", "checks", "batch_dims", "input_values")
        chosen = {k: given.pop(k) for k in fields if k in given}
        return cls(**chosen, settings=settings, thresholds=given)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe data: every option (tuples as lists, checks and settings as dicts)."""
        checks = None
        if self.checks is not None:
            checks = [
                {
                    "output": c.output,
                    "metric": c.metric
                    if c.metric is None or isinstance(c.metric, str)
                    else c.metric.name,
                    "threshold": c.threshold,
                }
                for c in self.checks
            ]
        return {
            "outputs": list(self.outputs),
            "metrics": list(self.metrics),
            "thresholds": dict(self.thresholds),
            "checks": checks,
            "settings": _settings_dict(self.settings),
            "threads": self.threads,
            "batch_dims": dict(self.batch_dims),
            "input_values": dict(self.input_values),
            "version": self.version,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GateConfig:
        """Read :meth:`to_dict` output (a gate report's ``config``).

        A check or a setting whose metric was a function of the caller's own is recorded
        by its name only, and read back only if that name is a known metric.

        Raises:
            InvalidInputError: Not a mapping, an unknown key, or a value the config refuses.
        """
        from tfcompress.testing.judge import Check

        values = checked_fields(cls, data, what="a gate config", taker="check_gate")
        settings = values.get("settings")
        if isinstance(settings, Mapping):
            kept = checked_fields(GateSettings, settings, what="settings", taker="GateSettings")
            values["settings"] = GateSettings(**kept)
        if isinstance(values.get("checks"), Sequence):
            checks = values["checks"]
            if not all(isinstance(c, Mapping) for c in checks):
                raise InvalidInputError(f"checks must be objects, got {shown(checks)}.")
            values["checks"] = tuple(Check(**dict(c)) for c in checks)
        return cls(**values)


class GateThresholds(TypedDict, total=False):
    """The threshold table's rows as keywords of a gating verb (None: the default)."""

    max_drop: float | None
    min_snr: float | None
    min_cosine: float | None
    max_abs: float | None
    min_agreement: float | None


class CheckGateOptions(GateThresholds, total=False):
    """:meth:`GateConfig.from_options`' (and ``check_gate``'s) keywords; None: the default.

    ``mode``, ``backend``, ``confidence`` and ``interval`` build the :class:`GateSettings`;
    a metric registered with a threshold of its own adds a keyword beyond these.
    """

    outputs: Sequence[str] | str | None
    metrics: Sequence[str] | str | None
    mode: str | None
    backend: str | None
    confidence: float | None
    interval: str | None
    threads: int | None
    checks: Sequence[Check] | None
    settings: GateSettings | None
    batch_dims: Mapping[str, int] | None
    input_values: Mapping[str, float] | None


def _settings_dict(settings: GateSettings) -> dict[str, Any]:
    """The settings as data; a metric name as given (``top1`` stays ``top1``)."""
    data = settings.to_dict()
    if isinstance(settings.metric, str):
        data["metric"] = settings.metric
    return data
