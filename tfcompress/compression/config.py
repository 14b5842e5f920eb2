"""What a compress search is asked for, as a checked config: :class:`CompressConfig`.

:func:`tfcompress.compress` takes one (``compress(model, config=CompressConfig(...),
representative_data=..., eval_data=...)``); its keyword options only build the same config
(:meth:`CompressConfig.from_options`), ``tfcompress compress`` builds it from its flags, and
the result records it (``result.config``, ``"config"`` in ``compress.json``). Every option
is checked here, on construction, before any model or data is read.

Example:
    >>> config = CompressConfig(target="edgetpu", thresholds={"max_drop": 0.02})
    >>> config.static_batch, CompressConfig.from_dict(config.to_dict()) == config
    (None, True)
    >>> CompressConfig.from_options(max_drop=0.01, threads=2).threads
    2
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from tfcompress._config_fields import (
    CONFIG_VERSION,
    MAX_SEED,
    boolean,
    check_fields,
    check_version,
    checked_fields,
    integer,
    maybe_boolean,
    name_list,
    number,
    option,
    shown,
)
from tfcompress.compression.candidates import OBJECTIVES, check_choice
from tfcompress.errors import InvalidInputError
from tfcompress.testing.config import GateThresholds

if TYPE_CHECKING:
    from tfcompress.testing.judge import Check
    from tfcompress.testing.settings import GateSettings


@dataclass(frozen=True, kw_only=True)
class CompressConfig:
    """Everything a compress search is asked for: target, objective, gate, budgets, batches.

    The model and the data (calibration, eval, training samples) are not in it. The
    options made by :func:`~tfcompress._config_fields.option` (``objective``,
    ``time_budget``, ``threads``, ``measure_latency``, ``max_slowdown``, ``static_batch``,
    ``batch_size``, ``freeze_batchnorm``, ``seed``) say what they do, their unit and default
    where they are declared, below; ``measure_latency=None`` times wherever the target's
    latency backend runs here, ``False`` nothing (refused with ``max_slowdown`` or
    ``objective="latency"``); ``max_slowdown=None`` is 1.0 with a
    :data:`~tfcompress.quantization.methods.slow_ops.NOISE_TOLERANCE` allowance.

    Attributes:
        target: A registered target (:func:`tfcompress.targets.base.list_targets`): its gate
            and latency backends, the rungs it admits, its check and its rank apply.
        thresholds: The gate's thresholds by name, as :func:`tfcompress.check_gate` takes
            them (``max_drop`` a fraction in [0, 1], ``min_snr`` in dB, ``min_cosine``,
            ``max_abs``, ``min_agreement``); empty: ``max_drop`` 0.01 for accuracy-like
            metrics.
        outputs: Output names to gate (empty: every output).
        metrics: Gate metrics (empty: chosen per output, as ``check_gate`` chooses).
        mode: ``"strict"``, ``"tolerant"`` or ``"proven"``.
        confidence: Level of the intervals, in (0, 1).
        interval: ``"auto"``, ``"mcnemar"`` or ``"bootstrap"``.
        batch_dims: How every data set is laid out, as ``benchmark`` and ``gate`` read it:
            input (or output) name -> the dimension that is its batch, where the signature
            cannot tell (``{"state": 1}``; ``--batch-dim state=1``).
        input_values: Input name -> one value fed on every call, for inputs the data
            lacks (``{"sr": 16000}``; ``--input-value sr=16000``).
        version: The config format.

    Raises:
        InvalidInputError: An unknown target, objective, threshold, mode or interval; a
            value of the wrong type or range; a static batch the target does not allow.
    """

    target: str = "cpu"
    objective: str | None = option(
        None,
        choices=("size", "latency"),  # candidates.OBJECTIVES (tests/test_cli_options.py)
        help="size: smallest gzip; latency: fastest per sample measured on the target (default: "
        "the target's own: latency for --target gpu where LiteRT finds a GPU, else size)",
    )
    time_budget: float | None = option(
        None,
        unit="s",
        parse="duration",
        metavar="T",
        help="wall-clock budget: 90s, 10m, 1h",
        check=number(0, math.inf, "a positive number of seconds", optional=True),
    )
    thresholds: Mapping[str, float] = field(default_factory=dict)
    outputs: tuple[str, ...] = field(default=(), metadata={"check": name_list})
    metrics: tuple[str, ...] = field(default=(), metadata={"check": name_list})
    mode: str = "strict"
    confidence: float = 0.95
    interval: str = "auto"
    threads: int = option(
        1,
        help="threads of the gate and the latency measurements",
        check=integer(1, 2**31 - 1, "a positive integer"),
    )
    measure_latency: bool | None = option(
        None,
        help="time every attempt and the float32 baseline on the target (default: wherever its "
        "latency backend runs here; given, a target whose backend cannot run here is refused). "
        "--no-measure-latency times nothing (about 0.4 s less per attempt): no slowdown is "
        "checked, and the report says so",
        check=maybe_boolean,
    )
    max_slowdown: float | None = option(
        None,
        help="the slowest artifact returned, as a ratio of float32's median latency per sample "
        "(a .tflite input: the file given's), timed in the same run; default 1.0: never "
        "slower (10% allowed for timing noise)",
        check=number(
            0, math.inf, "a positive ratio to float32's latency (1.0: never slower)", optional=True
        ),
    )
    static_batch: int | None = option(
        None,
        help="a static batch in every post-training artifact's file (e.g. 1 for RNNs whose "
        "conversion needs one); not with --train",
    )
    batch_size: int | None = option(
        None,
        help="with --train: the fine-tuning batch of the QAT, pruning and clustering rungs "
        "(default: their configs' 32)",
    )
    freeze_batchnorm: bool = option(
        True,
        help="with --train: the fine-tuning rungs keep BatchNormalization statistics frozen "
        "(--no-freeze-batchnorm lets them train)",
        check=boolean,
    )
    seed: int = option(
        0, help="seed of the calibration subsets and the fine-tuning", check=integer(0, MAX_SEED)
    )
    batch_dims: Mapping[str, int] = field(default_factory=dict)
    input_values: Mapping[str, float] = field(default_factory=dict)
    version: int = CONFIG_VERSION

    def __post_init__(self) -> None:
        from tfcompress.targets.base import get_target

        check_version("compress", self.version)
        set_ = object.__setattr__
        set_(self, "thresholds", _thresholds(self.thresholds))
        device = get_target(self.target)  # refuses an unknown one, listing the registered ones
        if self.objective is not None:
            check_choice(self.objective, OBJECTIVES, "objective")
        check_fields(self)
        set_(self, "confidence", self.settings.confidence)  # mode, confidence, interval
        _ = self.checks  # the outputs, metrics and thresholds, checked together
        if self.measure_latency is False and self.max_slowdown is not None:
            raise InvalidInputError(
                "max_slowdown (--max-slowdown) compares every attempt's measured latency with "
                "float32's, but measure_latency=False (--no-measure-latency) times nothing: drop "
                "one."
            )
        if self.measure_latency is False and self.objective == "latency":
            raise InvalidInputError(
                "objective='latency' (--objective latency) ranks by measured latency, but "
                "measure_latency=False (--no-measure-latency) times nothing: drop one."
            )
        _check_host_time(self, device)
        _check_static_batch(self.static_batch, device)
        if self.batch_size is not None:
            from tfcompress.training.configs import QATConfig

            QATConfig(batch_size=self.batch_size)  # the fine-tuning configs' own check
        from tfcompress.models.feeding import config_batch_dims, config_input_values

        set_(self, "batch_dims", config_batch_dims(self.batch_dims))
        set_(self, "input_values", config_input_values(self.input_values))

    def __hash__(self) -> int:  # the dicts are not hashable
        dicts = ("thresholds", "batch_dims", "input_values")
        values = [getattr(self, f.name) for f in fields(self) if f.name not in dicts]
        return hash((*values, *(tuple(sorted(getattr(self, d).items())) for d in dicts)))

    @property
    def checks(self) -> tuple[Check, ...]:
        """The gate's checks: one per (output, metric) (see :func:`build_checks`)."""
        from tfcompress.testing.judge import build_checks

        return build_checks(self.outputs or None, self.metrics or None, **self.thresholds)

    @property
    def settings(self) -> GateSettings:
        """The gate's settings, on the target's gate backend."""
        from tfcompress.targets.base import get_target
        from tfcompress.testing.settings import GateSettings

        backend = get_target(self.target).gate_backend
        return GateSettings(
            mode=self.mode, backend=backend, confidence=self.confidence, interval=self.interval
        )

    @property
    def measure(self) -> bool:
        """Whether every attempt is timed: unless ``measure_latency=False``.

        With ``measure_latency=None`` the search still goes on untimed where the target's
        latency backend cannot run here (and says so).
        """
        return self.measure_latency is not False

    @property
    def slowdown_limit(self) -> float:
        """``max_slowdown``, or its default 1.0 (never slower than float32)."""
        return 1.0 if self.max_slowdown is None else self.max_slowdown

    @classmethod
    def from_options(cls, **options: Any) -> CompressConfig:
        """The config :func:`tfcompress.compress`'s keyword options describe.

        The keywords are the config's fields (:class:`CompressOptions`) and the gate's
        thresholds by name (``max_drop=0.01``, ``min_snr=25``...); one left None keeps the
        config's default.

        Raises:
            InvalidInputError: What :class:`CompressConfig` refuses; an unknown option
                (naming the valid ones).

        Example:
            >>> CompressConfig.from_options(outputs="cls", min_snr=25).outputs
            ('cls',)
        """
        from tfcompress.bench.thresholds import threshold_names

        given = checked_fields(
            cls,
            options,
            what="compress's options",
            taker="compress",
            leave_out=("version", "thresholds"),
            also=threshold_names(),
        )
        thresholds = {k: given.pop(k) for k in threshold_names() if k in given}
        chosen = {name: value for name, value in given.items() if value is not None}
        return cls(**chosen, thresholds=thresholds)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe data: every option (tuples as lists), ``version`` last."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "version"}
        data |= {
            "thresholds": dict(self.thresholds),
            "outputs": list(self.outputs),
            "metrics": list(self.metrics),
            "batch_dims": dict(self.batch_dims),
            "input_values": dict(self.input_values),
        }
        return {**data, "version": self.version}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CompressConfig:
        """Read :meth:`to_dict` output (``compress.json``'s ``config``).

        Raises:
            InvalidInputError: Not a mapping, an unknown key, or a value the config refuses.
        """
        return cls(**checked_fields(cls, data, what="a compress config", taker="compress"))


