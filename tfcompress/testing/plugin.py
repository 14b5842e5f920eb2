"""pytest plugin (entry point ``pytest11``): the ``accuracy_gate`` fixture, marker and report.

The fixture runs :func:`~tfcompress.testing.output_gates.check_gate`: one verdict per
(output, metric), task metrics against labels and fidelity to the reference without them,
so multi-output models and unlabelled data gate like classifiers. Importing this module
imports no TensorFlow and no model code: both load when a gate runs.

Options resolve per test with the precedence
``call keywords > @pytest.mark.accuracy_gate(...) > --tfc-* options > tfc_* ini keys > defaults``.
Thresholds a test sets (marker or call) mean what ``tfcompress gate``'s flags mean: a
fidelity threshold asks for its metric, and one that fits no metric is an error. Thresholds
set for the whole run (``--tfc-min-snr``, ``tfc_min_snr``...) are defaults instead: they
apply wherever that metric is judged and never add a metric.

Each verdict travels in the test report's ``user_properties`` (so JUnit XML and pytest-xdist
see it); the terminal summary and ``--tfc-gate-report`` JSON are built from there.

``--tfc-gate-report PATH`` replaces an existing file at PATH, unlike tfcompress's other
outputs (which need ``--force``): it is this test session's record, named on the pytest
command line, and follows pytest's own reports (``--junitxml``, ``--report-log``), which
every CI run rewrites in place. It is checked when the session starts (a directory, special
file, or missing or read-only folder there is a usage error) and written atomically at the
end, so a crashed session leaves the previous report whole.

Example:
    >>> @pytest.mark.accuracy_gate(max_drop=0.01, mode="tolerant")  # doctest: +SKIP
    ... def test_int8_model(accuracy_gate):
    ...     accuracy_gate("model.keras", "model_int8.tflite", "test.npz")
"""

from __future__ import annotations

import argparse
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tfcompress.testing.result import GateReport, GateResult
    from tfcompress.testing.settings import GateSettings

logger = logging.getLogger(__name__)

