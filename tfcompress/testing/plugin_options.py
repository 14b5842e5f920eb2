"""Resolve the ``accuracy_gate`` options of one test: call > marker > command line > ini > defaults.

The one job of this module is to turn what a test and a test run configure (call keywords,
``@pytest.mark.accuracy_gate(...)`` arguments, ``--tfc-*`` options, ``tfc_*`` ini keys) into
validated :class:`GateOptions`, with every bad value refused as an :class:`OptionError` (a
usage error at collection, an ``InvalidInputError`` for a call's keywords) or an
``argparse.ArgumentTypeError`` for a command-line value. Thresholds a test sets (marker or
call) are the gate's own; those of the whole run are defaults that never add a metric.
Importing it imports no TensorFlow: metric and settings code loads when options resolve.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pytest

from tfcompress.bench.thresholds import threshold_names, thresholds

if TYPE_CHECKING:
    from tfcompress.testing.report import GateReport
    from tfcompress.testing.settings import GateSettings

MARKER = "accuracy_gate"
THRESHOLDS = threshold_names()
_SETTINGS_KEYS = ("mode", "backend", "confidence", "interval", "resamples", "seed")
MARKER_ARGUMENTS = ("outputs", "metrics", "metric", *THRESHOLDS, *_SETTINGS_KEYS)
# Options set for the whole run: key -> (command-line option, ini key). Thresholds here are
# defaults (see the module docstring); max_drop is the default of fraction task metrics.
SUITE_OPTIONS = {
    "backend": ("--tfc-backend", "tfc_backend"),
    "metrics": ("--tfc-metric", "tfc_metric"),
    **{row.name: (row.plugin_flag, row.ini_key) for row in thresholds() if row.suite_default},
}
IMPLIED = {  # threshold -> the metric it asks for (max_drop judges every task metric)
    row.name: row.metric for row in thresholds() if row.metric is not None
}
_ARGUMENT_OF_FLAG = {"metric": "metrics", **{k.replace("_", "-"): k for k in THRESHOLDS}}
_TEST_SOURCES = ("marker", "call")


@dataclass(frozen=True)
class GateOptions:
    """Everything one gate call uses, resolved from call, marker, command line, ini, defaults.

    Attributes:
        settings: Mode, backend, confidence, interval, resamples and seed; its ``max_drop``
            is the allowed drop of fraction task metrics (accuracy, topK, binary_accuracy,
            miou) that set none of their own.
        outputs: Output names to gate; empty gates every output.
        metrics: Metric names; empty lets each output's metric be chosen from its shape and
            labels.
        thresholds: Thresholds the test set (marker or call keywords), passed to
            :func:`~tfcompress.testing.output_gates.check_gate` as given.
        defaults: ``min_snr``/``min_cosine``/``min_agreement`` set for the whole run; they
            replace the built-in default wherever that metric is judged without a threshold
            of the test's own.
        metric_function: A legacy ``callable(labels, outputs) -> float`` metric; the gate
            then runs :func:`~tfcompress.testing.check_accuracy_drop` instead.
        sources: Where each option came from: ``"call"``, ``"marker"``, ``"command line"``,
            ``"ini"`` or ``"default"`` (``max_drop`` and ``backend`` always listed).

    Example:
        >>> from tfcompress.testing.settings import GateSettings
        >>> options = GateOptions(GateSettings(), metrics=("snr",), defaults={"min_snr": 25.0})
        >>> options.max_drop
        0.01
    """

    settings: GateSettings
    outputs: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    thresholds: Mapping[str, float] = field(default_factory=dict)
    defaults: Mapping[str, float] = field(default_factory=dict)
    metric_function: Callable[[Any, Any], float] | None = None
    sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def max_drop(self) -> float:
        """The allowed drop of task metrics: the test's own, else the run's default."""
        return self.thresholds.get("max_drop", self.settings.max_drop)


class OptionError(Exception):
    """A bad gate option; the caller turns it into a usage error or an InvalidInputError."""


def resolve_options(
    config: pytest.Config, item: pytest.Item, overrides: Mapping[str, Any] | None = None
) -> GateOptions:
    """Options of ``item``'s gate: call keywords > marker > command line > ini > defaults.

    ``item``'s ``accuracy_gate`` markers are merged, closest last; ``overrides``, the
    keywords of one gate call, win over everything.

    Raises:
        OptionError: A marker with positional or unknown arguments, a bad value, or options
            that contradict each other (``min_snr`` with only ``metrics=["accuracy"]``).
        pytest.UsageError: A bad ``tfc_*`` ini value.
    """
    from tfcompress.errors import InvalidInputError

    layers: list[tuple[str, dict[str, Any]]] = [("ini", ini_values(config))]
    command_line = {}
    for key, (flag, _) in SUITE_OPTIONS.items():
        value = config.getoption(flag.lstrip("-").replace("-", "_"))
        if value is not None:
            command_line[key] = _flat(value) if key == "metrics" else value
    layers.append(("command line", command_line))
    for marker in reversed(list(item.iter_markers(MARKER))):  # closest marker wins
        layers.append(("marker", _marker_arguments(marker)))
    if overrides:
        layers.append(("call", _normalised(dict(overrides), "keyword")))
    values: dict[str, Any] = {}
    sources = {"max_drop": "default", "backend": "default"}
    for source, layer in layers:
        for key, value in layer.items():
            values[key], sources[key] = value, source
    try:
        return _build_options(values, sources)
    except InvalidInputError as error:
        raise OptionError(_plugin_words(str(error))) from error


def with_run_defaults(report: GateReport, options: GateOptions) -> GateReport:
    """``report`` re-judged with the run's default thresholds where the test set none."""
    verdicts = []
    for verdict in report.verdicts:
        name = verdict.threshold_name
        if name in options.defaults and name not in options.thresholds:
            verdict = replace(verdict, threshold=float(options.defaults[name]))
            verdict = replace(verdict, passed=verdict.meets_threshold())
        verdicts.append(verdict)
    return replace(report, verdicts=tuple(verdicts))


