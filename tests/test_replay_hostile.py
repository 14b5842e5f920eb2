"""``compress --replay`` reads a report like any untrusted input: types and ranges first."""

from __future__ import annotations

import json

import pytest

from tfcompress.cli import main
from tfcompress.compression.replay import checked_attempt, read_attempt
from tfcompress.errors import InvalidInputError


def _attempt(technique: str = "qat", **recipe) -> dict:
    base = {"recipe": {"name": "int8"}} if technique == "ptq" else {"epochs": 1}
    return {
        "index": 1,
        "name": technique,
        "technique": technique,
        "status": "passed",
        "why": "ok",
        "recipe": {**base, **recipe},
    }


@pytest.mark.parametrize(
    ("attempt", "refusal"),
    [
        (_attempt(epochs=10**9), "epochs must be an integer 1 to 1000"),
        (_attempt(epochs=1e9), "epochs must be an integer 1 to 1000"),
        (_attempt(epochs="1"), "epochs must be an integer"),
        (_attempt(epochs=True), "epochs must be an integer"),
        (_attempt(seed=-1), "seed must be an integer 0 to"),
        (_attempt(learning_rate=float("nan")), "learning_rate must be a number between 0 and 1"),
        (_attempt(safe_mode=False), "qat takes no option 'safe_mode'"),
        (_attempt(gate={"max_drop": 1}), "qat takes no option 'gate'"),
        (_attempt("prune", skip_layers="dense"), "skip_layers must be a list of layer names"),
        (_attempt("prune", target_sparsity=5), "target_sparsity must be a number between 0 and 1"),
        (_attempt("cluster", clusters=[16]), "clusters must be an integer 2 to 256"),
        (_attempt("ptq", seed="0"), "seed must be an integer"),
        (_attempt("ptq", target="tpu9"), "unknown target 'tpu9'"),
        (_attempt("ptq", recipe=[1]), "no recipe object"),
        (_attempt("ptq", recipe={"name": "int8", "per_channel": 7, "nope": 1}), "unknown"),
        (_attempt("ptq", recipe={"name": "int3"}), "int3"),
        ({**_attempt(), "technique": "exec"}, "technique 'exec'"),
        ({**_attempt(), "recipe": "epochs=1"}, "recipe of type str"),
        ({**_attempt(), "index": "1"}, "index or name"),
        ([1, 2], "a JSON list"),
    ],
)
def test_a_hostile_attempt_is_refused_in_one_line(attempt, refusal):
    with pytest.raises(InvalidInputError, match=refusal) as caught:
        checked_attempt(attempt)
    assert "\n" not in str(caught.value)


def test_a_sane_attempt_reads_back():
    assert checked_attempt(_attempt(epochs=2, learning_rate=1e-4, seed=3)).recipe["epochs"] == 2
    assert checked_attempt(_attempt("ptq", seed=0, target="edgetpu")).technique == "ptq"


@pytest.mark.parametrize(
    "report",
    [
        {"attempts": "all"},
        {"attempts": [1, "x", None], "chosen": None},
        {"attempts": [], "chosen": ["qat"]},
        {"attempts": [], "chosen": _attempt(epochs=10**9)},
    ],
)
def test_hostile_reports_exit_2_in_one_line_before_the_model_is_read(tmp_path, capsys, report):
    path = tmp_path / "compress.json"
    path.write_text(json.dumps(report))
    out = tmp_path / "out.tflite"
    # The model does not even exist: the report is refused before anything is loaded.
    argv = ["compress", str(tmp_path / "m.keras"), "--data", str(path), "--replay", str(path)]
    assert main([*argv, "--out", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tfcompress compress: error:"), lines
    assert not out.exists()
    if report.get("attempts") and report["attempts"] != "all":
        with pytest.raises(InvalidInputError):
            read_attempt(report, 1)


def test_a_huge_value_in_a_report_is_quoted_cut_with_its_length():
    attempt = {**_attempt("ptq"), "seconds": "x" * 200_000}
    with pytest.raises(InvalidInputError) as caught:
        checked_attempt(attempt)
    message = str(caught.value)  # was 200,166 characters, the whole value
    assert "... (200,004 characters)" in message and len(message) < 1_300