MARKER = "accuracy_gate"
THRESHOLDS = ("max_drop", "min_snr", "min_cosine", "max_abs", "min_agreement")
_SETTINGS_KEYS = ("mode", "backend", "confidence", "interval", "resamples", "seed")
MARKER_ARGUMENTS = ("outputs", "metrics", "metric", *THRESHOLDS, *_SETTINGS_KEYS)
# Options set for the whole run: key -> (command-line option, ini key). Thresholds here are
# defaults (see the module docstring); max_drop is the default of fraction task metrics.
SUITE_OPTIONS = {
    "max_drop": ("--tfc-max-drop", "tfc_max_drop"),
    "backend": ("--tfc-backend", "tfc_backend"),
    "metrics": ("--tfc-metric", "tfc_metric"),
    "min_snr": ("--tfc-min-snr", "tfc_min_snr"),
    "min_cosine": ("--tfc-min-cosine", "tfc_min_cosine"),
    "min_agreement": ("--tfc-min-agreement", "tfc_min_agreement"),
}
_IMPLIED = {
    "min_snr": "snr",
    "min_cosine": "cosine",
    "max_abs": "max_abs",
    "min_agreement": "agreement",
}
PROPERTY = "tfc_gate"  # one JSON record per verdict in report.user_properties
_PROPERTY_FIELDS = (
    "passed",
    "output",
    "metric",
    "reference_score",
    "candidate_score",
    "reference_accuracy",
    "candidate_accuracy",
    "value",
    "drop",
    "ci_low",
    "ci_high",
    "threshold_name",
    "threshold",
    "max_drop",
    "mode",
    "samples",
    "backend",
)
_ARGUMENT_OF_FLAG = {"metric": "metrics", **{k.replace("_", "-"): k for k in THRESHOLDS}}
_CLASSES_IN_REPORT = 10  # as Verdict.to_dict keeps
_REPORT_VERSION = 2  # 2: one record per (gate call, output, metric)
_RECORDER = "tfcompress-accuracy-gates"
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


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--tfc-*`` options and ``tfc_*`` ini keys."""
    group = parser.getgroup("tfcompress", "tfcompress accuracy and fidelity gates")
    group.addoption(
        "--tfc-max-drop",
        type=_max_drop_argument,
        default=None,
        metavar="FRACTION",
        help="allowed drop of accuracy-like metrics for gates without max_drop of their own "
        "(0.01 = 1 pt)",
    )
    group.addoption(
        "--tfc-backend",
        default=None,
        metavar="NAME",
        help="runtime for candidate .tflite models (cpu, gpu, edgetpu, ...); default cpu",
    )
    group.addoption(
        "--tfc-metric",
        action="append",
        type=_metrics_argument,
        default=None,
        metavar="NAMES",
        help="metrics of gates that name none (comma list or repeated: accuracy, topK, "
        "binary_accuracy, mse, mae, rmse, miou, snr, cosine, max_abs, agreement); default: "
        "chosen per output",
    )
    for key, what in (
        ("min_snr", "smallest SNR in dB (default 20)"),
        ("min_cosine", "smallest cosine similarity (default 0.99)"),
        ("min_agreement", "smallest top-1 agreement (default 0.99)"),
    ):
        group.addoption(
            SUITE_OPTIONS[key][0],
            type=_threshold_argument(key),
            default=None,
            metavar="X",
            help=f"{what} wherever {_IMPLIED[key]} is judged without a threshold of its own",
        )
    group.addoption(
        "--tfc-gate-report",
        default=None,
        metavar="PATH",
        help="write every gate's verdicts to this JSON file (replaced on every run, like "
        "--junitxml)",
    )
    group.addoption(
        "--tfc-require-backend",
        action="store_true",
        default=False,
        help="fail (instead of skip) gates whose backend is unavailable here",
    )
    parser.addini("tfc_max_drop", "default allowed drop of accuracy-like metrics", default="")
    parser.addini("tfc_backend", "default runtime backend of gates", default="")
    parser.addini("tfc_metric", "default metrics of gates (comma list)", default="")
    parser.addini("tfc_min_snr", "default smallest SNR of gates, dB", default="")
    parser.addini("tfc_min_cosine", "default smallest cosine similarity of gates", default="")
    parser.addini("tfc_min_agreement", "default smallest top-1 agreement of gates", default="")


def pytest_configure(config: pytest.Config) -> None:
    """Declare the marker, check ini values and start collecting verdicts."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}({', '.join(f'{name}=...' for name in MARKER_ARGUMENTS)}): configure the "
        "accuracy_gate fixture of this test (tfcompress)",
    )
    _ini_values(config)  # a bad ini value is a usage error before any test runs
    if config.getoption("tfc_gate_report"):
        _report_path(config)
    config.pluginmanager.register(GateRecorder(config), _RECORDER)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Reject bad ``accuracy_gate`` marker arguments before any test runs."""
    for item in items:
        if item.get_closest_marker(MARKER) is not None:
            try:
                resolve_options(config, item)
            except _OptionError as error:
                raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{MARKER}: {error}") from None


@pytest.fixture
def accuracy_gate(request: pytest.FixtureRequest) -> AccuracyGate:
    """A callable ``accuracy_gate(reference, candidate, data, **overrides) -> GateReport``.

    Configured by ``@pytest.mark.accuracy_gate(...)``, the ``--tfc-*`` options and the
    ``tfc_*`` ini keys. A failing gate raises :class:`~tfcompress.testing.GateError` with
    the report's explanation; an unavailable backend skips the test (fails it with
    ``--tfc-require-backend``).

    Example:
        >>> def test_detector(accuracy_gate):  # doctest: +SKIP
        ...     report = accuracy_gate("det.keras", "det_int8.tflite", "frames.npz", min_snr=25)
    """
    return AccuracyGate(request)


class AccuracyGate:
    """The ``accuracy_gate`` fixture's value: runs gates and records their verdicts.

    Attributes:
        options: The resolved options (marker > command line > ini > defaults).
        settings: ``options.settings`` (mode, backend, interval...; ``max_drop`` is the
            allowed drop of accuracy-like metrics).
        sources: Where each option came from ("marker", "command line"...).
        results: What the gates run so far in this test returned.

    Example:
        >>> report = accuracy_gate("model.keras", "int8.tflite", "test.npz")  # doctest: +SKIP
        >>> [(v.output, v.metric, v.passed) for v in report.verdicts]  # doctest: +SKIP
        [('dense_1', 'accuracy', True)]
    """

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._node = request.node
        self._config = request.config
        try:
            self.options = resolve_options(request.config, request.node)
        except _OptionError as error:  # markers are checked at collection: a safety net
            raise pytest.UsageError(f"{request.node.nodeid}: {MARKER}: {error}") from None
        self.settings = self.options.settings
        self.sources = dict(self.options.sources)
        self.results: list[GateReport | GateResult] = []
        self._calls = 0

    def __call__(
        self, reference: Any, candidate: Any, data: Any, *, threads: int = 1, **overrides: Any
    ) -> GateReport | GateResult:
        """Gate ``candidate`` against ``reference`` on ``data``, every output.

        Args:
            reference: The model the candidate must match (Keras model, ``.tflite``, path).
            candidate: The deployed artifact, run on the resolved backend.
            data: Samples (arrays, ``(x, y)``, a dict or ``.npz`` with one array per input);
                labels (``y`` or ``y_<output>``) are optional: outputs without them are
                judged by fidelity to the reference.
            threads: CPU threads for LiteRT.
            **overrides: Marker arguments for this call only (``metrics=``, ``min_snr=``,
                ``mode=``...).

        Returns:
            The report of a passing gate (a ``GateResult`` for a legacy metric function).

        Raises:
            GateError: A verdict failed; the message is the report's explanation
                (``AccuracyGateError`` for a legacy metric function).
            InvalidInputError: Bad overrides, or options that fit no output.
            TypeError: An unknown keyword.
        """
        __tracebackhide__ = True
        from tfcompress.errors import BackendUnavailableError, InvalidInputError
        from tfcompress.testing.gates import AccuracyGateError, check_accuracy_drop
        from tfcompress.testing.output_gates import GateError, check_gate
        from tfcompress.testing.result import GateReport

        unknown = sorted(set(overrides) - set(MARKER_ARGUMENTS))
        if unknown:
            raise TypeError(
                f"accuracy_gate() got unknown keyword(s) {', '.join(unknown)}; allowed: threads, "
                f"{', '.join(MARKER_ARGUMENTS)}."
            )
        options = self.options
        if overrides:
            try:
                options = resolve_options(self._config, self._node, overrides)
            except _OptionError as error:
                raise InvalidInputError(f"accuracy_gate(): {error}") from None
        index, self._calls = self._calls, self._calls + 1
        try:
            if options.metric_function is not None:
                outcome: GateReport | GateResult = check_accuracy_drop(
                    reference, candidate, data, settings=options.settings, threads=threads
                )
            else:
                report = check_gate(
                    reference,
                    candidate,
                    data,
                    outputs=options.outputs or None,
                    metrics=options.metrics or None,
                    settings=options.settings,
                    threads=threads,
                    **options.thresholds,
                )
                outcome = _with_run_defaults(report, options)
        except BackendUnavailableError as error:
            required = self._config.getoption("tfc_require_backend")
            reason = f"backend {options.settings.backend!r} unavailable: {error}"
            status = "failed" if required else "skipped"
            self._record({"index": index, "status": status}, options, reason)
            if required:
                pytest.fail(f"{reason} (--tfc-require-backend is set)", pytrace=False)
            pytest.skip(reason)
        self.results.append(outcome)
        for record in _records(outcome, index):
            self._record(record, options, None)
        if not outcome.passed:
            if isinstance(outcome, GateReport):
                raise GateError(outcome)
            raise AccuracyGateError(outcome)  # a legacy metric function's GateResult
        return outcome

    def _record(self, record: dict[str, Any], options: GateOptions, reason: str | None) -> None:
        record.update(sources=dict(options.sources), reason=reason)
        properties = self._node.user_properties
        properties.append((PROPERTY, json.dumps(record, default=str)))
        properties.extend((f"tfc_{k}", record[k]) for k in _PROPERTY_FIELDS if k in record)


class _OptionError(Exception):
    """A bad gate option; the caller turns it into a usage error or an InvalidInputError."""


def resolve_options(
    config: pytest.Config, item: pytest.Item, overrides: Mapping[str, Any] | None = None
) -> GateOptions:
    """Options of ``item``'s gate: call keywords > marker > command line > ini > defaults.

    Args:
        config: The pytest config (command line and ini values).
        item: The test; its ``accuracy_gate`` markers, closest last, are merged.
        overrides: Keywords of one gate call, which win over everything.

    Returns:
        The validated options.

    Raises:
        _OptionError: A marker with positional or unknown arguments, a bad value, or options
            that contradict each other (``min_snr`` with only ``metrics=["accuracy"]``).

    Example:
        >>> resolve_options(item.config, item).settings.mode  # doctest: +SKIP
        'strict'
    """
    from tfcompress.errors import InvalidInputError

    layers: list[tuple[str, dict[str, Any]]] = [("ini", _ini_values(config))]
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
        raise _OptionError(_plugin_words(str(error))) from error


def resolve_settings(
    config: pytest.Config, item: pytest.Item
) -> tuple[GateSettings, dict[str, str]]:
    """The :class:`GateSettings` of ``item``'s gate and where each option came from.

    Kept for callers of the single-output plugin; :func:`resolve_options` has everything.

    Raises:
        pytest.UsageError: Bad marker arguments or values; the message names the test.

    Example:
        >>> settings, sources = resolve_settings(item.config, item)  # doctest: +SKIP
        >>> sources["max_drop"]  # doctest: +SKIP
        'marker'
    """
    try:
        options = resolve_options(config, item)
    except _OptionError as error:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{MARKER}: {error}") from None
    return options.settings, dict(options.sources)


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
            own[key] = get_metric(_IMPLIED[key]).check_threshold(value, source=key)
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


def _with_run_defaults(report: GateReport, options: GateOptions) -> GateReport:
    """``report`` re-judged with the run's default thresholds where the test set none."""
    verdicts = []
    for verdict in report.verdicts:
        name = verdict.threshold_name
        if name in options.defaults and name not in options.thresholds:
            verdict = replace(verdict, threshold=float(options.defaults[name]))
            verdict = replace(verdict, passed=verdict.meets_threshold())
        verdicts.append(verdict)
    return replace(report, verdicts=tuple(verdicts))


