"""qat/prune/cluster: bad input fails fast with one line and exit 2; the CLI reports JSON."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tfcompress
from tfcompress.cli import main


@pytest.fixture(scope="module")
def files(tmp_path_factory, trained_cnn, mnist_split) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("training_cli")
    paths = {
        "model": root / "cnn.keras",
        "train": root / "train.npz",
        "val": root / "val.npz",
        "tiny": root / "tiny.npz",
        "bad_val": root / "bad_val.npz",
        "unlabelled": root / "unlabelled.npz",
    }
    trained_cnn.save(paths["model"])
    train, test = mnist_split.train, mnist_split.test
    np.savez(paths["train"], x=train.x[:640], y=train.y[:640])
    np.savez(paths["val"], x=test.x[:300], y=test.y[:300])
    np.savez(paths["tiny"], x=train.x[:50], y=train.y[:50])
    np.savez(paths["bad_val"], x=test.x[:20, :14, :14], y=test.y[:20])
    np.savez(paths["unlabelled"], x=train.x[:640])
    return paths


def _run(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _base(files, command: str, out: Path, *extra: str, child: bool = False) -> list[str]:
    # In process unless the test is about the default: a child process per command would
    # add a TensorFlow import to each (tests/test_troublemaker_models.py covers the child).
    return [
        command,
        str(files["model"]),
        "--train",
        str(files["train"]),
        "--eval",
        str(files["val"]),
        "--out",
        str(out),
        *([] if child else ["--no-isolate"]),
        *extra,
    ]


# --- bad input: clear error, exit 2, no output -------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--target-sparsity", "1.0"], "target_sparsity must be a number between 0 and 1"),
        (["--target-sparsity", "0"], "target_sparsity must be a number between 0 and 1"),
        (["--target-sparsity", "-0.5"], "target_sparsity must be a number between 0 and 1"),
        (["--structure", "2x4"], "not M:N"),
        (["--structure", "4:2"], "0 < M < N"),
        (["--structure", "2:4", "--target-sparsity", "0.75"], "fixes target_sparsity"),
    ],
)
def test_prune_bad_options_exit_2(files, tmp_path, capsys, extra, message):
    out = tmp_path / "p.tflite"
    code, stdout, stderr = _run(capsys, _base(files, "prune", out, *extra))
    assert code == 2
    assert message in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert stdout == ""
    assert not out.exists()


def test_prune_too_few_samples_for_schedule(files, tmp_path, capsys):
    out = tmp_path / "p.tflite"
    argv = _base(files, "prune", out)
    argv[argv.index("--train") + 1] = str(files["tiny"])
    code, _, stderr = _run(capsys, argv)
    assert code == 2
    assert "pruning schedule needs at least" in stderr
    assert not out.exists()


@pytest.mark.parametrize("command", ["qat", "prune", "cluster"])
def test_validation_data_not_matching_model(files, tmp_path, capsys, command):
    out = tmp_path / "x.tflite"
    argv = _base(files, command, out)
    argv[argv.index("--eval") + 1] = str(files["bad_val"])
    code, _, stderr = _run(capsys, argv)
    assert code == 2
    assert "eval data has shape" in stderr
    assert not out.exists()


def test_existing_output_refused_before_training(files, tmp_path, capsys):
    out = tmp_path / "exists.tflite"
    out.write_bytes(b"keep me")
    code, _, stderr = _run(capsys, _base(files, "qat", out))
    assert code == 2
    assert "already exists" in stderr
    assert out.read_bytes() == b"keep me"


def test_subclassed_model_refused(mnist_split):
    import keras

    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.flat = keras.layers.Flatten()
            self.out = keras.layers.Dense(10, activation="softmax")

        def call(self, x):
            return self.out(self.flat(x))

    net = Net()
    net(mnist_split.test.x[:2])
    for verb in (tfcompress.qat, tfcompress.prune, tfcompress.cluster):
        with pytest.raises(tfcompress.UnsupportedModelError, match="subclassed"):
            verb(net, train_data=mnist_split.train, eval_data=mnist_split.test)


def test_custom_layer_refused_by_bridge(mnist_split):
    import keras

    from tfcompress._compat.bridge import to_tf_keras

    @keras.saving.register_keras_serializable(package="tests")
    class Doubler(keras.layers.Layer):
        def call(self, x):
            return x * 2.0

    inputs = keras.Input((28, 28, 1))
    x = Doubler()(inputs)
    outputs = keras.layers.Dense(10)(keras.layers.Flatten()(x))
    model = keras.Model(inputs, outputs)
    with pytest.raises(tfcompress.UnsupportedModelError, match="tf-keras does not provide"):
        to_tf_keras(model, mnist_split.test.x[:4])


def test_gate_options_refused_before_loading(trained_cnn, mnist_split):
    from tfcompress.testing import GateSettings, build_checks

    data = {"train_data": mnist_split.train, "eval_data": mnist_split.test}
    with pytest.raises(tfcompress.InvalidInputError, match="pass the checks too"):
        tfcompress.prune(trained_cnn, gate_settings=GateSettings(mode="tolerant"), **data)
    with pytest.raises(tfcompress.InvalidInputError, match="checks nothing"):
        tfcompress.qat(trained_cnn, gate=[], **data)
    with pytest.raises(tfcompress.InvalidInputError, match="Check objects"):
        tfcompress.cluster(trained_cnn, gate=["max_drop"], **data)  # type: ignore[list-item]
    with pytest.raises(tfcompress.InvalidInputError, match="GateSettings"):
        tfcompress.prune(trained_cnn, gate=build_checks(max_drop=0.01), gate_settings={}, **data)


# A gate flag that cannot apply is refused before any model or data is read: one line on
# stderr, no progress line (prepare logs "losses: ..."), no artifact.
@pytest.mark.parametrize(
    ("command", "extra", "message"),
    [
        ("prune", ["--min-snr", "20", "--metric", "accuracy"], "--min-snr applies to the snr"),
        ("prune", ["--max-drop", "0.01", "--metric", "snr"], "--max-drop applies to task"),
        ("qat", ["--mode", "tolerant"], "--mode sets how the gate judges"),
        ("cluster", ["--metric", "agreement"], "--output and --metric choose what the gate"),
        ("prune", ["--min-agreement", "1.5"], "must be in [0, 1]"),
        ("prune", ["--metric", "f1", "--max-drop", "0.01"], "unknown metric 'f1'"),
    ],
)
def test_bad_gate_options_exit_2_before_work(files, tmp_path, capsys, command, extra, message):
    out = tmp_path / "gated.tflite"
    code, stdout, stderr = _run(capsys, _base(files, command, out, *extra))
    assert code == 2
    assert message in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert stdout == ""
    assert not out.exists()


def test_gate_that_needs_labels_refused_before_training(files, tmp_path, capsys):
    """--max-drop on unlabelled data: found once the data is read, before any fine-tuning."""
    out = tmp_path / "gated.tflite"
    argv = ["prune", str(files["model"]), "--train", str(files["unlabelled"]), "--out", str(out)]
    code, stdout, stderr = _run(capsys, [*argv, "--max-drop", "0.01"])
    assert code == 2
    assert "no output has labels to score one" in stderr, stderr
    assert "fine-tuned" not in stderr  # the training log line never appeared
    assert stdout == ""
    assert not out.exists()


def test_unknown_options_refused(trained_cnn, mnist_split):
    data = {"train_data": mnist_split.train, "eval_data": mnist_split.test}
    with pytest.raises(tfcompress.InvalidInputError, match="schedule"):
        tfcompress.prune(trained_cnn, schedule="cubic", **data)
    with pytest.raises(tfcompress.InvalidInputError, match="then must be null or one of"):
        tfcompress.prune(trained_cnn, then="int4", **data)
    with pytest.raises(tfcompress.InvalidInputError, match="clusters"):
        tfcompress.cluster(trained_cnn, clusters=1, **data)
    with pytest.raises(tfcompress.InvalidInputError, match="preserve"):
        tfcompress.qat(trained_cnn, preserve="zeros", **data)
    with pytest.raises(tfcompress.InvalidInputError, match="learning_rate"):
        tfcompress.qat(trained_cnn, learning_rate=5.0, **data)


# --- happy paths: JSON on stdout, artifact written ---------------------------------------------


@pytest.mark.slow
def test_qat_cli_json(files, tmp_path, capsys):
    out = tmp_path / "qat.tflite"
    code, stdout, _ = _run(capsys, [*_base(files, "qat", out, child=True), "--json"])
    assert code == 0
    data = json.loads(stdout)
    for key in ("output", "size_bytes", "accuracy", "reference_accuracy", "accuracy_drop"):
        assert key in data
    assert data["skipped_layers"] == []
    assert data["output"] == str(out)
    assert out.stat().st_size == data["size_bytes"]
    assert data["accuracy_drop"] <= 0.02
    # Fine-tuned in a child process (the default), BatchNorm frozen, compared with plain PTQ.
    assert data["options"]["freeze_batchnorm"] is True
    assert data["baseline"].startswith("plain post-training int8")
    assert all(o["baseline"] is not None for o in data["outputs"])
    worse = sum(o["worse_than_baseline"] for o in data["outputs"])
    assert len(data["worse_than_baseline"]) == worse


@pytest.mark.slow
def test_prune_cli_json(files, tmp_path, capsys):
    out = tmp_path / "pruned.tflite"
    argv = [*_base(files, "prune", out), "--target-sparsity", "0.75", "--epochs", "2", "--json"]
    code, stdout, _ = _run(capsys, argv)
    assert code == 0
    data = json.loads(stdout)
    keys = ("output", "size_bytes", "gzip_bytes", "reference_gzip_bytes", "sparsity", "accuracy")
    for key in (*keys, "reference_accuracy", "accuracy_drop"):
        assert key in data
    assert data["sparsity"] >= 0.74
    assert data["gzip_bytes"] < data["reference_gzip_bytes"]
    assert out.read_bytes()[4:8] == b"TFL3"


@pytest.mark.slow
def test_cluster_cli_human_output(files, tmp_path, capsys):
    out = tmp_path / "clustered.tflite"
    gate = ["--min-agreement", "0.5", "--mode", "proven"]  # clustering keeps ~95% accuracy
    code, stdout, _ = _run(capsys, [*_base(files, "cluster", out), "--clusters", "8", *gate])
    assert code == 0
    assert "cluster -> float32" in stdout
    assert "gate PASSED (proven)" in stdout and "min_agreement 50.00%" in stdout
    assert f"wrote {out}" in stdout
    assert out.exists()


# --- the gate: the exported .tflite against the float model, exit 1 when it fails -------------

# A 95% prune in one epoch of 20 steps: what a user reported (a 75% prune of an emotion CNN
# went from 100% to 18.7% agreement and exited 0), made certain on the small MNIST CNN.
_HARSH_PRUNE = ["--target-sparsity", "0.95", "--epochs", "1", "--json"]


@pytest.mark.slow
def test_prune_gate_with_labels_fails_exit_1(files, tmp_path, capsys):
    out = tmp_path / "pruned.tflite"
    argv = [*_base(files, "prune", out, *_HARSH_PRUNE), "--max-drop", "0.0"]
    code, stdout, stderr = _run(capsys, argv)
    assert code == 1, stderr
    data = json.loads(stdout)
    assert data["passed"] is False and data["gate"]["passed"] is False
    (check,) = data["gate"]["checks"]  # one output, its labels: accuracy
    assert check["output"] == data["outputs"][0]["output"]
    assert (check["metric"], check["passed"]) == ("accuracy", False)
    assert check["drop"] > 0.0 and check["threshold"] == 0.0
    assert data["gate"]["reference"].endswith("(float)") and data["gate"]["backend"] == "cpu"
    assert out.stat().st_size == data["size_bytes"]  # still written
    assert "gate FAILED" in stderr and "was still written" in stderr


@pytest.mark.slow
def test_prune_gate_without_labels(files, tmp_path, capsys):
    """No labels anywhere (20% held out): agreement and SNR against the float model."""
    out = tmp_path / "pruned.tflite"
    argv = ["prune", str(files["model"]), "--train", str(files["unlabelled"]), "--out", str(out)]
    code, stdout, stderr = _run(
        capsys, [*argv, *_HARSH_PRUNE, "--min-agreement", "0.99", "--min-snr", "-50"]
    )
    assert code == 1, stderr
    data = json.loads(stdout)
    verdicts = {check["metric"]: check for check in data["gate"]["checks"]}
    assert set(verdicts) == {"agreement", "snr"}
    assert verdicts["agreement"]["passed"] is False
    assert verdicts["agreement"]["value"] < 0.99
    assert verdicts["snr"]["passed"] is True  # -50 dB: any model passes
    assert data["passed"] is False
    assert data["outputs"][0]["metric"] == "agreement" and not data["outputs"][0]["labelled"]
    assert out.exists()
