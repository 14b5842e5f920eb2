"""A dynamic-batch SavedModel whose RNN needs a static batch: the advised fix works.

A SavedModel's LSTM keeps the exported dynamic batch in its tensor lists (a constant
``element_shape``), so re-tracing its signature at a static batch does not reach them; the
converter's single-batch switch does, at ``--static-batch 1``, the batch the message advises.
"""

from __future__ import annotations

import json

import numpy as np

from tfcompress.cli import main
from tfcompress.models.tflite_file import read_tflite
from tfcompress.samples.troublemakers import static_batch_lstm


def test_the_static_batch_the_message_advises_converts_a_saved_model(tmp_path, capsys) -> None:
    saved = tmp_path / "lstm_saved_model"
    static_batch_lstm().export(str(saved), verbose=False)  # dynamic batch, no Keras metadata
    x = np.random.default_rng(0).integers(0, 30, (16, 20)).astype(np.int32)
    np.savez(tmp_path / "calib.npz", x=x)
    argv = ["quantize", str(saved), "--recipe", "dynamic", "--data", str(tmp_path / "calib.npz")]
    assert main([*argv, "--out", str(tmp_path / "a.tflite")]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "SavedModel" in error and "--static-batch 1" in error and "--batch-size" not in error
    out = tmp_path / "c.tflite"
    code = main([*argv, "--static-batch", "1", "--out", str(out), "--json"])
    assert code == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["recipe"]["static_batch"] == 1
    graph = read_tflite(out.read_bytes()).subgraphs[0]
    assert graph.tensors[graph.inputs[0]].signature[0] == 1  # the file's batch is static
