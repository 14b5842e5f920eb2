"""``tfcompress gate`` through main(argv), plus one real subprocess run for the exit code."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tfcompress.cli import main

REPORT_KEYS = {"passed", "mode", "confidence", "samples", "failed", "checks", "backend"}
CHECK_KEYS = {
    "output",
    "metric",
    "kind",
    "unit",
    "reference_score",
    "candidate_score",
    "value",
    "drop",
    "ci_low",
    "ci_high",
    "threshold_name",
    "threshold",
    "passed",
    "chosen_because",
    "p_value",
    "reference_only",
    "candidate_only",
    "per_class",
}


@pytest.fixture(scope="module")
def files(gate_model_files: dict[str, Path]) -> dict[str, Path]:
    return gate_model_files


def run_cli(capfd: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capfd.readouterr()
    return code, captured.out, captured.err


def test_faithful_candidate_passes_with_json(
    capfd: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    code, stdout, stderr = run_cli(
        capfd, "gate", files["reference"], files["int8"], "--eval", files["test"], "--json"
    )
    assert code == 0, stderr
    report = json.loads(stdout)  # stdout holds exactly one JSON object
    assert set(report) >= REPORT_KEYS
    assert report["passed"] is True and report["mode"] == "strict" and report["samples"] == 450
    assert report["failed"] == 0 and report["backend"] == "cpu"
    assert report["reference_backend"] == "keras"
    (check,) = report["checks"]  # one output, one metric
    assert set(check) >= CHECK_KEYS
    assert check["metric"] == "accuracy" and check["kind"] == "task"
    assert check["threshold_name"] == "max_drop" and check["threshold"] == 0.01
    assert "labels are class ids" in check["chosen_because"]
    assert check["ci_low"] <= check["drop"] <= check["ci_high"] <= 0.01
    assert check["drop"] == pytest.approx(
        check["reference_score"] - check["candidate_score"], abs=1e-5
    )


def test_unlabelled_data_is_gated_by_fidelity(
    capfd: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    code, stdout, stderr = run_cli(
        capfd, "gate", files["reference"], files["int8"], "--eval", files["unlabelled"], "--json"
    )
    assert code == 0, stderr
    (check,) = json.loads(stdout)["checks"]
    assert check["metric"] == "agreement" and check["kind"] == "fidelity"
    assert check["reference_score"] is None and check["drop"] is None
    assert check["threshold_name"] == "min_agreement" and check["threshold"] == 0.99
    assert check["value"] >= 0.99 and "no labels" in check["chosen_because"]

    code, stdout, _ = run_cli(
        capfd, "gate", files["reference"], files["damaged"], "--eval", files["unlabelled"]
    )
    assert code == 1
    assert stdout.startswith("gate FAILED (strict)")
    assert re.search(r"agreement \d+\.\d\d% < min_agreement 99\.00%", stdout)
    assert "fidelity to the reference" in stdout and "Relax min_agreement" in stdout


def test_damaged_candidate_fails_with_table(
    capfd: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    code, stdout, stderr = run_cli(
        capfd,
        "gate",
        files["reference"],
        files["damaged"],
        "--eval",
        files["test"],
        "--max-drop",
        "0.05",
        "--mode",
        "proven",
    )
    assert code == 1
    assert stdout.startswith("gate FAILED (proven)")
    assert "damaged.tflite" in stdout and "450 samples" in stdout and "per-class change" in stdout
    assert "interval upper bound" in stdout.splitlines()[0]  # proven: the far bound decides
    assert "FAILED" in stderr  # the verdict is logged for people reading CI logs


def test_mode_decides_on_a_small_noisy_test_set(
    capfd: pytest.CaptureFixture[str], files: dict[str, Path], tmp_path: Path
) -> None:
    import numpy as np

    data = np.load(files["test"])
    small = tmp_path / "small.npz"
    np.savez(small, x=data["x"][:40], y=data["y"][:40])
    verdicts = {}
    for mode in ("strict", "tolerant", "proven"):
        code, stdout, _ = run_cli(
            capfd,
            "gate",
            files["reference"],
            files["damaged"],
            "--eval",
            small,
            "--max-drop",
            "0.35",
            "--mode",
            mode,
            "--json",
        )
        report = json.loads(stdout)
        assert code == (0 if report["passed"] else 1)
        (verdicts[mode],) = report["checks"]
        assert verdicts[mode]["passed"] is report["passed"] and report["samples"] == 40
    # the same numbers, judged by different bounds of the same interval
    assert len({(r["drop"], r["ci_low"], r["ci_high"]) for r in verdicts.values()}) == 1
    report = verdicts["strict"]
    assert verdicts["strict"]["passed"] is (report["drop"] <= 0.35)
    assert verdicts["tolerant"]["passed"] is (report["ci_low"] <= 0.35)
    assert verdicts["proven"]["passed"] is (report["ci_high"] <= 0.35)
    assert report["ci_high"] - report["ci_low"] > 0.1  # 40 samples cannot pin the drop down
    # here the measured drop is above 35 pt but not significantly so
    assert [verdicts[m]["passed"] for m in ("strict", "tolerant", "proven")] == [False, True, False]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("{unlabelled}", "--metric", "accuracy"), "compares it to labels, but there are none"),
        (("{test}", "--output", "boxes"), "no output named 'boxes'"),
        (("{test}", "--metric", "accuracy", "--min-snr", "20"), "applies to the snr metric"),
        (("{test}", "--metric", "snr", "--max-drop", "0.01"), "applies to task metrics"),
        (("{test}", "--metric", "mse"), "no default threshold; pass --max-drop"),
        (("{test}", "--max-drop", "1.5"), "must be in [0, 1] (a fraction, 0.01 = one point)"),
        (("{test}", "--max-drop", "-0.1"), "must be in [0, 1] (a fraction"),
        (("{test}", "--min-cosine", "2"), "must be in [-1, 1]"),
        (("{test}", "--mode", "lax"), "invalid choice: 'lax'"),
        (("{test}", "--metric", "f1"), "unknown metric 'f1'"),
        (("{test}", "--backend", "tpu9"), "invalid choice: 'tpu9'"),
    ],
)
def test_bad_input_exits_2(
    capfd: pytest.CaptureFixture[str],
    files: dict[str, Path],
    argv: tuple[str, ...],
    message: str,
) -> None:
    data, *options = (a.format(**files) for a in argv)
    code, stdout, stderr = run_cli(
        capfd, "gate", files["reference"], files["int8"], "--eval", data, *options
    )
    assert code == 2
    assert stdout == ""
    assert message in stderr
    assert len(stderr.strip().splitlines()) == 1  # one line, no traceback


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("{reference}", "{wide}", "--eval", "{test}"), "reference outputs shape (10,)"),
        (("{reference}", "missing.tflite", "--eval", "{test}"), "missing.tflite"),
        (("{reference}", "{int8}"), "--eval"),
    ],
)
def test_bad_models_or_usage_exit_2(
    capfd: pytest.CaptureFixture[str],
    files: dict[str, Path],
    argv: tuple[str, ...],
    message: str,
) -> None:
    code, stdout, stderr = run_cli(capfd, "gate", *(a.format(**files) for a in argv))
    assert code == 2
    assert stdout == ""
    assert message in stderr


def test_unavailable_backend_exits_2(
    capfd: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    from tfcompress.errors import BackendUnavailableError
    from tfcompress.runtime import create_runner, list_backends

    if "edgetpu" not in list_backends():
        pytest.skip("no edgetpu backend registered in this build")
    try:
        create_runner(files["int8"], backend="edgetpu").close()
    except BackendUnavailableError:
        pass
    else:
        pytest.skip("an Edge TPU is available here")
    code, stdout, stderr = run_cli(
        capfd,
        "gate",
        files["reference"],
        files["int8"],
        "--eval",
        files["test"],
        "--backend",
        "edgetpu",
    )
    assert code == 2 and stdout == ""
    assert "edgetpu" in stderr.lower()


def test_real_process_exit_code_and_clean_stdout(files: dict[str, Path]) -> None:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    command = [sys.executable, "-m", "tfcompress", "gate", files["reference"], files["damaged"]]
    completed = subprocess.run(
        [*map(str, command), "--eval", str(files["test"]), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 1, completed.stderr
    lines = completed.stdout.splitlines()
    assert len(lines) == 1  # nothing but the JSON object on stdout
    report = json.loads(lines[0])
    assert report["passed"] is False and report["failed"] == 1
    assert report["checks"][0]["drop"] > 0.01