def _records(outcome: GateReport | GateResult, index: int) -> list[dict[str, Any]]:
    """One JSON-ready record per verdict of one gate call (the ``--tfc-gate-report`` rows)."""
    from tfcompress.testing.result import GateReport

    status = "passed" if outcome.passed else "failed"
    if not isinstance(outcome, GateReport):  # a legacy metric function: one verdict
        data = outcome.to_dict()
        return [
            {
                "index": index,
                "status": status,
                "passed": outcome.passed,
                "output": None,
                "metric": data["metric"],
                "kind": "task",
                "reference_score": data["reference_accuracy"],
                "candidate_score": data["candidate_accuracy"],
                "value": data["drop"],
                "threshold_name": "max_drop",
                "threshold": data["max_drop"],
                **{k: v for k, v in data.items() if k not in ("passed", "metric")},
                "per_class": data["per_class"][:_CLASSES_IN_REPORT],  # worst first
                "gate_passed": outcome.passed,
            }
        ]
    records = []
    for verdict in outcome.verdicts:
        data = verdict.to_dict()
        record = {"index": index, "status": "passed" if verdict.passed else "failed"}
        for key, value in data.items():
            record[key] = value
            if key == "candidate_score" and verdict.kind == "task":  # the names of version 1
                record["reference_accuracy"] = data["reference_score"]
                record["candidate_accuracy"] = data["candidate_score"]
            if key == "threshold" and verdict.threshold_name == "max_drop":
                record["max_drop"] = value
        record["gate_passed"] = outcome.passed
        for key in ("reference", "candidate", "reference_backend", "backend"):
            record[key] = getattr(outcome, key)
        records.append(record)
    return records


