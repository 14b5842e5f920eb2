"""pytest plugin (entry point ``pytest11``): the ``accuracy_gate`` fixture, marker and report.

Importing this module imports no TensorFlow and no model code: both load when a gate runs.

Settings resolve per test with the precedence
``call keywords > @pytest.mark.accuracy_gate(...) > --tfc-* options > tfc_* ini keys > defaults``.
Each gate's verdict travels in the test report's ``user_properties`` (so JUnit XML and
pytest-xdist see it); the terminal summary and ``--tfc-gate-report`` JSON are built from there.

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
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tfcompress.testing.result import GateResult
    from tfcompress.testing.settings import GateSettings

logger = logging.getLogger(__name__)

MARKER = "accuracy_gate"
MARKER_ARGUMENTS = (
    "max_drop",
    "metric",
    "mode",
    "backend",
    "confidence",
    "interval",
    "resamples",
    "seed",
)
PROPERTY = "tfc_gate"  # one JSON record per gate call in report.user_properties
_PROPERTY_FIELDS = (
    "passed",
    "reference_accuracy",
    "candidate_accuracy",
    "drop",
    "ci_low",
    "ci_high",
    "max_drop",
    "mode",
    "metric",
    "samples",
    "backend",
)
_CLASSES_IN_REPORT = 10
_RECORDER = "tfcompress-accuracy-gates"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--tfc-*`` options and ``tfc_*`` ini keys."""
    group = parser.getgroup("tfcompress", "tfcompress accuracy-drop gates")
    group.addoption(
        "--tfc-max-drop",
        type=_max_drop_argument,
        default=None,
        metavar="FRACTION",
        help="allowed accuracy drop for gates without max_drop in their marker (0.01 = 1 pt)",
    )
    group.addoption(
        "--tfc-backend",
        default=None,
        metavar="NAME",
        help="runtime for candidate .tflite models (cpu, gpu, edgetpu, ...); default cpu",
    )
    group.addoption(
        "--tfc-gate-report",
        default=None,
        metavar="PATH",
        help="write every gate's verdict to this JSON file (replaced on every run, like "
        "--junitxml)",
    )
    group.addoption(
        "--tfc-require-backend",
        action="store_true",
        default=False,
        help="fail (instead of skip) gates whose backend is unavailable here",
    )
    parser.addini("tfc_max_drop", "default allowed accuracy drop of gates (fraction)", default="")
    parser.addini("tfc_backend", "default runtime backend of gates", default="")


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
            resolve_settings(config, item)


@pytest.fixture
def accuracy_gate(request: pytest.FixtureRequest) -> AccuracyGate:
    """A callable ``accuracy_gate(reference, candidate, data, **overrides) -> GateResult``.

    Configured by ``@pytest.mark.accuracy_gate(...)``, ``--tfc-max-drop``/``--tfc-backend``
    and the ``tfc_max_drop``/``tfc_backend`` ini keys. A failing gate raises
    :class:`~tfcompress.testing.AccuracyGateError`; an unavailable backend skips the test
    (fails it with ``--tfc-require-backend``).
    """
    return AccuracyGate(request)


class AccuracyGate:
    """The ``accuracy_gate`` fixture's value: runs gates and records their verdicts.

    Attributes:
        settings: The resolved settings (marker > command line > ini > defaults).
        sources: Where ``max_drop`` and ``backend`` came from ("marker", "command line"...).
        results: Verdicts of the gates run so far in this test.
    """

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._node = request.node
        self._config = request.config
        self.settings, self.sources = resolve_settings(request.config, request.node)
        self.results: list[GateResult] = []
        self._calls = 0

    def __call__(
        self, reference: Any, candidate: Any, data: Any, *, threads: int = 1, **overrides: Any
    ) -> GateResult:
        """Gate ``candidate`` against ``reference`` on ``data``.

        Args:
            reference: The model the candidate must match (Keras model, ``.tflite``, path).
            candidate: The deployed artifact, run on the resolved backend.
            data: Labelled samples (arrays, ``(x, y)``, ``.npz`` path...).
            threads: CPU threads for LiteRT.
            **overrides: Settings for this call only (``max_drop=``, ``mode=``...).

        Returns:
            The verdict of a passing gate.

        Raises:
            AccuracyGateError: The gate failed; the message shows the table and worst classes.
        """
        __tracebackhide__ = True
        from dataclasses import replace

        from tfcompress.errors import BackendUnavailableError
        from tfcompress.testing.gates import AccuracyGateError, check_accuracy_drop

        unknown = sorted(set(overrides) - set(MARKER_ARGUMENTS))
        if unknown:
            raise TypeError(
                f"accuracy_gate() got unknown keyword(s) {', '.join(unknown)}; allowed: threads, "
                f"{', '.join(MARKER_ARGUMENTS)}."
            )
        settings = replace(self.settings, **overrides) if overrides else self.settings
        index, self._calls = self._calls, self._calls + 1
        try:
            result = check_accuracy_drop(
                reference, candidate, data, settings=settings, threads=threads
            )
        except BackendUnavailableError as error:
            required = self._config.getoption("tfc_require_backend")
            reason = f"backend {settings.backend!r} unavailable: {error}"
            self._record({"index": index, "status": "failed" if required else "skipped"}, reason)
            if required:
                pytest.fail(f"{reason} (--tfc-require-backend is set)", pytrace=False)
            pytest.skip(reason)
        self.results.append(result)
        status = "passed" if result.passed else "failed"
        self._record({"index": index, "status": status, **_summary(result)}, None)
        if not result.passed:
            raise AccuracyGateError(result)
        return result

    def _record(self, record: dict[str, Any], reason: str | None) -> None:
        record.update(sources=self.sources, reason=reason)
        properties = self._node.user_properties
        properties.append((PROPERTY, json.dumps(record, default=str)))
        properties.extend((f"tfc_{k}", record[k]) for k in _PROPERTY_FIELDS if k in record)


