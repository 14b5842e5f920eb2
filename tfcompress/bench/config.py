"""How :func:`tfcompress.benchmark` measures, as a checked config: :class:`BenchmarkConfig`.

``benchmark(artifacts, config=BenchmarkConfig(...), data=...)`` takes one; its keyword
options only build the same config (:meth:`BenchmarkConfig.from_options`), ``tfcompress
benchmark`` builds it from its flags, and the result records it (``result.config``,
``"config"`` in ``benchmark.json``). Every option is checked here, on construction, before
any artifact or data is read, so a bad value gets the same message whichever way it came in.

What to measure and how is in the config; where the samples come from and where the
numbers go are not: ``data`` (the samples, like every verb's data), ``report_dir``,
``overwrite`` and ``progress`` (where the report is written and how the run is shown) and
``on``/``local``/``device`` (the machines that measure: the same config measures on a
laptop or on a Raspberry Pi) stay keywords of :func:`tfcompress.benchmark`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypedDict

from tfcompress._config_fields import (
    CONFIG_VERSION,
    boolean,
    check_fields,
    check_version,
    checked_fields,
    integer,
    option,
    shown,
)
from tfcompress.errors import InvalidInputError

if TYPE_CHECKING:
    from tfcompress.bench.metrics import MetricLike
    from tfcompress.models.signature import ModelSignature

MAX_SECONDS = 3600.0
"""The longest minimum time of a row's timing or warm-up (an hour, as the CLI has allowed)."""
_AT_LEAST_1 = integer(1, expected="an integer >= 1")


def _seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(f"{name} must be a number of seconds, got {shown(value)}.")
    if not (math.isfinite(value) and 0 <= value <= MAX_SECONDS):
        raise InvalidInputError(
            f"{name} must be from 0 to {MAX_SECONDS:g} seconds, got {shown(value)}."
        )
    return float(value)


def _name(name: str, value: Any) -> Any:
    if value is not None and not (isinstance(value, str) and value):
        raise InvalidInputError(f"{name} must be a name (a string), got {shown(value)}.")
    return value


def _counts(name: str, value: Any) -> tuple[int, ...]:
    values = [value] if _is_int(value) else value
    if (
        not isinstance(values, Sequence)
        or isinstance(values, str)
        or not values
        or not all(_is_int(v) and v >= 1 for v in values)
    ):
        listed = list(values) if isinstance(values, Sequence) else values
        raise InvalidInputError(f"{name} must be integers >= 1, got {shown(listed)}.")
    return tuple(dict.fromkeys(values))