class GateRecorder:
    """Collects gate verdicts from test reports; prints the summary and writes the JSON."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.records: dict[tuple[Any, ...], dict[str, Any]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Pick up the records a test's gates left in its ``user_properties``."""
        for name, value in report.user_properties:
            if name == PROPERTY:
                record = json.loads(value)
                key = (report.nodeid, record["index"], record.get("output"), record.get("metric"))
                self.records[key] = {"test": report.nodeid, **record}

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Add the ``tfcompress accuracy gates`` section: one row per verdict."""
        if not self.records:
            return
        from tfcompress.report.table import format_table

        terminalreporter.section("tfcompress accuracy gates")
        header = ["test", "output", "metric", "reference", "candidate", "drop / value"]
        header += ["interval", "mode", "threshold", "result"]
        records = list(self.records.values())
        for line in format_table(header, [_summary_row(r) for r in records]).splitlines():
            terminalreporter.write_line(line)
        for record in records:
            if record.get("reason"):
                terminalreporter.write_line(f"{record['test']}: {record['reason']}")

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Write ``--tfc-gate-report`` atomically (on the xdist controller only)."""
        target = self.config.getoption("tfc_gate_report")
        if not target or hasattr(self.config, "workerinput"):
            return
        from tfcompress.models.saving import write_text_atomic

        records = list(self.records.values())
        counts = {
            s: sum(r["status"] == s for r in records) for s in ("passed", "failed", "skipped")
        }
        payload = {"version": _REPORT_VERSION, **counts, "gates": records}
        path = _report_path(self.config)
        # Replaced on every run like pytest's --junitxml (see the module docstring); never a
        # directory or special file, which _report_path refuses.
        write_text_atomic(path, json.dumps(payload, indent=2) + "\n", overwrite=True)
        logger.info("wrote %d gate verdicts to %s", len(records), path)


