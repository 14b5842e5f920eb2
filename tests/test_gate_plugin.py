"""The pytest plugin, driven through pytester: verdicts, precedence, reports, skips, errors."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _gate_models import gate_models

from tfcompress.errors import BackendUnavailableError
from tfcompress.runtime import base as runtime_base
from tfcompress.runtime.base import Runner
from tfcompress.testing import check_accuracy_drop  # loaded here, not inside inner runs

pytest_plugins = ["pytester"]

MISSING = "tfc-test-missing"

GATE_TESTS = """
import pytest

REF, INT8, DAMAGED, DATA = {reference!r}, {int8!r}, {damaged!r}, {test!r}


@pytest.mark.accuracy_gate(max_drop=0.02)
def test_int8_within_budget(accuracy_gate):
    result = accuracy_gate(REF, INT8, DATA)
    assert result.passed and result.samples == 450
    assert accuracy_gate(REF, INT8, DATA, mode="proven").settings.mode == "proven"


@pytest.mark.accuracy_gate(max_drop=0.05, mode="tolerant")
def test_damaged_model(accuracy_gate):
    accuracy_gate(REF, DAMAGED, DATA)


@pytest.mark.accuracy_gate(backend="{missing}")
def test_on_missing_accelerator(accuracy_gate):
    accuracy_gate(REF, INT8, DATA)
"""

SETTINGS_TESTS = """
import pytest


def show(request, gate):
    print(
        f"SETTINGS {{request.node.name}} max_drop={{gate.settings.max_drop}} "
        f"from={{gate.sources['max_drop']}} backend={{gate.settings.backend}} "
        f"from={{gate.sources['backend']}} mode={{gate.settings.mode}}"
    )


@pytest.mark.accuracy_gate(max_drop=0.5, backend="marker-backend")
def test_marker(request, accuracy_gate):
    show(request, accuracy_gate)


def test_plain(request, accuracy_gate):
    show(request, accuracy_gate)


@pytest.mark.accuracy_gate(mode="tolerant", max_drop=0.4)
class TestClass:
    @pytest.mark.accuracy_gate(max_drop=0.25)
    def test_method(self, request, accuracy_gate):
        show(request, accuracy_gate)
"""


class _MissingRunner(Runner):
    """A backend whose hardware is never present (like an Edge TPU on this machine)."""

    backend = MISSING

    def __init__(self, model: Any, **_: Any) -> None:
        raise BackendUnavailableError(f"no {MISSING} accelerator found; plug one in")

    def predict_batch(self, feed: dict) -> dict:  # pragma: no cover - never loads
        raise NotImplementedError


@pytest.fixture(scope="module")
def gate_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return gate_models(tmp_path_factory)


@pytest.fixture
def missing_backend(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(runtime_base._REGISTRY, MISSING, _MissingRunner)
    return MISSING


@pytest.fixture
def gate_suite(
    pytester: pytest.Pytester, gate_files: dict[str, Path], missing_backend: str
) -> None:
    paths = {name: str(path) for name, path in gate_files.items()}
    pytester.makepyfile(test_gates=GATE_TESTS.format(missing=missing_backend, **paths))


def test_gates_pass_fail_skip_and_report(pytester: pytest.Pytester, gate_suite: None) -> None:
    result = pytester.runpytest(
        "-rs", "--junitxml=junit.xml", "--tfc-gate-report=gates.json", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    output = result.stdout.str()

    # the failure message a person can act on
    assert "accuracy gate FAILED (tolerant)" in output
    assert re.search(r"candidate\s+damaged\.tflite\s+cpu\s+\d+\.\d\d%\s+\+\d+\.\d\d pt", output)
    assert "450 samples" in output and "per-class change, worst 5 of 10" in output
    assert "AccuracyGateError" in output
    # the unavailable backend is a skip with its reason
    assert f"backend '{MISSING}' unavailable: no {MISSING} accelerator found" in output

    # the summary lists every gate: 2 in the first test, 1 failed, 1 skipped
    summary = output[output.index("tfcompress accuracy gates") :]
    rows = [line for line in summary.splitlines() if re.match(r"test_gates\.py::\w+ ", line)]
    assert len(rows) == 4
    assert [row.split()[-1] for row in rows[:3]] == ["PASSED", "PASSED", "FAILED"]
    assert rows[3].split()[-1] == "SKIPPED"
    assert f"test_on_missing_accelerator: backend '{MISSING}' unavailable" in summary

    report = json.loads((pytester.path / "gates.json").read_text())
    assert (report["version"], report["passed"], report["failed"], report["skipped"]) == (
        1,
        2,
        1,
        1,
    )
    gates = {(g["test"].split("::")[1], g["index"]): g for g in report["gates"]}
    damaged = gates[("test_damaged_model", 0)]
    assert damaged["status"] == "failed" and damaged["passed"] is False
    assert damaged["drop"] > 0.05 and damaged["ci_low"] > 0.05  # significant: tolerant fails
    assert damaged["mode"] == "tolerant" and damaged["max_drop"] == 0.05
    assert damaged["sources"]["max_drop"] == "marker"
    assert damaged["drop"] == pytest.approx(
        damaged["reference_accuracy"] - damaged["candidate_accuracy"], abs=1e-5
    )
    assert len(damaged["per_class"]) == 10 and damaged["per_class"][0]["change"] < -0.05
    assert gates[("test_int8_within_budget", 1)]["mode"] == "proven"  # per-call override
    assert gates[("test_on_missing_accelerator", 0)]["status"] == "skipped"
    assert not list(pytester.path.glob(".gates.json.*"))  # atomic write left no temp file

    cases = {c.get("name"): c for c in ET.parse(pytester.path / "junit.xml").iter("testcase")}
    props = {
        name: [(p.get("name"), p.get("value")) for p in case.iter("property")]
        for name, case in cases.items()
    }
    failed = dict(props["test_damaged_model"])
    assert failed["tfc_passed"] == "False" and failed["tfc_mode"] == "tolerant"
    assert float(failed["tfc_drop"]) == pytest.approx(damaged["drop"])
    assert json.loads(failed["tfc_gate"])["candidate"] == "damaged.tflite"
    passed = props["test_int8_within_budget"]
    assert [v for k, v in passed if k == "tfc_passed"] == ["True", "True"]


def test_require_backend_turns_the_skip_into_a_failure(
    pytester: pytest.Pytester, gate_suite: None
) -> None:
    result = pytester.runpytest("-k", "missing", "--tfc-require-backend")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*backend '{MISSING}' unavailable*--tfc-require-backend is set*"])


def test_real_edgetpu_backend_skips_when_absent(
    pytester: pytest.Pytester, gate_files: dict[str, Path]
) -> None:
    from tfcompress.runtime import list_backends

    if "edgetpu" not in list_backends():
        pytest.skip("no edgetpu backend registered in this build")
    try:
        check_accuracy_drop(
            gate_files["reference"], gate_files["int8"], gate_files["test"], backend="edgetpu"
        )
    except BackendUnavailableError:
        pass
    else:
        pytest.skip("an Edge TPU is available here")
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.accuracy_gate(backend="edgetpu")
        def test_tpu(accuracy_gate):
            accuracy_gate({str(gate_files["reference"])!r}, {str(gate_files["int8"])!r},
                          {str(gate_files["test"])!r})
        """
    )
    pytester.runpytest().assert_outcomes(skipped=1)


