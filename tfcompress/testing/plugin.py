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

Option resolution lives in :mod:`tfcompress.testing.plugin_options` and the verdicts'
records, summary and ``--tfc-gate-report`` JSON in :mod:`tfcompress.testing.plugin_report`;
this module holds the pytest hooks and the fixture.

Example:
    >>> @pytest.mark.accuracy_gate(max_drop=0.01, mode="tolerant")  # doctest: +SKIP
    ... def test_int8_model(accuracy_gate):
    ...     accuracy_gate("model.keras", "model_int8.tflite", "test.npz")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from tfcompress.bench.thresholds import thresholds
from tfcompress.testing.plugin_options import (
    MARKER,
    MARKER_ARGUMENTS,
    GateOptions,
    OptionError,
    backend_argument,
    ini_values,
    max_drop_argument,
    metrics_argument,
    resolve_options,
    threshold_argument,
    with_run_defaults,
)
from tfcompress.testing.plugin_report import (
    GateRecorder,
    gate_records,
    report_clash,
    report_path,
    user_properties,
)

if TYPE_CHECKING:
    from tfcompress.testing.report import GateReport

__all__ = [
    "AccuracyGate",
    "accuracy_gate",
    "pytest_addoption",
    "pytest_collection_modifyitems",
    "pytest_configure",
]

_RECORDER = "tfcompress-accuracy-gates"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--tfc-*`` options and ``tfc_*`` ini keys."""
    from tfcompress.bench.metrics import metric_names  # numpy: only once pytest asks

    group = parser.getgroup("tfcompress", "tfcompress accuracy and fidelity gates")
    group.addoption(
        "--tfc-max-drop",
        type=max_drop_argument,
        default=None,
        metavar="FRACTION",
        help="allowed drop of accuracy-like metrics for gates without max_drop of their own "
        "(0.01 = 1 pt)",
    )
    group.addoption(
        "--tfc-backend",
        type=backend_argument,  # a typo is one usage error, not every gate failing
        default=None,
        metavar="NAME",
        help="runtime for candidate .tflite models (cpu, gpu, edgetpu, ...); default cpu",
    )
    group.addoption(
        "--tfc-metric",
        action="append",
        type=metrics_argument,
        default=None,
        metavar="NAMES",
        help=f"metrics of gates that name none (comma list or repeated: "
        f"{', '.join(metric_names())}); default: chosen per output",
    )
    for row in thresholds():  # the fidelity thresholds a whole run may set
        if not row.suite_default or row.metric is None:
            continue  # max_drop has its own option above
        group.addoption(
            row.plugin_flag,
            type=threshold_argument(row.name),
            default=None,
            metavar="X",
            help=f"{row.help} wherever {row.metric} is judged without a threshold of its own",
        )
        parser.addini(row.ini_key, f"default {row.meaning} of gates", default="")
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


def pytest_configure(config: pytest.Config) -> None:
    """Declare the marker, check ini values and start collecting verdicts."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}({', '.join(f'{name}=...' for name in MARKER_ARGUMENTS)}): configure the "
        "accuracy_gate fixture of this test (tfcompress)",
    )
    ini_values(config)  # a bad ini value is a usage error before any test runs
    if config.getoption("tfc_gate_report"):
        report_path(config)
    config.pluginmanager.register(GateRecorder(config), _RECORDER)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Reject bad ``accuracy_gate`` marker arguments before any test runs."""
    for item in items:
        if item.get_closest_marker(MARKER) is not None:
            try:
                resolve_options(config, item)
            except OptionError as error:
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
        except OptionError as error:  # markers are checked at collection: a safety net
            raise pytest.UsageError(f"{request.node.nodeid}: {MARKER}: {error}") from None
        self.settings = self.options.settings
        self.sources = dict(self.options.sources)
        self.results: list[GateReport] = []
        self._calls = 0

    def __call__(
        self, reference: Any, candidate: Any, data: Any, *, threads: int = 1, **overrides: Any
    ) -> GateReport:
        """Gate ``candidate`` against ``reference`` on ``data``, every output.

        As :func:`~tfcompress.testing.output_gates.check_gate` takes them (labels are
        optional: outputs without them are judged by fidelity to the reference), the
        candidate on the resolved backend; ``overrides`` are marker arguments for this call
        only (``metrics=``, ``min_snr=``, ``mode=``...). Returns the report of a passing gate.

        Raises:
            GateError: A verdict failed; the message is the report's explanation
                (an ``AccuracyGateError`` for a metric function's single-output gate).
            InvalidInputError: Bad overrides, or options that fit no output.
            TypeError: An unknown keyword.
        """
        __tracebackhide__ = True
        from tfcompress.errors import BackendUnavailableError, InvalidInputError
        from tfcompress.testing.gates import AccuracyGateError, check_accuracy_drop
        from tfcompress.testing.output_gates import GateError, check_gate

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
            except OptionError as error:
                raise InvalidInputError(f"accuracy_gate(): {error}") from None
        index, self._calls = self._calls, self._calls + 1
        inputs = {"reference": reference, "candidate": candidate, "data": data}
        clash = report_clash(self._config, inputs)
        if clash is not None:  # the JSON report would replace this file at the session's end
            self._record({"index": index, "status": "failed", "clash": True}, options, clash)
            pytest.fail(clash, pytrace=False)
        try:
            if options.metric_function is not None:
                outcome = check_accuracy_drop(
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
                outcome = with_run_defaults(report, options)
        except BackendUnavailableError as error:
            required = self._config.getoption("tfc_require_backend")
            reason = f"backend {options.settings.backend!r} unavailable: {error}"
            status = "failed" if required else "skipped"
            self._record({"index": index, "status": status}, options, reason)
            if required:
                pytest.fail(f"{reason} (--tfc-require-backend is set)", pytrace=False)
            pytest.skip(reason)
        self.results.append(outcome)
        for record in gate_records(outcome, index):
            self._record(record, options, None)
        if not outcome.passed:
            function = options.metric_function is not None
            raise AccuracyGateError(outcome) if function else GateError(outcome)
        return outcome

    def _record(self, record: dict[str, Any], options: GateOptions, reason: str | None) -> None:
        record.update(sources=dict(options.sources), reason=reason)
        self._node.user_properties.extend(user_properties(record))
