"""The gate thresholds as one table: name, metric, flags, ini key, default and valid range.

Every reader of a threshold works from :func:`thresholds`: ``max_drop`` (every task metric's)
and the threshold each metric with one of its own declares where it is registered
(``@register_metric("snr", threshold=ThresholdDef("min_snr", ...))``). The metric
definitions validate a value with its row, :func:`~tfcompress.testing.judge.build_checks`
maps it to its metric, the CLI adds one flag per row (``--min-snr``), the pytest plugin one
option and ini key per row that may be set for a whole run (``--tfc-min-snr``, ``tfc_min_snr``), and
:func:`~tfcompress.testing.check_gate` and :func:`~tfcompress.compress` take one keyword per
row. A new metric is one function and its registration; nothing here lists it.

Importing this module imports no numpy (the CLI builds its flags from it): the built-in
metrics' rows are read from their source (:func:`tfcompress._declared.declared_thresholds`).

Example:
    >>> get_threshold("min_snr").flag, get_threshold("min_snr").default
    ('--min-snr', 20.0)
    >>> threshold_names()
    ('max_drop', 'min_snr', 'min_cosine', 'max_abs', 'min_agreement')
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tfcompress._declared import declared_thresholds
from tfcompress.errors import InvalidInputError

#: Allowed drop of accuracy-like task metrics when none is given: one point.
DEFAULT_MAX_DROP = 0.01


@dataclass(frozen=True)
class ThresholdDef:
    """One gate threshold.

    Attributes:
        name: Keyword of the gates and of compress (``min_snr``); ``max_*`` bounds from
            above (the judged number may not exceed it), ``min_*`` from below.
        meaning: What it bounds, for help texts (``smallest SNR in dB``).
        default: Its value when a metric is judged with none given (None: no unit-free
            default, so it must be given: ``max_abs``); for ``max_drop`` the default of
            fraction metrics.
        low: Smallest valid value (inclusive).
        high: Largest valid value (inclusive); for ``max_drop`` of fraction metrics, 1.
        metavar: Placeholder in help texts.
        suite_default: The pytest plugin lets a whole run set it (``--tfc-min-snr`` and the
            ``tfc_min_snr`` ini key), as a default for gates that set none.
        metric: The metric it judges and asks for when no metric is named (``snr``), set by
            the metric's registration; None for ``max_drop``, which judges every task metric
            in its own unit.

    Example:
        >>> get_threshold("min_cosine").check("0.995")
        0.995
    """

    name: str
    meaning: str
    default: float | None
    low: float = -math.inf
    high: float = math.inf
    metavar: str = "X"
    suite_default: bool = True
    metric: str | None = None

    @property
    def flag(self) -> str:
        """The CLI flag (``--min-snr``)."""
        return "--" + self.name.replace("_", "-")

    @property
    def plugin_flag(self) -> str:
        """The pytest option (``--tfc-min-snr``)."""
        return "--tfc-" + self.name.replace("_", "-")

    @property
    def ini_key(self) -> str:
        """The pytest ini key (``tfc_min_snr``)."""
        return f"tfc_{self.name}"

    @property
    def help(self) -> str:
        """One line for ``--help``: the meaning and the default."""
        default = "" if self.default is None else f" (default {self.default:g})"
        return f"{self.meaning}{default}"

    def check(
        self, value: Any, *, source: str | None = None, unit: str = "", metric: str = ""
    ) -> float:
        """``value`` as a float within this threshold's range.

        Args:
            value: A number or numeric string.
            source: Where it came from, for the message (default: the name).
            unit: The judged metric's unit (``fraction``, ``dB``...): ``max_drop`` is a
                fraction in [0, 1] only for fraction metrics, any drop >= 0 otherwise.
            metric: The judged metric's name, for the message.

        Returns:
            The threshold.

        Raises:
            InvalidInputError: Not a finite number, or out of range.

        Example:
            >>> get_threshold("max_drop").check(0.5, unit="number")
            0.5
        """
        source = source or self.name
        number = finite_number(value, source)
        low, high = self.low, self.high
        if self.metric is None and unit != "fraction":
            high = math.inf  # a drop of mse or mae is in the metric's own unit
        if low <= number <= high:
            return number
        hint = f" (did you mean {number / 100:g}?)" if high == 1.0 < number <= 100 else ""
        span = f"in [{low:g}, {high:g}]" if high < math.inf else f">= {low:g}"
        name = metric or self.metric or "task metric"
        note = {"fraction": "a fraction, 0.01 = one point", "dB": "dB"}.get(
            unit, f"in {name} units"
        )
        drop_note = f" ({note})" if self.metric is None and unit else ""
        raise InvalidInputError(
            f"{source} for {name} must be {span}{drop_note}, got {value!r}{hint}."
        )


#: Every task metric's threshold: its allowed drop (the one row no metric declares).
MAX_DROP = ThresholdDef(
    "max_drop",
    "allowed worsening of task metrics in their unit: a fraction for accuracy-like ones "
    "(0.01 = one point), e.g. 0.001 for mse",
    DEFAULT_MAX_DROP,
    0.0,
    1.0,
    "X",
)


def thresholds() -> tuple[ThresholdDef, ...]:
    """``max_drop``, then each metric's own threshold, in registration order.

    Read from the built-in metrics' source and from those registered in this process.
    """
    rows = {row.name: row for row in _declared()}
    registry = sys.modules.get("tfcompress.bench.metric_def")  # not loaded: none registered
    if registry is not None:
        rows.update((row.name, row) for row in registry.metric_thresholds())
    return (MAX_DROP, *rows.values())


@functools.cache
def _declared() -> tuple[ThresholdDef, ...]:
    return tuple(ThresholdDef(**row, metric=metric) for metric, row in declared_thresholds())


def threshold_names() -> tuple[str, ...]:
    """The threshold keywords, in table order."""
    return tuple(row.name for row in thresholds())


def get_threshold(name: str) -> ThresholdDef:
    """The row of threshold ``name``.

    Raises:
        InvalidInputError: No such threshold (the message lists them).
    """
    found = {row.name: row for row in thresholds()}
    if name not in found:
        raise InvalidInputError(f"unknown threshold {name!r}; choose one of {', '.join(found)}.")
    return found[name]


def implied_metric(name: str) -> str | None:
    """The metric a threshold asks for when no metric is named (None for ``max_drop``)."""
    return get_threshold(name).metric


def check_threshold_names(given: Mapping[str, Any], *, where: str) -> dict[str, Any]:
    """The thresholds given (None values dropped), after refusing names not in the table.

    Args:
        given: Keyword name -> value, as a function received them.
        where: The function, for the message (``check_gate``).

    Raises:
        InvalidInputError: A keyword that is not a threshold (a typo such as ``min_snrr``).

    Example:
        >>> check_threshold_names({"min_snr": 25, "max_drop": None}, where="check_gate")
        {'min_snr': 25}
    """
    names = threshold_names()
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise InvalidInputError(
            f"{where} got unknown option(s) {', '.join(unknown)}; its thresholds are "
            f"{', '.join(names)}."
        )
    return {name: value for name, value in given.items() if value is not None}


def finite_number(value: Any, what: str) -> float:
    """``value`` as a finite float; booleans, non-numbers, NaN and Inf are refused.

    Args:
        value: A number or numeric string.
        what: What the number is, for the message (``"max_drop"``).

    Returns:
        The number.

    Raises:
        InvalidInputError: Not a finite number.

    Example:
        >>> finite_number("0.5", "threshold")
        0.5
    """
    if isinstance(value, bool):
        raise InvalidInputError(f"{what} must be a number, got {value!r}.")
    try:
        number = float(value)
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"{what} must be a number, got {value!r}.") from error
    if not math.isfinite(number):
        raise InvalidInputError(f"{what} must be a finite number, got {value!r}.")
    return number