def _summary_row(record: dict[str, Any]) -> list[str]:
    if "value" not in record:  # the backend was unavailable; the reason follows the table
        return [record["test"], *[""] * 8, record["status"].upper()]
    value, change, threshold = _formatters(record)
    task = record.get("kind") == "task"
    low, high = _number(record, "ci_low"), _number(record, "ci_high")
    shown = change if task else value
    interval = "none" if low is None or high is None else f"[{shown(low)}, {shown(high)}]"
    interval = re.sub(r"( pt| dB|%)(?=[],])", "", interval)  # units are in the other columns
    return [
        record["test"],
        record.get("output") or "",
        record["metric"],
        value(_number(record, "reference_score")) if task else "",
        value(_number(record, "candidate_score")) if task else "",
        shown(_number(record, "value")),
        interval,
        record["mode"],
        f"{record['threshold_name']} {threshold(record['threshold'])}",
        record["status"].upper(),
    ]


def _formatters(record: dict[str, Any]) -> tuple[Callable[[Any], str], ...]:
    """How the verdict's metric shows a value, a change and a threshold."""
    from tfcompress.bench.metrics import get_metric
    from tfcompress.errors import InvalidInputError

    try:
        definition = get_metric(record["metric"])
    except InvalidInputError:  # a legacy metric function's name
        return (_plain("{:.4g}"), _plain("{:+.4g}"), _plain("{:g}"))
    return definition.format_value, definition.format_change, definition.format_threshold


def _plain(pattern: str) -> Callable[[Any], str]:
    return lambda value: "" if value is None else pattern.format(value)


