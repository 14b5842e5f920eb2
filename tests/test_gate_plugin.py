"""The pytest plugin, driven through pytester: verdicts, precedence, reports, skips, errors.

The digits models of :mod:`tfcompress.samples.gate_models` cover classifier gates; its two-head
model (inputs
``image`` and ``gain``, heads ``cls`` and ``box``) covers gates on several outputs without
labels.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tfcompress.errors import BackendUnavailableError
from tfcompress.runtime import base as runtime_base
from tfcompress.runtime.base import Runner
from tfcompress.testing import check_accuracy_drop, check_gate  # loaded here, not in inner runs

pytest_plugins = ["pytester"]

MISSING = "tfc-test-missing"

GATE_TESTS = """
import pytest

REF, INT8, DAMAGED, DATA = {reference!r}, {int8!r}, {damaged!r}, {test!r}


@pytest.mark.accuracy_gate(max_drop=0.02)
def test_int8_within_budget(accuracy_gate):
    report = accuracy_gate(REF, INT8, DATA)
    assert report.passed and report.samples == 450
    assert [(v.metric, v.threshold) for v in report.verdicts] == [("accuracy", 0.02)]
    assert accuracy_gate(REF, INT8, DATA, mode="proven").settings.mode == "proven"


@pytest.mark.accuracy_gate(max_drop=0.05, mode="tolerant")
def test_damaged_model(accuracy_gate):
    accuracy_gate(REF, DAMAGED, DATA)


@pytest.mark.accuracy_gate(backend="{missing}")
def test_on_missing_accelerator(accuracy_gate):
    accuracy_gate(REF, INT8, DATA)
"""

# Gates without labels: a two-head model (the metric of each head is chosen), one head with
# its own threshold, a damaged classifier, and a legacy metric function.
HEAD_TESTS = """
import numpy as np
import pytest

from tfcompress.testing import GateReport

HEADS, HEADS_INT8, FRAMES = {two_head!r}, {two_head_int8!r}, {two_head_frames!r}
REF, INT8, DAMAGED = {reference!r}, {int8!r}, {damaged!r}
DATA, UNLABELLED = {test!r}, {unlabelled!r}


def mean_true_probability(labels, outputs):
    return float(outputs[np.arange(len(labels)), labels].mean())


@pytest.mark.accuracy_gate(mode="tolerant")
def test_two_heads_without_labels(accuracy_gate):
    report = accuracy_gate(HEADS, HEADS_INT8, FRAMES)
    assert isinstance(report, GateReport)
    chosen = [(v.output, v.metric, v.kind) for v in report.verdicts]
    assert chosen == [("cls", "agreement", "fidelity"), ("box", "snr", "fidelity")]


@pytest.mark.accuracy_gate(outputs="box", min_snr=15)
def test_box_with_its_own_threshold(accuracy_gate):
    report = accuracy_gate(HEADS, HEADS_INT8, FRAMES)
    assert [(v.output, v.metric, v.threshold) for v in report.verdicts] == [("box", "snr", 15.0)]


def test_damaged_classifier_without_labels(accuracy_gate):
    accuracy_gate(REF, DAMAGED, UNLABELLED)


@pytest.mark.accuracy_gate(metric=mean_true_probability, max_drop=0.05)
def test_legacy_metric_function(accuracy_gate):
    result = accuracy_gate(REF, INT8, DATA)
    assert isinstance(result, GateReport)
    assert result.passed and result.settings.metric_name == "mean_true_probability"
"""

SETTINGS_TESTS = """
import json

import pytest


def show(request, gate):
    options = gate.options
    shown = {{
        "max_drop": options.max_drop,
        "backend": gate.settings.backend,
        "mode": gate.settings.mode,
        "metrics": ",".join(options.metrics),
        "min_snr": options.thresholds.get("min_snr", options.defaults.get("min_snr")),
        "from": gate.sources,
    }}
    print(f"SETTINGS {{request.node.name}} {{json.dumps(shown)}}")


@pytest.mark.accuracy_gate(
    max_drop=0.5, backend="marker-backend", metrics=["accuracy", "snr"], min_snr=30
)
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
def gate_files(gate_model_files: dict[str, Path]) -> dict[str, Path]:
    return gate_model_files


@pytest.fixture(scope="module")
def head_files(
    gate_model_files: dict[str, Path], two_head_files: dict[str, Path]
) -> dict[str, Path]:
    files = {**gate_model_files, **two_head_files}
    # Gate once here so every model kind is loaded outside the in-process pytester runs.
    check_gate(files["two_head"], files["two_head_int8"], files["two_head_frames"])
    return files