class CompressOptions(GateThresholds, total=False):
    """:func:`tfcompress.compress`'s keyword options, for type checkers.

    :class:`CompressConfig`'s fields (see it for each) and the gate's thresholds by name;
    None: the config's default. ``tests/test_cli_options.py`` keeps it equal to the fields.
    """

    target: str | None
    objective: str | None
    time_budget: float | None
    outputs: Sequence[str] | str | None
    metrics: Sequence[str] | str | None
    mode: str | None
    confidence: float | None
    interval: str | None
    threads: int | None
    measure_latency: bool | None
    max_slowdown: float | None
    static_batch: int | None
    batch_size: int | None
    freeze_batchnorm: bool | None
    seed: int | None
    batch_dims: Mapping[str, int] | None
    input_values: Mapping[str, float] | None


def _thresholds(given: Any) -> dict[str, float]:
    """The thresholds given (None dropped), named as the threshold table names them."""
    from tfcompress.bench.thresholds import check_threshold_names
    from tfcompress.testing.settings import parse_max_drop

    if not isinstance(given, Mapping):
        raise InvalidInputError(
            f"thresholds must be a mapping of threshold names to values, got {shown(given)}."
        )
    chosen = check_threshold_names(dict(given), where="compress")
    if "max_drop" in chosen:
        chosen["max_drop"] = parse_max_drop(chosen["max_drop"])  # a fraction, as --max-drop
    return chosen