def _number(record: dict[str, Any], key: str) -> float | None:
    """A number of a record; JSON null with a ``non_finite`` note is +-inf or nan again."""
    value = record.get(key)
    if value is None and key in (record.get("non_finite") or {}):
        return float(record["non_finite"][key])
    return value


def _marker_arguments(marker: pytest.Mark) -> dict[str, Any]:
    allowed = ", ".join(MARKER_ARGUMENTS)
    if marker.args:
        raise _OptionError(
            f"takes keyword arguments only ({allowed}); got positional {marker.args!r}."
        )
    unknown = sorted(set(marker.kwargs) - set(MARKER_ARGUMENTS))
    if unknown:
        raise _OptionError(f"got unknown argument(s) {', '.join(unknown)}; allowed: {allowed}.")
    return _normalised(dict(marker.kwargs), "argument")


def _normalised(arguments: dict[str, Any], what: str) -> dict[str, Any]:
    """``metric``/``metrics`` and ``outputs`` as tuples of names (or a metric function)."""
    if "metric" in arguments and "metrics" in arguments:
        raise _OptionError(f"give the {what} metric or metrics, not both.")
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
            raise _OptionError(f"{key} must be a name or a list of names, got {value!r}.")
    return arguments


def _flat(groups: list[list[str]]) -> tuple[str, ...]:
    return tuple(name.strip() for group in groups for name in group if name.strip())


def _plugin_words(message: str) -> str:
    """``tfcompress gate``'s flags in a message as this plugin's argument names."""
    flags = r"--(max-drop|min-snr|min-cosine|max-abs|min-agreement|metric)\b"
    return re.sub(flags, lambda m: _ARGUMENT_OF_FLAG.get(m.group(1), m.group(1)), message)


def _report_path(config: pytest.Config) -> Path:
    from tfcompress.errors import InvalidInputError
    from tfcompress.models.saving import check_output_path

    path = Path(config.invocation_params.dir, config.getoption("tfc_gate_report"))
    try:
        return check_output_path(path, overwrite=True)
    except InvalidInputError as error:  # exists as a folder or special file, or unwritable
        raise pytest.UsageError(f"--tfc-gate-report: {error}") from error


def _ini_values(config: pytest.Config) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, (_, ini) in SUITE_OPTIONS.items():
        text = str(config.getini(ini) or "").strip()
        if not text:  # imports stay lazy: most test runs never configure a gate
            continue
        if key == "backend":
            values[key] = text
            continue
        parse = {"max_drop": _max_drop_argument, "metrics": _metrics_argument}.get(key)
        try:
            values[key] = (parse or _threshold_argument(key))(text, source=f"ini key {ini}")
        except argparse.ArgumentTypeError as error:
            raise pytest.UsageError(str(error)) from error
    return values


def _max_drop_argument(text: str, *, source: str = "--tfc-max-drop") -> float:
    from tfcompress.errors import InvalidInputError
    from tfcompress.testing.settings import parse_max_drop

    try:
        return parse_max_drop(text, source=source)
    except InvalidInputError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def _metrics_argument(text: str, *, source: str = "--tfc-metric") -> tuple[str, ...]:
    from tfcompress.bench.metrics import get_metric
    from tfcompress.errors import InvalidInputError

    names = _flat([text.split(",")])
    try:
        return tuple(get_metric(name).name for name in names) or _empty(source)
    except InvalidInputError as error:
        raise argparse.ArgumentTypeError(f"{source}: {error}") from error


def _empty(source: str) -> tuple[str, ...]:
    raise argparse.ArgumentTypeError(f"{source} names no metric; give e.g. accuracy or snr.")


def _threshold_argument(key: str) -> Callable[..., float]:
    def parse(text: str, *, source: str = SUITE_OPTIONS[key][0]) -> float:
        from tfcompress.bench.metrics import get_metric
        from tfcompress.errors import InvalidInputError

        try:
            return get_metric(_IMPLIED[key]).check_threshold(text, source=source)
        except InvalidInputError as error:
            raise argparse.ArgumentTypeError(str(error)) from error

    return parse
