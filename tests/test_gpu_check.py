"""``tfcompress gpu`` / ``tfcompress.gpu.check``: the static verdict offline, the fix by layer.

CI has no GPU: the verb's static verdict and exit codes are checked here, and the numeric
comparison is checked between two CPU backends (the same code compares the GPU where LiteRT
finds one); the ``gpu``-marked test compiles on a GPU where there is one.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import tfcompress.gpu
from tfcompress.cli import main


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Three tiny files: one the GPU runs whole, one that falls back, one it refuses."""
    import keras
    import tensorflow as tf

    layers = keras.layers
    folder = tmp_path_factory.mktemp("gpu_check")

    def write(name, x, y):
        content = tf.lite.TFLiteConverter.from_keras_model(keras.Model(x, y)).convert()
        (folder / f"{name}.tflite").write_bytes(content)
        return folder / f"{name}.tflite"

    x = layers.Input((6, 32), batch_size=1)
    whole = write("whole", x, layers.Dense(4)(layers.LayerNormalization()(x)))
    x = layers.Input((10,), batch_size=1)
    argmax = layers.Lambda(lambda v: tf.argmax(v, axis=-1), name="pick")
    falls_back = write("argmax", x, argmax(layers.Dense(10)(x)))
    x = layers.Input((4, 4, 3))
    refused = write("dynamic", x, layers.Dense(2)(layers.Flatten()(x)))
    return {"whole": whole, "falls back": falls_back, "refused": refused}


@pytest.mark.gpu
def test_the_verb_says_whole_falls_back_or_refused_and_exits_like_mcu(files, capsys):
    payloads = {}
    for verdict, path in files.items():
        code = main(["gpu", str(path), "--json", "--require-compatible"])
        payloads[verdict] = payload = json.loads(capsys.readouterr().out)
        assert payload["verdict"] == verdict and code == (verdict != "whole"), payload
        assert payload["static_check"]["rules"].startswith("google-ai-edge/LiteRT@")
        if payload["checked"] == "static":  # no GPU here: said, and no numbers made up
            assert payload["numerics"] is None and payload["numerics_skipped"] == "no GPU here"
        elif payload["numerics"] is not None:  # compiled and run on a GPU here
            assert set(payload["numerics"]["max_abs_difference"]) and payload["fully_accelerated"]
    [fix] = payloads["falls back"]["fixes"]
    assert fix["what"] == "layer pick (ARG_MAX)" and "output_type=tf.int32" in fix["fix"]
    assert payloads["whole"]["fix"] is None and payloads["whole"]["fixes"] == []
    assert main(["gpu", str(files["refused"]), "--require-compatible"]) == 1
    out = capsys.readouterr()
    assert "static verdict: refused" in out.out and "nothing runs on it" in out.out
    assert "numeric check:" in out.out
    assert "--static-batch 1" in out.err and "the GPU would not run the whole model" in out.err


def test_the_verb_refuses_bad_input_in_one_line(files, tmp_path, capsys):
    not_a_model = tmp_path / "notes.tflite"
    not_a_model.write_bytes(b"not a model")
    assert main(["gpu", str(not_a_model)]) == 2
    assert main(["gpu", str(files["whole"]), "--samples", "0"]) == 2
    assert main(["gpu", str(files["whole"]), "--max-diff", "-1"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 3 and all(line.startswith("tfcompress gpu: error: ") for line in errors)


def test_the_numeric_check_reports_the_max_abs_difference_per_output(files):
    """The comparison the verb runs on a GPU, here between LiteRT's two CPU routes."""
    from tfcompress.models.loading import TFLiteModel
    from tfcompress.targets.gpu.check import compare_backends

    model = TFLiteModel(files["whole"].read_bytes(), label="whole.tflite", verified=True)
    samples = [np.random.default_rng(0).normal(size=(3, 6, 32)).astype(np.float32)]
    numerics = compare_backends(model, samples, "normal", backend="cpu-compiled")
    assert (numerics.samples, numerics.backend, numerics.reference) == (3, "cpu-compiled", "cpu")
    [(name, difference)] = numerics.max_abs_difference.items()
    assert name and 0 <= difference < 1e-4
    assert f"max |difference| {name}" in str(numerics)


def test_the_library_function_matches_the_verb(files):
    report = tfcompress.gpu.check(files["refused"], timeout_s=120)
    assert report.support.verdict == "refused" and not report.compatible
    assert report.support.dynamic_tensors[0].from_dynamic_batch
    assert report.to_dict()["fix"].startswith("make it with `tfcompress quantize MODEL --target")
