"""compress on a float16 ``.tflite``: sizes are compared with the file given, never larger.

MediaPipe ships float16 files (float16 weights behind DEQUANTIZE ops); LiteRT Quantizer
reads them widened to float32. compress once returned a float16 file larger than the file
given, reported as "0.51x float32" against the widened copy.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tfcompress.cli import main
from tfcompress.compression.attempts import Attempt
from tfcompress.compression.bounds import SizeBound
from tfcompress.compression.candidates import Rung
from tfcompress.compression.result import CompressionResult
from tfcompress.compression.search import SearchState
from tfcompress.samples.sensitive import sensitive_model

INPUT = "the input .tflite"


def _state(**fields) -> SearchState:
    return SearchState(
        reference=None, eval_set=None, representative=None, train_data=None, checks=(),
        settings=None, objective="size", target="cpu", threads=1, measure=False, seed=0,
        progress=False, deadline=None, **fields,
    )  # fmt: skip


def test_nothing_larger_than_the_file_given_is_chosen_or_made():
    state = _state(float32=b"f" * 200, baseline=b"h" * 100, baseline_name=INPUT)
    why = state.too_big(150, "ptq", {"recipe": {"name": "float16"}})
    assert why == f"its 150 B are not smaller than {INPUT} (100 B)"  # not the widened 200 B
    assert state.too_big(99, "ptq", {"recipe": {"name": "int8"}}) is None
    # float16 of the widened file cannot be smaller than a float16 input: never made.
    state.float16_size = SizeBound(104, 90, "float32 200 B with its weights at half size")
    float16 = Rung("float16", "ptq", {"name": "float16"}, "float16")
    assert state.beaten(float16) == (
        f"float16 would be at least 104 B (float32 200 B with its weights at half size), not "
        f"smaller than {INPUT} (100 B)"
    )
    keras_model = _state(float32=b"f" * 200)  # a Keras model: the float32 file, as before
    assert "not smaller than the float32 file (200 B)" in keras_model.too_big(
        250, "ptq", {"name": "int8"}
    )


def test_ratios_are_against_the_file_given():
    chosen = Attempt(1, "int8", "ptq", {}, "passed", "gate PASSED", size_bytes=25, gzip_bytes=20)
    result = CompressionResult(
        chosen=chosen, model_content=b"x" * 25, attempts=(chosen,), objective="size",
        target="cpu", float32_bytes=200, float32_gzip_bytes=180, gate={}, stop_reason="done",
        baseline=INPUT, baseline_bytes=100,
    )  # fmt: skip
    assert result.to_dict()["chosen"]["size_ratio"] == 0.25
    assert result.to_dict()["baseline_bytes"] == 100
    assert f"25 B (0.25x {INPUT}'s 100 B)" in str(result)
    plain = CompressionResult(
        chosen=chosen, model_content=b"x" * 25, attempts=(chosen,), objective="size",
        target="cpu", float32_bytes=100, float32_gzip_bytes=90, gate={}, stop_reason="done",
    )  # fmt: skip
    assert "(0.25x float32 100 B)" in str(plain) and plain.to_dict()["baseline_bytes"] == 100


@pytest.mark.slow
def test_a_float16_input_is_the_baseline_of_sizes(tmp_path, capsys):
    import keras

    from tfcompress.quantization.ptq import quantize

    model, (calib, (x, y)) = sensitive_model(keras, outlier=0.0)  # int8 passes its gate
    np.savez(tmp_path / "calib.npz", x=calib[:200])
    np.savez(tmp_path / "test.npz", x=x[:300], y=y[:300])
    given = tmp_path / "float16.tflite"
    quantize(model, recipe="float16", representative_data=calib[:50]).save(given)
    data, test, rep = (str(tmp_path / n) for n in ("calib.npz", "test.npz", "rep"))
    code = main(["compress", str(given), "--data", data, "--eval", test, "--max-drop", "0.05",
                 "--no-measure-latency", "--report", rep,
                 "--out", str(tmp_path / "o.tflite")])  # fmt: skip
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "rep" / "compress.json").read_text())
    size = given.stat().st_size
    assert code == 0 and report["baseline"] == INPUT and report["baseline_bytes"] == size
    assert report["float32_bytes"] > size  # the widened copy LiteRT Quantizer read
    chosen = report["chosen"]
    assert chosen["size_bytes"] < size
    assert chosen["size_ratio"] == round(chosen["size_bytes"] / size, 4)
    assert f"x {INPUT}'s {size:,} B" in out
    for attempt in report["attempts"]:  # nothing larger than the file given passed
        assert attempt["status"] != "passed" or attempt["size_bytes"] < size