def _build_options(values: dict[str, Any], sources: dict[str, str]) -> GateOptions:
    from tfcompress.bench.metrics import get_metric
    from tfcompress.errors import InvalidInputError
    from tfcompress.testing.judge import build_checks
    from tfcompress.testing.settings import DEFAULT_MAX_DROP, GateSettings, parse_max_drop

    # Thresholds the test set are the gate's own; those of the run are defaults.
    own = {k: values[k] for k in THRESHOLDS if k in values and sources[k] in _TEST_SOURCES}
    run = {k: values[k] for k in THRESHOLDS if k in values and k not in own}
    run_max_drop = run.pop("max_drop", DEFAULT_MAX_DROP)
    metrics = values.get("metrics", ())
    function = metrics if callable(metrics) else None
    names = () if function is not None else tuple(get_metric(m).name for m in metrics)
    task = [d for d in map(get_metric, names) if d.kind == "task"]
    for key, value in own.items():
        if key == "max_drop" and (not names or any(d.unit == "fraction" for d in task)):
            own[key] = parse_max_drop(value, source=key)
        elif key == "max_drop":
            own[key] = task[0].check_threshold(value, source=key) if task else value
        else:
            own[key] = get_metric(IMPLIED[key]).check_threshold(value, source=key)
    # The settings' max_drop is the default of fraction task metrics; a test's own max_drop
    # in another unit (mse) travels with the thresholds only.
    fraction = own.get("max_drop", run_max_drop)
    settings = GateSettings(
        max_drop=fraction if 0.0 <= fraction <= 1.0 else run_max_drop,
        metric=function if function is not None else "top1",
        **{k: values[k] for k in _SETTINGS_KEYS if k in values},
    )
    outputs = tuple(values.get("outputs", ()))
    if function is not None:
        extra = sorted({*own, *(["outputs"] if outputs else [])} - {"max_drop"})
        if extra:
            raise InvalidInputError(
                f"a metric function runs the single-output check_accuracy_drop gate, which "
                f"takes max_drop only, not {', '.join(extra)}; name metrics instead (metrics="
                "['accuracy', 'snr'...]) to gate outputs with check_gate."
            )
    else:
        build_checks(outputs or None, names or None, **own)  # contradictions, unknown names
        for definition in map(get_metric, names):
            has_default = definition.default_threshold is not None or (
                definition.kind == "task" and definition.unit == "fraction"
            )
            if not has_default and definition.threshold_name not in own:
                raise InvalidInputError(
                    f"{definition.name} is in the output's own unit, so it has no default "
                    f"threshold; give {definition.threshold_name}=... in that unit."
                )
    shown = {k: v for k, v in sources.items() if k in ("max_drop", "backend") or k in values}
    return GateOptions(settings, outputs, names, own, run, function, shown)


def _marker_arguments(marker: pytest.Mark) -> dict[str, Any]:
    allowed = ", ".join(MARKER_ARGUMENTS)
    if marker.args:
        raise OptionError(
            f"takes keyword arguments only ({allowed}); got positional {marker.args!r}."
        )
    unknown = sorted(set(marker.kwargs) - set(MARKER_ARGUMENTS))
    if unknown:
        raise OptionError(f"got unknown argument(s) {', '.join(unknown)}; allowed: {allowed}.")
    return _normalised(dict(marker.kwargs), "argument")