def _check_host_time(config: CompressConfig, device: Any) -> None:
    """Refuse judging by a time that is no device figure (``--target mcu``'s host TFLM).

    Raises:
        InvalidInputError: ``objective="latency"`` or ``max_slowdown`` for such a target.
    """
    if device.judges_latency:
        return
    asked = [
        flag
        for flag, given in (
            ("objective='latency' (--objective latency)", config.objective == "latency"),
            ("max_slowdown (--max-slowdown)", config.max_slowdown is not None),
        )
        if given
    ]
    if asked:
        raise InvalidInputError(
            f"{' and '.join(asked)} would judge by {device.latency_backend}'s time on this "
            f"host, which is no device figure for {device.display_name}: compress ranks its "
            "artifacts by arena, then flash, and shows the host time labelled; drop "
            f"{'them' if len(asked) > 1 else 'it'}."
        )


def _check_static_batch(static_batch: int | None, device: Any) -> None:
    """Refuse a static batch the recipes refuse, or one a fixed-batch target cannot take."""
    from tfcompress.quantization.recipes import Recipe

    if static_batch is None:
        return
    Recipe("float32", static_batch=static_batch)  # its type and range, as quantize checks them
    fixed = device.rules.static_batch
    if fixed is not None and static_batch != fixed and not device.rules.batch_is_default:
        raise InvalidInputError(
            f"{device.display_name} needs a static batch of {fixed}, not {static_batch}; drop "
            f"--static-batch (--target {device.name} fixes it at {fixed})."
        )