@pytest.fixture
def missing_backend(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(runtime_base.BACKENDS, MISSING, _MissingRunner)
    return MISSING


@pytest.fixture
def gate_suite(
    pytester: pytest.Pytester, gate_files: dict[str, Path], missing_backend: str
) -> None:
    paths = {name: str(path) for name, path in gate_files.items()}
    pytester.makepyfile(test_gates=GATE_TESTS.format(missing=missing_backend, **paths))


@pytest.fixture
def head_suite(pytester: pytest.Pytester, head_files: dict[str, Path]) -> None:
    paths = {name: str(path) for name, path in head_files.items()}
    pytester.makepyfile(test_heads=HEAD_TESTS.format(**paths))


def summary_rows(output: str, test_file: str) -> list[list[str]]:
    """The rows of the ``tfcompress accuracy gates`` section, split on runs of 2+ spaces."""
    summary = output[output.index("tfcompress accuracy gates") :]
    pattern = rf"{re.escape(test_file)}::\w+ "
    return [re.split(r"\s{2,}", line) for line in summary.splitlines() if re.match(pattern, line)]


def test_gates_pass_fail_skip_and_report(pytester: pytest.Pytester, gate_suite: None) -> None:
    result = pytester.runpytest(
        "-rs", "--junitxml=junit.xml", "--tfc-gate-report=gates.json", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    output = result.stdout.str()

    # the failure message a person can act on: the report's explanation
    assert "GateError: gate FAILED (tolerant): 1 of 1 check on 1 output failed" in output
    assert re.search(
        r"\S+\s+accuracy\s+\d+\.\d\d%\s+\d+\.\d\d%\s+\+\d+\.\d\d pt\s+"
        r"\[\+\d+\.\d\d, \+\d+\.\d\d\] pt\s+max_drop 5\.00 pt\s+FAILED",
        output,
    )
    assert "damaged.tflite on cpu; 450 samples, mode tolerant, interval: mcnemar" in output
    assert "per-class change, worst 5 of 10" in output
    # the unavailable backend is a skip with its reason
    assert f"backend '{MISSING}' unavailable: no {MISSING} accelerator found" in output

    # the summary lists every verdict: 2 gates in the first test, 1 failed, 1 skipped
    rows = summary_rows(output, "test_gates.py")
    assert len(rows) == 4
    assert [row[-1] for row in rows] == ["PASSED", "PASSED", "FAILED", "SKIPPED"]
    assert rows[2][2] == "accuracy" and rows[2][-2] == "max_drop 5.00 pt"
    assert rows[2][-3] == "tolerant" and re.fullmatch(r"\[\+\d+\.\d\d, \+\d+\.\d\d\]", rows[2][-4])
    assert f"test_on_missing_accelerator: backend '{MISSING}' unavailable" in output

    report = json.loads((pytester.path / "gates.json").read_text())
    assert (report["version"], report["passed"], report["failed"], report["skipped"]) == (
        2,
        2,
        1,
        1,
    )
    gates = {(g["test"].split("::")[1], g["index"]): g for g in report["gates"]}
    damaged = gates[("test_damaged_model", 0)]
    assert damaged["status"] == "failed" and damaged["passed"] is False
    assert damaged["gate_passed"] is False and damaged["metric"] == "accuracy"
    assert damaged["kind"] == "task" and isinstance(damaged["output"], str)
    assert damaged["drop"] > 0.05 and damaged["ci_low"] > 0.05  # significant: tolerant fails
    assert damaged["mode"] == "tolerant" and damaged["max_drop"] == 0.05
    assert (damaged["threshold_name"], damaged["threshold"]) == ("max_drop", 0.05)
    assert damaged["sources"]["max_drop"] == "marker"
    assert damaged["reference_accuracy"] == damaged["reference_score"]
    assert damaged["drop"] == pytest.approx(
        damaged["reference_score"] - damaged["candidate_score"], abs=1e-5
    )
    assert damaged["samples"] == 450 and damaged["interval"] == "mcnemar"
    assert damaged["candidate"] == "damaged.tflite" and damaged["backend"] == "cpu"
    assert len(damaged["per_class"]) == 10 and damaged["per_class"][0]["change"] < -0.05
    assert gates[("test_int8_within_budget", 1)]["mode"] == "proven"  # per-call override
    assert gates[("test_int8_within_budget", 1)]["sources"]["mode"] == "call"
    assert gates[("test_on_missing_accelerator", 0)]["status"] == "skipped"
    assert not list(pytester.path.glob(".gates.json.*"))  # atomic write left no temp file

    cases = {c.get("name"): c for c in ET.parse(pytester.path / "junit.xml").iter("testcase")}
    props = {
        name: [(p.get("name"), p.get("value")) for p in case.iter("property")]
        for name, case in cases.items()
    }
    failed = dict(props["test_damaged_model"])
    assert failed["tfc_passed"] == "False" and failed["tfc_mode"] == "tolerant"
    assert failed["tfc_metric"] == "accuracy" and failed["tfc_threshold_name"] == "max_drop"
    assert float(failed["tfc_drop"]) == pytest.approx(damaged["drop"])
    assert json.loads(failed["tfc_gate"])["candidate"] == "damaged.tflite"
    passed = props["test_int8_within_budget"]
    assert [v for k, v in passed if k == "tfc_passed"] == ["True", "True"]


def test_gates_without_labels_on_two_heads(pytester: pytest.Pytester, head_suite: None) -> None:
    result = pytester.runpytest("--tfc-gate-report=gates.json", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=1)
    output = result.stdout.str()

    # a damaged candidate fails on fidelity alone, with the report's explanation
    assert "GateError: gate FAILED (strict): 1 of 1 check on 1 output failed" in output
    assert re.search(r"agreement: agreement \d+\.\d\d% < min_agreement 99\.00%", output)
    assert "no labels for output" in output and "fidelity to the reference" in output
    assert "Relax min_agreement only if this drift is acceptable" in output

    rows = summary_rows(output, "test_heads.py")
    heads = [row for row in rows if "test_two_heads_without_labels" in row[0]]
    assert [(row[1], row[2], row[-2], row[-1]) for row in heads] == [
        ("cls", "agreement", "min_agreement 99.00%", "PASSED"),
        ("box", "snr", "min_snr 20.00 dB", "PASSED"),
    ]
    assert len(rows) == 5  # two heads, one head, the damaged model, the metric function

    gates = json.loads((pytester.path / "gates.json").read_text())["gates"]
    records = {(g["test"].split("::")[1], g["output"], g["metric"]): g for g in gates}
    box = records[("test_two_heads_without_labels", "box", "snr")]
    assert box["kind"] == "fidelity" and box["unit"] == "dB" and box["drop"] is None
    assert box["reference_score"] is None and "reference_accuracy" not in box
    assert box["ci_low"] <= box["value"] <= box["ci_high"] and box["value"] > 20
    assert "no labels for output 'box'" in box["chosen_because"]
    own = records[("test_box_with_its_own_threshold", "box", "snr")]
    assert own["threshold"] == 15.0 and own["sources"]["min_snr"] == "marker"
    damaged = next(g for g in gates if g["test"].endswith("test_damaged_classifier_without_labels"))
    assert damaged["metric"] == "agreement" and damaged["status"] == "failed"
    (legacy,) = [g for g in gates if g["test"].endswith("test_legacy_metric_function")]
    # the metric function's gate is check_gate with one check: its output is named too
    assert legacy["metric"] == "mean_true_probability" and legacy["output"] == damaged["output"]
    assert legacy["status"] == "passed" and legacy["interval"] == "bootstrap"
    assert legacy["threshold"] == legacy["max_drop"] == 0.05


def test_run_wide_min_snr_is_a_default(pytester: pytest.Pytester, head_suite: None) -> None:
    result = pytester.runpytest(
        "-k",
        "two_heads or own_threshold",
        "--tfc-min-snr",
        "60",
        "--tfc-gate-report=gates.json",
        "-p",
        "no:cacheprovider",
    )
    # 60 dB applies where snr is judged without a threshold of its own: the chosen box snr
    # fails; the test that set min_snr=15 keeps it; the class head's agreement is untouched.
    result.assert_outcomes(passed=1, failed=1)
    output = result.stdout.str()
    assert "1 of 2 checks on 2 outputs failed: box snr:" in output
    assert re.search(r"interval upper bound \d+\.\d\d dB < min_snr 60\.00 dB", output)
    gates = json.loads((pytester.path / "gates.json").read_text())["gates"]
    thresholds = {
        (g["test"].split("::")[1], g["output"]): (g["threshold"], g["status"]) for g in gates
    }
    assert thresholds == {
        ("test_two_heads_without_labels", "cls"): (0.99, "passed"),
        ("test_two_heads_without_labels", "box"): (60.0, "failed"),
        ("test_box_with_its_own_threshold", "box"): (15.0, "passed"),
    }
    assert all(g["sources"]["min_snr"] in ("command line", "marker") for g in gates)


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

    def settings(*args: str) -> dict[str, dict[str, Any]]:
        result = pytester.runpytest("-s", *args)
        result.assert_outcomes(passed=3)
        assert "tfcompress accuracy gates" not in result.stdout.str()  # no gate ran
        found = re.findall(r"SETTINGS (\S+) (.*)$", result.stdout.str(), re.MULTILINE)
        return {name: json.loads(shown) for name, shown in found}

    def values(shown: dict[str, Any], *keys: str) -> list[Any]:
        return [(shown[k], shown["from"].get(k, "default")) for k in keys]

    keys = ("max_drop", "backend", "metrics", "min_snr")
    marker = [(0.5, "marker"), ("marker-backend", "marker"), ("accuracy,snr", "marker")]
    marker.append((30, "marker"))

    defaults = settings()
    assert values(defaults["test_plain"], *keys) == [
        (0.01, "default"),
        ("cpu", "default"),
        ("", "default"),
        (None, "default"),
    ]
    assert defaults["test_plain"]["mode"] == "strict"
    assert values(defaults["test_marker"], *keys) == marker
    # the closest marker wins for max_drop; the class marker still sets the mode
    assert values(defaults["test_method"], "max_drop") == [(0.25, "marker")]
    assert defaults["test_method"]["mode"] == "tolerant"

    pytester.makeini(
        "[pytest]\ntfc_max_drop = 0.2\ntfc_backend = gpu\ntfc_metric = accuracy\ntfc_min_snr = 22\n"
    )
    ini = settings()
    assert values(ini["test_plain"], *keys) == [
        (0.2, "ini"),
        ("gpu", "ini"),
        ("accuracy", "ini"),
        (22, "ini"),
    ]
    assert values(ini["test_marker"], *keys) == marker

    cli = settings(
        "--tfc-max-drop=0.3",
        "--tfc-backend=edgetpu",
        "--tfc-metric=accuracy,agreement",
        "--tfc-min-snr=25",
    )
    assert values(cli["test_plain"], *keys) == [
        (0.3, "command line"),
        ("edgetpu", "command line"),
        ("accuracy,agreement", "command line"),
        (25, "command line"),
    ]
    assert values(cli["test_marker"], *keys) == marker
    assert values(cli["test_method"], "max_drop", "metrics") == [
        (0.25, "marker"),
        ("accuracy,agreement", "command line"),
    ]


@pytest.mark.parametrize(
    ("marker", "options", "ini", "message"),
    [
        (
            "(max_drops=0.1)",
            (),
            "",
            "unknown argument(s) max_drops; allowed: outputs, metrics, metric, max_drop, "
            "min_snr, min_cosine, max_abs, min_agreement, mode, backend, confidence, interval, "
            "resamples, seed",
        ),
        ("(0.01)", (), "", "keyword arguments only (outputs, metrics, metric, max_drop"),
        ("(mode='lenient')", (), "", "unknown gate mode 'lenient'; choose one of strict"),
        ("(max_drop=-0.5)", (), "", "max_drop for accuracy-like metrics must be in [0, 1]"),
        ("(metric='f1')", (), "", "unknown metric 'f1'"),
        ("(metric='accuracy', metrics=['snr'])", (), "", "metric or metrics, not both"),
        ("(metrics=['accuracy'], min_snr=20)", (), "", "min_snr applies to the snr metric"),
        ("(metrics=['snr'], max_drop=0.02)", (), "", "max_drop applies to task metrics"),
        ("(min_agreement=1.5)", (), "", "must be in [0, 1], got 1.5"),
        ("(metrics='max_abs')", (), "", "max_abs is in the output's own unit"),
        ("(outputs=[1])", (), "", "outputs must be a name or a list of names"),
        ("(metric=len, min_snr=20)", (), "", "takes max_drop only, not min_snr"),
        ("(min_snr=25)", ("--tfc-metric", "accuracy"), "", "min_snr applies to the snr metric"),
        ("()", ("--tfc-max-drop", "5"), "", "did you mean 0.05"),
        ("()", ("--tfc-min-cosine", "2"), "", "must be in [-1, 1]"),
        ("()", ("--tfc-metric", "f1"), "", "unknown metric 'f1'"),
        ("()", (), "tfc_max_drop = lots", "ini key tfc_max_drop must be a number"),
        ("()", (), "tfc_metric = f1", "ini key tfc_metric: unknown metric 'f1'"),
        ("()", (), "tfc_min_snr = loud", "ini key tfc_min_snr must be a number"),
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

        @pytest.mark.accuracy_gate(max_drop=0.02, metrics="accuracy,snr", min_snr=25)
        def test_fixture_is_available_and_cheap(accuracy_gate):
            assert accuracy_gate.settings.max_drop == 0.02
            assert accuracy_gate.options.metrics == ("accuracy", "snr")
            assert "tensorflow" not in sys.modules and "keras" not in sys.modules
        """
    )
    result = pytester.runpytest_subprocess("--strict-markers", "--tfc-min-cosine=0.9")
    result.assert_outcomes(passed=1)
