"""What a model selection searches for, as a checked config: :class:`SelectionConfig`.

:func:`tfcompress.select_model` takes one (``select_model(train_data=..., eval_data=...,
config=SelectionConfig(...))``); its keyword options only build the same config
(:meth:`SelectionConfig.from_options`), ``tfcompress select`` builds it from its flags, and
the result records it (``result.config``, ``"config"`` in ``selection.json``). Every option
is checked here, on construction, before any data is read or any model is built.

The config is what decides the pick: the budgets (and in them the target), the candidates
(families x widths x resolutions), how each is trained, calibrated and timed, the objective
and the seed. Who does the work and where it is kept are not in it: ``executor`` and
``workers`` (a local pool or a Dask cluster builds and trains the same candidates),
``workdir`` (a folder to resume from), ``progress`` and ``on``/``device`` (the machine that
times the int8 files) stay keywords of :func:`~tfcompress.selection.search.select_model`,
as ``on`` is a keyword of compress and benchmark.

Example:
    >>> config = SelectionConfig(families=("mobilenet_v2",), epochs=2)
    >>> config.target, SelectionConfig.from_dict(config.to_dict()) == config
    ('cpu', True)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, TypedDict

from tfcompress._config_fields import (
    CONFIG_VERSION,
    MAX_SEED,
    check_fields,
    check_version,
    checked_fields,
    integer,
    number,
    option,
)
from tfcompress.errors import InvalidInputError
from tfcompress.selection.budgets import Budgets

MAX_LATENCY_SECONDS = 3600.0
OBJECTIVES = ("accuracy", "reward")  # a literal: option() below declares it
_AT_LEAST_1 = integer(1, expected="a whole number >= 1")


@dataclass(frozen=True, kw_only=True)
class SelectionConfig:
    """Everything that decides what :func:`tfcompress.select_model` picks.

    Attributes:
        budgets: A :class:`Budgets` (or its dict); its ``target`` is the target latency and
            int8 accuracy are measured for (``cpu`` by default).
        families, width_multipliers, resolutions, epochs, objective, seed, batch_size,
            learning_rate, calibration_samples, latency_runs, latency_seconds: options,
            each declared with its default and help by :func:`~tfcompress._config_fields.option`.
        version: The config format.

    Raises:
        InvalidInputError: Impossible budgets, an unknown family or objective, a resolution
            a family cannot take, a value of the wrong type or range.
    """

    budgets: Budgets = field(default_factory=Budgets)
    families: tuple[str, ...] = option(
        ("mobilenet_v2", "mixnet_s"), help="zoo names, comma-separated (see `tfcompress zoo`)"
    )
    width_multipliers: tuple[float, ...] = option((0.35, 0.5), help="width multipliers to try")
    resolutions: tuple[int, ...] = option((32,), help="square input resolutions to try")
    epochs: int = option(
        3, help="training epochs of each candidate within the budgets", check=_AT_LEAST_1
    )
    objective: str = option(
        "accuracy",
        choices=OBJECTIVES,
        help="accuracy, or MnasNet's reward accuracy*(latency/max)^-0.07 (needs --max-latency)",
    )
    seed: int = option(
        0, help="seed of model initialisation, training and calibration", check=integer(0, MAX_SEED)
    )
    batch_size: int = option(32, help="training batch size", check=_AT_LEAST_1)
    learning_rate: float = option(
        1e-3,
        help="Adam's learning rate, finite and > 0",
        check=number(0, math.inf, "a finite number > 0"),
    )
    calibration_samples: int | None = option(
        None,
        help="training images that calibrate each trained int8 model (default: the int8 recipe's)",
        check=integer(1, expected="a whole number >= 1", optional=True),
    )
    latency_runs: int = option(
        50, help="minimum timed runs per latency measurement", check=_AT_LEAST_1
    )
    latency_seconds: float = option(
        0.5,
        unit="s",
        help="minimum timed seconds per latency measurement (0 to an hour)",
        check=number(  # closed: 0 and an hour are allowed
            math.nextafter(0.0, -1.0),
            math.nextafter(MAX_LATENCY_SECONDS, math.inf),
            f"from 0 to {MAX_LATENCY_SECONDS:g} (a measurement needs a finite minimum time)",
        ),
    )
    version: int = CONFIG_VERSION

    def __post_init__(self) -> None:
        from tfcompress.selection.candidates import enumerate_candidates

        set_ = object.__setattr__
        check_version("selection", self.version)
        set_(self, "budgets", _budgets(self.budgets))
        if self.objective not in OBJECTIVES:
            raise InvalidInputError(
                f"unknown objective {self.objective!r}; choose from {OBJECTIVES}."
            )
        if self.objective == "reward" and self.budgets.max_latency is None:
            raise InvalidInputError(
                "objective 'reward' scales accuracy by latency / max_latency: set max_latency."
            )
        check_fields(self)
        # Unknown families, widths <= 0, resolutions a family cannot take: before any work.
        enumerate_candidates(self.families, self.width_multipliers, self.resolutions)
        for name in ("families", "width_multipliers", "resolutions"):
            set_(self, name, tuple(getattr(self, name)))

    def __hash__(self) -> int:  # the budgets' target_limits dict is not hashable
        import json

        return hash(json.dumps(self.to_dict(), sort_keys=True))

    @property
    def target(self) -> str:
        """The target latency and int8 accuracy are measured for (``budgets.target``)."""
        return self.budgets.target

    @classmethod
    def from_options(cls, **options: Any) -> SelectionConfig:
        """The config :func:`tfcompress.select_model`'s keyword options describe.

        A keyword left None keeps the config's default.

        Raises:
            InvalidInputError: What :class:`SelectionConfig` refuses; an unknown option.

        Example:
            >>> SelectionConfig.from_options(epochs=1, seed=None).epochs
            1
        """
        given = checked_fields(
            cls,
            options,
            what="select_model's options",
            taker="select_model",
            leave_out=("version",),
        )
        return cls(**{name: value for name, value in given.items() if value is not None})

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe data: every option (tuples as lists, the budgets as a dict)."""
        data: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            data[f.name] = list(value) if isinstance(value, tuple) else value
        data["budgets"] = self.budgets.to_dict()
        return {**{k: v for k, v in data.items() if k != "version"}, "version": self.version}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SelectionConfig:
        """Read :meth:`to_dict` output (``selection.json``'s ``config``).

        Raises:
            InvalidInputError: Not a mapping, an unknown key, or a value the config refuses.
        """
        return cls(**checked_fields(cls, data, what="a selection config", taker="select_model"))


class SelectionOptions(TypedDict, total=False):
    """:func:`tfcompress.select_model`'s keyword options: :class:`SelectionConfig`'s fields.

    None: the config's default. ``tests/test_cli_options.py`` keeps it equal to the fields.
    """

    budgets: Budgets | Mapping[str, Any] | None
    families: Sequence[str] | None
    width_multipliers: Sequence[float] | None
    resolutions: Sequence[int] | None
    epochs: int | None
    objective: str | None
    seed: int | None
    batch_size: int | None
    learning_rate: float | None
    calibration_samples: int | None
    latency_runs: int | None
    latency_seconds: float | None


def _budgets(budgets: Any) -> Budgets:
    if budgets is None:
        return Budgets()
    if isinstance(budgets, Mapping):
        return Budgets.from_dict(dict(budgets))
    if not isinstance(budgets, Budgets):
        raise InvalidInputError(
            f"budgets must be a Budgets or a dict, got {type(budgets).__name__}."
        )
    return budgets


def check_workers(workers: Any) -> None:
    """Refuse a local pool size that is not a whole number >= 1."""
    _AT_LEAST_1("workers", workers)
