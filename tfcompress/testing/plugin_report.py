"""Record the ``accuracy_gate`` verdicts of a test run: JUnit properties, terminal summary, JSON.

The one job of this module is the gate plugin's output. Each verdict becomes a JSON-ready
record (:func:`gate_records`) that travels in the test report's ``user_properties``
(:func:`user_properties`, so JUnit XML and pytest-xdist see it); :class:`GateRecorder`
collects them from the reports, prints the ``tfcompress accuracy gates`` section and writes
``--tfc-gate-report`` atomically at the end (:func:`report_path` checks that path when the
session starts). Importing it imports no TensorFlow.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tfcompress.testing.report import GateReport

logger = logging.getLogger(__name__)

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
_REPORT_VERSION = 2  # 2: one record per (gate call, output, metric)


def gate_records(outcome: GateReport, index: int) -> list[dict[str, Any]]:
    """One JSON-ready record per verdict of gate call ``index`` (from 0) of a test.

    These are the ``--tfc-gate-report`` rows, with the version-1 names
    (``reference_accuracy``, ``max_drop``...) alongside where they apply.
    """
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


def user_properties(record: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The ``user_properties`` entries of one record: all of it as JSON, then its main fields.

    ``(PROPERTY, json)`` comes first, which :class:`GateRecorder` reads back, then one
    ``tfc_<field>`` entry per field a JUnit reader may want on its own.
    """
    properties: list[tuple[str, Any]] = [(PROPERTY, json.dumps(record, default=str))]
    properties.extend((f"tfc_{k}", record[k]) for k in _PROPERTY_FIELDS if k in record)
    return properties


def report_path(config: pytest.Config) -> Path:
    """The checked ``--tfc-gate-report`` path (set), relative to where pytest was invoked.

    Unlike tfcompress's other outputs (which need ``--force``), an existing file is replaced:
    it is the session's record, named on the pytest command line, and every CI run rewrites
    it in place like ``--junitxml``. It is written atomically at the end, so a crashed
    session leaves the previous report whole.

    Raises:
        pytest.UsageError: The path is a directory or special file, or its folder is
            missing or read-only.
    """
    from tfcompress._files import check_output_path
    from tfcompress.errors import InvalidInputError

    path = Path(config.invocation_params.dir, config.getoption("tfc_gate_report"))
    try:
        return check_output_path(path, overwrite=True)
    except InvalidInputError as error:  # exists as a folder or special file, or unwritable
        raise pytest.UsageError(f"--tfc-gate-report: {error}") from error


def report_clash(config: pytest.Config, inputs: Mapping[str, Any]) -> str | None:
    """Why ``--tfc-gate-report`` must not be written, if it names one of a gate's inputs.

    The report replaces its path at the session's end; a path that is the gate's model,
    candidate or data file (the same file by device and inode, or by resolved path), or a
    file inside a SavedModel or image folder the gate reads, would be lost. ``inputs`` are
    the gate's arguments by role (only paths are compared). The answer is one line naming the
    option, the path and the input it would replace; None when there is no clash.
    """
    target = config.getoption("tfc_gate_report")
    if not target:
        return None
    report = Path(config.invocation_params.dir, target)
    for role, value in inputs.items():
        if isinstance(value, str | os.PathLike) and _holds(Path(value), report):
            return (
                f"--tfc-gate-report {str(target)[:200]} is this gate's {role} "
                f"({str(value)[:200]}): the JSON report would replace it; choose another "
                "--tfc-gate-report path."
            )
    return None


def _holds(source: Path, report: Path) -> bool:
    """Whether writing ``report`` would replace ``source`` or a file under it."""
    with contextlib.suppress(OSError, ValueError):
        if os.path.samefile(source, report):
            return True
    try:
        where, target = source.resolve(), report.resolve()
    except (OSError, RuntimeError):  # a link loop is nothing a gate reads
        return False
    return where == target or (where.is_dir() and target.is_relative_to(where))


class GateRecorder:
    """Collects gate verdicts from test reports; prints the summary and writes the JSON.

    ``records`` holds one record per (test, gate call, output, metric), in the order seen.
    """

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
        from tfcompress._files import write_text_atomic

        records = list(self.records.values())
        clashes = [r for r in records if r.get("clash")]
        if clashes:  # an input of a gate: never replaced, whatever the other gates did
            reason = f"{clashes[0]['reason']} The report was not written."
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(f"ERROR: {reason}", red=True)
            logger.error("%s", reason)
            return
        counts = {
            s: sum(r["status"] == s for r in records) for s in ("passed", "failed", "skipped")
        }
        payload = {"version": _REPORT_VERSION, **counts, "gates": records}
        path = report_path(self.config)
        # Replaced on every run (see report_path); never a directory or special file.
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
