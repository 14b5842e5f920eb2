"""``tfcompress compress --replay``: every kind of attempt a fresh report records, made again.

One search with ``--train`` and a gate nothing passes (so no rung is bounded away) records
int8, the post-training methods' attempt, selective steps, int16x8, QAT, pruning,
clustering and float16. Each attempt is read back through its config; the post-training
ones and QAT (which trains again, in its child process) are replayed through the CLI. A
float ``.tflite`` gives a LiteRT Quantizer attempt, replayed the same way.

A report is read like any untrusted input: types and ranges first, each refusal one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tfcompress.cli import main
from tfcompress.compression.replay import checked_attempt, read_attempt
from tfcompress.errors import InvalidInputError
from tfcompress.samples.sensitive import sensitive_model
from tfcompress.training.configs import CONFIG_VERSION, TRAINING_CONFIGS


def _files(root, model, calib, x, y) -> dict[str, str]:
    np.savez(root / "calib.npz", x=calib[:200])  # 200: no calibration-variant rung
    np.savez(root / "test.npz", x=x, y=y)
    np.savez(root / "train.npz", x=x[:320], y=y[:320])  # 10 steps of 32: pruning's minimum
    return {n: str(root / f"{n}.npz") for n in ("calib", "test", "train")}


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    import keras

    model, (calib, (x, y)) = sensitive_model(keras, outlier=0.0)
    root = tmp_path_factory.mktemp("replay")
    model.save(root / "model.keras")
    files = {"model": str(root / "model.keras"), **_files(root, model, calib, x[:500], y[:500])}
    code = main(["compress", files["model"], "--data", files["calib"], "--eval", files["test"],
                 "--train", files["train"], "--batch-size", "16", "--min-snr", "200",
                 "--report", str(root / "rep"), "--out", str(root / "none.tflite")])  # fmt: skip
    assert code == 1  # nothing passed: every rung was tried
    report = json.loads((root / "rep" / "compress.json").read_text())
    return root, files, report


def _replay(files, root, attempt: int, out, *extra: str) -> list[str]:
    return ["compress", files["model"], "--data", files["calib"], *extra,
            "--replay", str(root / "rep" / "compress.json"), "--attempt", str(attempt),
            "--out", str(out)]  # fmt: skip


@pytest.mark.slow  # a whole compress ladder with fine-tuning, replayed
def test_every_attempt_of_a_fresh_report_reads_back_and_replays(searched, tmp_path, capsys):
    root, files, report = searched
    made = {a["name"]: a for a in report["attempts"] if a["status"] != "error"}
    assert {"int8", "int8-methods", "selective-1", "int16x8", "qat", "prune-int8", "cluster-int8",
            "float16"} <= set(made), sorted(made)  # fmt: skip
    assert report["chosen"] is None
    for attempt in report["attempts"]:  # every recorded recipe passes the configs' checks
        assert checked_attempt(attempt).recipe == attempt["recipe"]
    for name in ("qat", "prune-int8", "cluster-int8"):  # the whole config, as it ran
        recipe = made[name]["recipe"]
        config = TRAINING_CONFIGS[made[name]["technique"]].from_dict(recipe)
        assert recipe == config.to_dict() and recipe["version"] == CONFIG_VERSION
        assert recipe["freeze_batchnorm"] is True and recipe["epochs"] == 1
        assert recipe["batch_size"] == 16  # compress --batch-size: the fine-tuning batch
    assert made["prune-int8"]["recipe"]["schedule"] == "polynomial"  # what ran, not None
    assert made["int8"]["recipe"]["version"] == CONFIG_VERSION
    assert "methods" not in made["int8-methods"]["recipe"]  # the kept ones are in its recipe
    capsys.readouterr()
    for name in ("int8", "int8-methods", "selective-1", "float16"):  # post-training: same size
        out = tmp_path / f"{name}.tflite"
        assert main(_replay(files, root, made[name]["index"], out)) == 0
        assert "same raw and gzip size as recorded" in capsys.readouterr().out, name
        assert out.stat().st_size == made[name]["size_bytes"]
    # QAT trains again, with the recorded options and seed (it was refused before configs).
    out = tmp_path / "qat.tflite"
    argv = _replay(files, root, made["qat"]["index"], out, "--train", files["train"])
    assert main([*argv, "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["replayed"] == made["qat"]["index"] and payload["recipe"]["technique"] == "qat"
    assert payload["size_bytes"] == payload["recorded_size_bytes"] == out.stat().st_size
    # Without --train a fine-tuned attempt cannot be made: one line, exit 2, nothing written.
    refused = tmp_path / "refused.tflite"
    assert main(_replay(files, root, made["qat"]["index"], refused)) == 2
    assert "pass --train" in capsys.readouterr().err and not refused.exists()


@pytest.mark.slow  # a compress search of a .tflite, replayed
def test_a_litert_quantizer_attempt_replays_through_the_cli(tmp_path, capsys, monkeypatch):
    import keras

    from tfcompress.quantization.methods import slow_ops
    from tfcompress.quantization.ptq import quantize

    timed: dict[str, bytes] = {}  # what the search timed, by name (the real timing runs)
    real = slow_ops.measure_latency

    def recording(content, **options):
        timed.setdefault(options["name"], content)
        return real(content, **options)

    monkeypatch.setattr(slow_ops, "measure_latency", recording)

    model, (calib, (x, y)) = sensitive_model(keras, outlier=0.0)  # int8 handles it
    files = _files(tmp_path, model, calib, x[:500], y[:500])
    files["model"] = str(tmp_path / "float.tflite")
    quantize(model, recipe="float32").save(files["model"])
    code = main(["compress", files["model"], "--data", files["calib"], "--eval", files["test"],
                 "--max-drop", "0.05", "--report", str(tmp_path / "rep"),
                 "--out", str(tmp_path / "chosen.tflite")])  # fmt: skip
    assert code == 0
    report = json.loads((tmp_path / "rep" / "compress.json").read_text())
    chosen = report["chosen"]
    assert chosen["recipe"]["engine"] == "litert-quantizer", chosen["recipe"]
    # With eval data the int8 attempt compared LiteRT Quantizer's two calibrations, as
    # quantize --eval does, and recorded the one it kept: a replay makes that one again.
    int8 = next(a for a in report["attempts"] if a["name"] == "int8")
    assert int8["recipe"]["recipe"]["calibration"] in ("min-max", "moving-average")
    # The slowdown baseline of a .tflite input is the file given, timed in the same run.
    assert report["baseline"] == "the input .tflite" and report["float32_latency_ms"] > 0
    assert timed["the input .tflite"] == Path(files["model"]).read_bytes()
    assert chosen["latency_ms"] is not None and report["latency_backend"] == "cpu"
    capsys.readouterr()
    out = tmp_path / "again.tflite"
    assert main(_replay(files, tmp_path, chosen["index"], out)) == 0
    assert out.read_bytes() == (tmp_path / "chosen.tflite").read_bytes()
    # A static batch cannot be honoured for a .tflite (LiteRT Quantizer keeps its shapes).
    never = tmp_path / "never.tflite"
    code = main(["compress", files["model"], "--data", files["calib"], "--eval", files["test"],
                 "--static-batch", "1", "--out", str(never)])  # fmt: skip
    assert code == 2 and not never.exists()
    assert "a .tflite keeps its own shapes" in capsys.readouterr().err


def test_the_replay_line_says_only_what_the_report_lets_it_compare():
    from types import SimpleNamespace

    from tfcompress.cli.compress import _compared
    from tfcompress.training.sparsity import gzip_size

    content = bytes(range(256)) * 4
    same = SimpleNamespace(size_bytes=len(content), gzip_bytes=gzip_size(content))
    assert _compared(same, content).startswith("same raw and gzip size as recorded")
    other = SimpleNamespace(size_bytes=len(content), gzip_bytes=gzip_size(content) + 7)
    assert "other bytes" in _compared(other, content)  # same size, not the same bytes
    assert "not the recorded artifact" in _compared(
        SimpleNamespace(size_bytes=1, gzip_bytes=None), content
    )
    # A report whose size was not a number (edited, or fuzzed) records none.
    unsized = SimpleNamespace(size_bytes=None, gzip_bytes=None)
    assert _compared(unsized, content) == "the report records no size to compare it with"


# --- a report is untrusted input -------------------------------------------------------


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


INT8_METHODS = _attempt("ptq", recipe={"name": "int8", "methods": [{}]})
INT8_BATCH = _attempt("ptq", recipe={"name": "int8", "static_batch": 2**64})


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        (
            json.dumps({"attempts": [], "chosen": _attempt("ptq", methods=[{}])}),
            "list of method names",
        ),
        (
            json.dumps({"attempts": [], "chosen": INT8_METHODS}),
            "list of method names",
        ),
        ('{"attempts": [], "chosen": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deep"),
        (
            json.dumps({"attempts": [], "chosen": INT8_BATCH}),
            "static_batch must be a positive integer up to 2147483647",
        ),
        (json.dumps({"attempts": [], "chosen": _attempt("qat", batch_size=2**64)}), "batch_size"),
        ('{"attempts": [], "chosen": {"index": ' + "9" * 5000 + "}}", "not a JSON compress report"),
        ('{"attempts": [], "chosen": {"index": 1.' + "9" * 5000 + "}}", "not an attempt"),
    ],
)  # fmt: skip
def test_hostile_report_text_is_one_line(tmp_path, capsys, text, refusal):
    report, out = tmp_path / "compress.json", tmp_path / "out.tflite"
    report.write_text(text)
    argv = ["compress", str(tmp_path / "m.keras"), "--data", str(report), "--replay", str(report)]
    assert main([*argv, "--out", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tfcompress compress: error:"), lines
    line = lines[0]
    assert refusal in line and len(line) < 600, line
    assert not out.exists()