def _normalised(arguments: dict[str, Any], what: str) -> dict[str, Any]:
    """``metric``/``metrics`` and ``outputs`` as tuples of names (or a metric function)."""
    if "metric" in arguments and "metrics" in arguments:
        raise OptionError(f"give the {what} metric or metrics, not both.")
    for key in ("metric", "metrics", "outputs"):
        if key not in arguments:
            continue
        value = arguments.pop(key)
        if key != "outputs" and callable(value):
            arguments["metrics"] = value
        elif isinstance(value, str):
            arguments["metrics" if key != "outputs" else key] = _flat([value.split(",")])
        elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            arguments["metrics" if key != "outputs" else key] = _flat([v.split(",") for v in value])
        else:
            raise OptionError(f"{key} must be a name or a list of names, got {value!r}.")
    return arguments


def _flat(groups: list[list[str]]) -> tuple[str, ...]:
    return tuple(name.strip() for group in groups for name in group if name.strip())


def _plugin_words(message: str) -> str:
    """``tfcompress gate``'s flags in a message as this plugin's argument names."""
    flags = r"--(max-drop|min-snr|min-cosine|max-abs|min-agreement|metric)\b"
    return re.sub(flags, lambda m: _ARGUMENT_OF_FLAG.get(m.group(1), m.group(1)), message)


def ini_values(config: pytest.Config) -> dict[str, Any]:
    """Option key (``max_drop``, ``metrics``...) -> parsed value of each ``tfc_*`` ini key set.

    Raises:
        pytest.UsageError: A value that does not parse; the message names the ini key.
    """
    values: dict[str, Any] = {}
    for key, (_, ini) in SUITE_OPTIONS.items():
        text = str(config.getini(ini) or "").strip()
        if not text:  # imports stay lazy: most test runs never configure a gate
            continue
        parse = {
            "max_drop": max_drop_argument,
            "metrics": metrics_argument,
            "backend": backend_argument,
        }.get(key)
        try:
            values[key] = (parse or threshold_argument(key))(text, source=f"ini key {ini}")
        except argparse.ArgumentTypeError as error:
            raise pytest.UsageError(str(error)) from error
    return values


def max_drop_argument(text: str, *, source: str = "--tfc-max-drop") -> float:
    """Parse ``--tfc-max-drop`` (argparse ``type=``): a fraction in [0, 1] (0.01 = 1 pt).

    ``source`` names where the value was given, for the message, as in the parsers below.
    """
    from tfcompress.errors import InvalidInputError
    from tfcompress.testing.settings import parse_max_drop

    try:
        return parse_max_drop(text, source=source)
    except InvalidInputError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def backend_argument(text: str, *, source: str = "--tfc-backend") -> str:
    """Parse ``--tfc-backend`` (argparse ``type=``): a registered runtime backend.

    Checked when pytest starts, so a typo is one usage error instead of every gate failing.
    """
    from tfcompress.errors import UnknownNameError
    from tfcompress.runtime.base import BACKENDS

    name = text.strip()
    try:
        BACKENDS.get(name)
    except UnknownNameError as error:  # the registry's message lists them
        raise argparse.ArgumentTypeError(f"{source}: {error}") from None
    return name


def metrics_argument(text: str, *, source: str = "--tfc-metric") -> tuple[str, ...]:
    """Parse ``--tfc-metric`` (argparse ``type=``): a comma list of metric names, canonical."""
    from tfcompress.bench.metrics import get_metric
    from tfcompress.errors import InvalidInputError

    names = _flat([text.split(",")])
    try:
        return tuple(get_metric(name).name for name in names) or _empty(source)
    except InvalidInputError as error:
        raise argparse.ArgumentTypeError(f"{source}: {error}") from error


def _empty(source: str) -> tuple[str, ...]:
    raise argparse.ArgumentTypeError(f"{source} names no metric; give e.g. accuracy or snr.")


def threshold_argument(key: str) -> Callable[..., float]:
    """The argparse ``type=`` of run-wide threshold ``key``, in its IMPLIED metric's unit."""

    def parse(text: str, *, source: str = SUITE_OPTIONS[key][0]) -> float:
        from tfcompress.bench.metrics import get_metric
        from tfcompress.errors import InvalidInputError

        try:
            return get_metric(IMPLIED[key]).check_threshold(text, source=source)
        except InvalidInputError as error:
            raise argparse.ArgumentTypeError(str(error)) from error

    return parse