def resolve_settings(
    config: pytest.Config, item: pytest.Item
) -> tuple[GateSettings, dict[str, str]]:
    """Settings of ``item``'s gate: marker > command line > ini > defaults.

    Args:
        config: The pytest config (command line and ini values).
        item: The test; its ``accuracy_gate`` markers, closest last, are merged.

    Returns:
        The settings, and where ``max_drop`` and ``backend`` came from ("marker",
        "command line", "ini" or "default").

    Raises:
        pytest.UsageError: A marker with positional or unknown arguments, or bad values;
            the message names the test and the allowed arguments.
    """
    from tfcompress.errors import InvalidInputError
    from tfcompress.testing.settings import GateSettings

    values: dict[str, Any] = {}
    sources = {"max_drop": "default", "backend": "default"}
    for key, value in _ini_values(config).items():
        values[key], sources[key] = value, "ini"
    for key in ("max_drop", "backend"):
        option = config.getoption(f"tfc_{key}")
        if option is not None:
            values[key], sources[key] = option, "command line"
    for marker in reversed(list(item.iter_markers(MARKER))):  # closest marker wins
        values.update(_marker_arguments(marker, item.nodeid))
        sources.update({k: "marker" for k in marker.kwargs if k in sources})
    try:
        return GateSettings(**values), sources
    except InvalidInputError as error:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{MARKER}: {error}") from error


class GateRecorder:
    """Collects gate verdicts from test reports; prints the summary and writes the JSON."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.records: dict[tuple[str, int], dict[str, Any]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Pick up the records a test's gates left in its ``user_properties``."""
        for name, value in report.user_properties:
            if name == PROPERTY:
                record = json.loads(value)
                self.records[(report.nodeid, record["index"])] = {"test": report.nodeid, **record}

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Add the ``tfcompress accuracy gates`` section listing every gate."""
        if not self.records:
            return
        from tfcompress.report.table import format_table

        terminalreporter.section("tfcompress accuracy gates")
        header = [
            "test",
            "reference",
            "candidate",
            "drop",
            "interval",
            "mode",
            "max_drop",
            "result",
        ]
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
        payload = {"version": 1, **counts, "gates": records}
        path = _report_path(self.config)
        # Replaced on every run like pytest's --junitxml (see the module docstring); never a
        # directory or special file, which _report_path refuses.
        write_text_atomic(path, json.dumps(payload, indent=2) + "\n", overwrite=True)
        logger.info("wrote %d gate verdicts to %s", len(records), path)


def _summary(result: GateResult) -> dict[str, Any]:
    data = result.to_dict()
    data["per_class"] = data["per_class"][:_CLASSES_IN_REPORT]  # worst first
    return data


def _summary_row(record: dict[str, Any]) -> list[str]:
    if "drop" not in record:  # the backend was unavailable; the reason follows the table
        return [record["test"], "", "", "", "", "", "", record["status"].upper()]
    return [
        record["test"],
        f"{record['reference_accuracy']:.2%}",
        f"{record['candidate_accuracy']:.2%}",
        f"{record['drop'] * 100:+.2f} pt",
        f"[{record['ci_low'] * 100:+.2f}, {record['ci_high'] * 100:+.2f}]",
        record["mode"],
        f"{record['max_drop'] * 100:.2f} pt",
        record["status"].upper(),
    ]


def _marker_arguments(marker: pytest.Mark, nodeid: str) -> dict[str, Any]:
    allowed = ", ".join(MARKER_ARGUMENTS)
    if marker.args:
        raise pytest.UsageError(
            f"{nodeid}: @pytest.mark.{MARKER} takes keyword arguments only ({allowed}); got "
            f"positional {marker.args!r}."
        )
    unknown = sorted(set(marker.kwargs) - set(MARKER_ARGUMENTS))
    if unknown:
        raise pytest.UsageError(
            f"{nodeid}: @pytest.mark.{MARKER} got unknown argument(s) {', '.join(unknown)}; "
            f"allowed: {allowed}."
        )
    return dict(marker.kwargs)


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
    max_drop = str(config.getini("tfc_max_drop") or "").strip()
    if max_drop:  # imports stay lazy: most test runs never configure a gate
        from tfcompress.errors import InvalidInputError
        from tfcompress.testing.settings import parse_max_drop

        try:
            values["max_drop"] = parse_max_drop(max_drop, source="ini key tfc_max_drop")
        except InvalidInputError as error:
            raise pytest.UsageError(str(error)) from error
    backend = str(config.getini("tfc_backend") or "").strip()
    if backend:
        values["backend"] = backend
    return values


def _max_drop_argument(text: str) -> float:
    from tfcompress.errors import InvalidInputError
    from tfcompress.testing.settings import parse_max_drop

    try:
        return parse_max_drop(text, source="--tfc-max-drop")
    except InvalidInputError as error:
        raise argparse.ArgumentTypeError(str(error)) from error