@dataclass(frozen=True, kw_only=True)
class BenchmarkConfig:
    """Everything that decides what :func:`tfcompress.benchmark` measures, and how.

    Attributes:
        backends: Backend names (see :func:`tfcompress.runtime.list_backends`); a name is
            read as a one-name tuple.
        threads: CPU thread counts to measure.
        batch_sizes: Batch sizes to measure (throughput vs latency).
        runs: Minimum timed runs per row.
        min_seconds: Minimum timed seconds per row, 0 to an hour.
        warmup_runs: Minimum warm-up runs (the first call included).
        warmup_seconds: Minimum warm-up seconds, 0 to an hour.
        metric: What the accuracy column scores against the labels (a metric name such as
            ``"accuracy"``, ``"top5"``, ``"mse"``, or ``callable(labels, outputs)``); None
            chooses from the labels. A callable is recorded by its name and cannot be
            read back by :meth:`from_dict`.
        output: The output the accuracy column scores, for models with several outputs.
        input_shapes: Input name -> full shape (None at the batch allowed) of inputs with
            unknown dimensions, for runs without data.
        batch_dims: Input name -> the dimension that is its batch.
        input_values: Input name -> one value fed on every call (a scalar sample rate).
        reference: Artifact name the ratios compare to (None: the first float32 one).
        backend_options: Extra runner options per requested backend (``{"cpu":
            {"use_xnnpack": False}}``), as the backends declare them.
        timeout: Seconds one measurement in a worker may take, in (0, a week]; None: the
            child-process limit (``TFCOMPRESS_TIMEOUT``) read when the run starts.
        isolate: Run native runtimes in worker processes.
        safe_mode: Refuse Keras files that would run code when loaded (Lambda layers).
        profile_ops: Also time each op and each delegated partition of every ``.tflite``
            measured on the ``cpu`` backend (``row.op_profile``; see
            :mod:`tfcompress.bench.op_profile`); off by default, as it times every op.
        version: The config format.

    Raises:
        InvalidInputError: An unknown backend, a count below 1, a negative time, backend
            options for a backend not requested or that it does not take, a timeout out of
            range, ``profile_ops`` without the ``cpu`` backend, or a value of the wrong type.
    """

    backends: tuple[str, ...] = option(
        ("cpu",),
        help="backends to measure on, comma list of",
        metavar="BACKEND,BACKEND",
        names="BACKENDS",
        check=lambda _, v: _backends(v),
    )
    threads: tuple[int, ...] = option(
        (1,), help="CPU thread counts to measure, e.g. 1,2", check=_counts
    )
    batch_sizes: tuple[int, ...] = option(
        (1,), help="batch sizes to measure, e.g. 1,8,32", check=_counts
    )
    runs: int = option(50, help="minimum timed runs per row", check=_AT_LEAST_1)
    min_seconds: float = option(1.0, unit="s", help="minimum timed seconds per row", check=_seconds)
    warmup_runs: int = option(
        1, help="minimum warm-up runs (the first call included)", check=_AT_LEAST_1
    )
    warmup_seconds: float = option(0.5, unit="s", help="minimum warm-up seconds", check=_seconds)
    metric: MetricLike | None = option(  # noqa: RUF009 (a field, as the others)
        None,
        metavar="NAME",
        help="what the accuracy column scores against the labels: accuracy, topK, "
        "binary_accuracy, mse, mae, rmse or miou (none: chosen from the labels)",
    )
    output: str | None = option(
        None,
        metavar="NAME",
        help="the output the accuracy column scores (several outputs)",
        check=_name,
    )
    input_shapes: Mapping[str, tuple[int | None, ...]] = field(default_factory=dict)
    batch_dims: Mapping[str, int] = field(default_factory=dict)
    input_values: Mapping[str, float] = field(default_factory=dict)
    reference: str | None = option(
        None,
        metavar="NAME",
        help="artifact name ratios compare to (none: the first float32)",
        check=_name,
    )
    backend_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    timeout: float | None = option(
        None,
        unit="s",
        parse="time_limit",
        metavar="SECONDS",
        help="time limit of each native step, run in a child process (here: loading, the "
        "accuracy pass, one row's timing; past it the row is an error and the others go on): "
        "90s, 10m or 2h, at most a week (none: TFCOMPRESS_TIMEOUT, else 6h)",
    )
    isolate: bool = field(default=True, metadata={"check": boolean})
    safe_mode: bool = field(default=True, metadata={"check": boolean})
    profile_ops: bool = option(
        False,
        help="also time each op and each delegated partition of .tflite artifacts on the cpu "
        "backend (top ops in the table, all in the JSON's op_profile; see docs/benchmarking.md)",
        check=boolean,
    )
    version: int = CONFIG_VERSION

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        check_version("benchmark", self.version)
        check_fields(self)
        if self.metric is not None and not callable(self.metric):
            from tfcompress.bench.scoring import check_task_metric

            check_task_metric(self.metric)  # an unknown name, or one that needs a reference
        set_(self, "input_shapes", _shapes(self.input_shapes))
        # one check of the feeding options for every config (models/feeding.py)
        from tfcompress.models.feeding import config_batch_dims, config_input_values

        set_(self, "batch_dims", config_batch_dims(self.batch_dims))
        set_(self, "input_values", config_input_values(self.input_values))
        set_(self, "backend_options", self._checked_options())
        if self.timeout is not None:
            from tfcompress._limits import CHILD_TIMEOUT

            # Finite, above 0, a week at most (1e300 overflows the wait).
            set_(self, "timeout", CHILD_TIMEOUT.given(self.timeout, name="timeout (--timeout)"))
        if self.profile_ops and "cpu" not in self.backends:
            raise InvalidInputError(
                "profile_ops (--profile-ops) times LiteRT's cpu backend op by op, and the "
                f"backends are {', '.join(self.backends)}: add cpu to them (--backends)."
            )

    def __hash__(self) -> int:  # the mappings are not hashable
        def frozen(value: Any) -> Any:
            if isinstance(value, Mapping):
                return tuple(sorted((k, frozen(v)) for k, v in value.items()))
            return value

        return hash(tuple(frozen(getattr(self, f.name)) for f in fields(self)))

    def _checked_options(self) -> dict[str, dict[str, Any]]:
        """The backend options, refused before anything is loaded when no row would honour them."""
        from tfcompress.runtime import check_backend_options

        given = self.backend_options
        if not isinstance(given, Mapping) or not all(
            isinstance(v, Mapping) for v in given.values()
        ):
            raise InvalidInputError(
                "backend_options must map a backend name to its options, e.g. "
                f"{{'cpu': {{'use_xnnpack': False}}}}, got {shown(given)}."
            )
        options = {str(k): dict(v) for k, v in given.items()}
        for backend, chosen in options.items():
            if backend not in self.backends:
                raise InvalidInputError(
                    f"backend_options for {backend!r}, which is not among the requested "
                    f"backends ({', '.join(self.backends)}); add it to the backends or drop "
                    "its options."
                )
            if "threads" in chosen:
                raise InvalidInputError(
                    f"backend_options[{backend!r}] sets threads; pass threads=(...) to "
                    "benchmark instead, which labels every row with the thread count it ran."
                )
            check_backend_options(backend, chosen)
        return options

    def input_dims(self, signature: ModelSignature) -> dict[str, int]:
        """The declared batch dimensions of the inputs ``signature`` has (names vary by format)."""
        return {k: v for k, v in self.batch_dims.items() if k in signature.input_names}

    @property
    def timing(self) -> dict[str, float]:
        """The timing options: ``runs``, ``min_seconds``, ``warmup_runs``, ``warmup_seconds``."""
        return {
            "runs": self.runs,
            "min_seconds": self.min_seconds,
            "warmup_runs": self.warmup_runs,
            "warmup_seconds": self.warmup_seconds,
        }

    @classmethod
    def from_options(cls, **options: Any) -> BenchmarkConfig:
        """The config :func:`tfcompress.benchmark`'s keyword options describe.

        A keyword left None keeps the config's default.

        Raises:
            InvalidInputError: What :class:`BenchmarkConfig` refuses; an unknown option.

        Example:
            >>> BenchmarkConfig.from_options(backends="cpu", runs=None).backends
            ('cpu',)
        """
        given = checked_fields(
            cls, options, what="benchmark's options", taker="benchmark", leave_out=("version",)
        )
        return cls(**{name: value for name, value in given.items() if value is not None})

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe data: every option (tuples as lists, a callable metric by name)."""
        from tfcompress._json import json_safe

        # Tuples as lists at any depth; every mapping is a dict once checked (__post_init__).
        data = json_safe({f.name: getattr(self, f.name) for f in fields(self)})
        if callable(self.metric):
            data["metric"] = getattr(self.metric, "__name__", type(self.metric).__name__)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchmarkConfig:
        """Read :meth:`to_dict` output (``benchmark.json``'s ``config``).

        Raises:
            InvalidInputError: Not a mapping, an unknown key, or a value the config refuses.
        """
        return cls(**checked_fields(cls, data, what="a benchmark config", taker="benchmark"))


class BenchmarkOptions(TypedDict, total=False):
    """:func:`tfcompress.benchmark`'s keyword options: :class:`BenchmarkConfig`'s fields.

    None: the config's default. ``tests/test_cli_options.py`` keeps it equal to the fields.
    """

    backends: Sequence[str] | str | None
    threads: Sequence[int] | int | None
    batch_sizes: Sequence[int] | int | None
    runs: int | None
    min_seconds: float | None
    warmup_runs: int | None
    warmup_seconds: float | None
    metric: MetricLike | None
    output: str | None
    input_shapes: Mapping[str, Sequence[int | None]] | None
    batch_dims: Mapping[str, int] | None
    input_values: Mapping[str, float] | None
    reference: str | None
    backend_options: Mapping[str, Mapping[str, Any]] | None
    timeout: float | None
    isolate: bool | None
    safe_mode: bool | None
    profile_ops: bool | None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _backends(value: Any) -> tuple[str, ...]:
    from tfcompress.runtime import BACKENDS, list_backends

    names = [value] if isinstance(value, str) else value
    known = list_backends()
    if not isinstance(names, Sequence) or not all(isinstance(n, str) for n in names):
        raise InvalidInputError(f"backends must be backend names, got {shown(value)}.")
    if not names:
        raise InvalidInputError(f"no backend given; choose one of {', '.join(known)}.")
    for name in names:
        BACKENDS.get(name)  # UnknownNameError lists them
    return tuple(dict.fromkeys(names))


def _shapes(value: Any) -> dict[str, tuple[int | None, ...]]:
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"input_shapes must map input names to shapes, got {shown(value)}.")
    shapes: dict[str, tuple[int | None, ...]] = {}
    for name, shape in value.items():
        if (
            not isinstance(name, str)
            or not isinstance(shape, Sequence)
            or isinstance(shape, str)
            or not all(d is None or (_is_int(d) and d > 0) for d in shape)
        ):
            raise InvalidInputError(
                f"input_shapes[{shown(name)}] must be a shape of positive integers (None at the "
                f"batch allowed), e.g. (1, 43844, 1), got {shown(shape)}."
            )
        shapes[name] = tuple(shape)
    return shapes