def test_precedence_marker_over_command_line_over_ini_over_default(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_settings=SETTINGS_TESTS.format())

    def settings(*args: str) -> dict[str, str]:
        result = pytester.runpytest("-s", *args)
        result.assert_outcomes(passed=3)
        assert "tfcompress accuracy gates" not in result.stdout.str()  # no gate ran
        return dict(re.findall(r"SETTINGS (\S+) (.*)$", result.stdout.str(), re.MULTILINE))

    defaults = settings()
    assert (
        defaults["test_plain"] == "max_drop=0.01 from=default backend=cpu from=default mode=strict"
    )
    assert defaults["test_marker"].startswith("max_drop=0.5 from=marker backend=marker-backend")
    # the closest marker wins for max_drop; the class marker still sets the mode
    assert defaults["test_method"].startswith("max_drop=0.25 from=marker")
    assert defaults["test_method"].endswith("mode=tolerant")

    pytester.makeini("[pytest]\ntfc_max_drop = 0.2\ntfc_backend = ini-backend\n")
    ini = settings()
    assert ini["test_plain"] == "max_drop=0.2 from=ini backend=ini-backend from=ini mode=strict"
    assert ini["test_marker"].startswith("max_drop=0.5 from=marker backend=marker-backend")

    cli = settings("--tfc-max-drop", "0.3", "--tfc-backend", "cli-backend")
    assert cli["test_plain"] == (
        "max_drop=0.3 from=command line backend=cli-backend from=command line mode=strict"
    )
    assert cli["test_marker"].startswith("max_drop=0.5 from=marker backend=marker-backend")
    assert cli["test_method"].startswith("max_drop=0.25 from=marker")


@pytest.mark.parametrize(
    ("marker", "options", "ini", "message"),
    [
        (
            "(max_drops=0.1)",
            (),
            "",
            "unknown argument(s) max_drops; allowed: max_drop, metric, mode, backend, "
            "confidence, interval, resamples, seed",
        ),
        ("(0.01)", (), "", "keyword arguments only (max_drop, metric, mode"),
        ("(mode='lenient')", (), "", "unknown gate mode 'lenient'; choose one of strict"),
        ("(max_drop=-0.5)", (), "", "max_drop must be a fraction in [0, 1]"),
        ("()", ("--tfc-max-drop", "5"), "", "did you mean 0.05"),
        ("()", (), "tfc_max_drop = lots", "ini key tfc_max_drop must be a number"),
        ("()", ("--tfc-gate-report", "missing/gates.json"), "", "does not exist"),
    ],
)
def test_bad_settings_are_usage_errors(
    pytester: pytest.Pytester, marker: str, options: tuple[str, ...], ini: str, message: str
) -> None:
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.accuracy_gate{marker}
        def test_gate(accuracy_gate):
            pass
        """
    )
    result = pytester.runpytest(*options)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in " ".join(result.stderr.str().split())


def test_plugin_loads_without_tensorflow(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import sys

        import pytest

        @pytest.mark.accuracy_gate(max_drop=0.02)
        def test_fixture_is_available_and_cheap(accuracy_gate):
            assert accuracy_gate.settings.max_drop == 0.02
            assert "tensorflow" not in sys.modules and "keras" not in sys.modules
        """
    )
    result = pytester.runpytest_subprocess("--strict-markers")
    result.assert_outcomes(passed=1)
