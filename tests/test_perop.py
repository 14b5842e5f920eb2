"""Precision per op (compression/perop.py): the ops int8 makes slower, then the worst, kept float.

The arithmetic on hand-written profiles; then the two models of issue 39, built in code and
trained for seconds on sklearn's digits, through compress with the ladder cut to plain int8 and
the per-op rung: an MTCNN O-Net-shaped model, whose int8 PRELU ops fall back from XNNPACK to
LiteRT's built-in kernels (found op by op, kept float on purpose), and the 8x8-digits model
with a LayerNormalization, where compress used to return float16. Nothing here asserts a
timing: what is asserted is read from the files (which ops compute in float, where XNNPACK
placed them) and from their sizes; "not slower than float32" is the search's own rule.
"""

from __future__ import annotations

import re

import pytest

import tfcompress
from tfcompress.compression.latency import FLOOR_MS, Latency, too_slow
from tfcompress.compression.perop import OP_FLOOR_MS, describe, plan_steps, short, slow_ops
from tfcompress.data import Dataset
from tfcompress.quantization.float_ops import find_float_ops


def _op(output: str, op: str, ms: float, spread: float = 0.0) -> dict:
    return {"output": output, "op": op, "ms": ms, "spread_ms": spread}


def test_slow_ops_match_renamed_outputs_and_respect_the_noise() -> None:
    floats = {"ops": [
        _op("conv", "CONV_2D", 0.030), _op("prelu", "PRELU", 0.008),
        _op("out:0", "FULLY_CONNECTED", 0.001), _op("tiny", "ADD", 0.0001),
    ]}  # fmt: skip
    int8 = {"ops": [
        _op("tfl.quantize", "QUANTIZE", 0.001),  # the input's: nobody's op
        _op("conv", "CONV_2D", 0.040, spread=0.02),  # slower, but within the spread
        _op("prelu", "PRELU", 0.380, spread=0.01),
        _op("out:01", "FULLY_CONNECTED", 0.002),  # the converter's renamed output op ...
        _op("out:0", "DEQUANTIZE", 0.003),  # ... and the DEQUANTIZE that took its name
        _op("tiny", "ADD", 0.0001 + OP_FLOOR_MS / 2),  # under the floor
    ]}  # fmt: skip
    found = slow_ops(floats, int8)
    assert [(s.name, s.op) for s in found] == [("prelu", "PRELU"), ("out:0", "FULLY_CONNECTED")]
    assert found[1].int8_ms == pytest.approx(0.005)  # the op and its DEQUANTIZE
    assert str(found[0]) == "PRELU 380.0 us in int8 vs 8.0 us in float"
    # An op the int8 file already computes in float has nothing to gain.
    assert [s.name for s in slow_ops(floats, int8, already_float=["prelu"])] == ["out:0"]


def test_steps_names_and_the_slowdown_rule() -> None:
    assert plan_steps(["a"], ["b", "a", "c", "d", "e", "f"]) == [
        ("a",), ("a", "b"), ("a", "b", "c"), ("a", "b", "c", "d", "e"),
        ("a", "b", "c", "d", "e", "f"),
    ]  # fmt: skip
    assert plan_steps([], []) == []
    codes = {"p1": "PRELU", "p2": "PRELU", "c": "CONV_2D"}
    assert describe(["p1", "c", "p2"], codes) == "int8 (2 PRELU, 1 CONV_2D float)"
    assert short("m/prelu/add;m/prelu/Relu") == "m/prelu/add"
    # Slower only beyond both timings' intervals and the floor; a plain number: 10% over.
    assert too_slow(Latency(2.0, 0.1), Latency(1.0, 0.1), 1.0)
    assert not too_slow(Latency(1.3, 0.3), Latency(1.0, 0.2), 1.0)
    assert not too_slow(Latency(0.010 + FLOOR_MS * 0.9, 0.0), Latency(0.010, 0.0), 1.0)
    assert too_slow(Latency(0.010 + FLOOR_MS * 1.1, 0.0), Latency(0.010, 0.0), 1.0)
    assert too_slow(1.2, 1.0, 1.0) and not too_slow(1.05, 1.0, 1.0)


def test_files_are_labelled_by_the_ops_they_hold() -> None:
    from collections import Counter

    from tfcompress.bench.size import _with_op_counts, precision_family

    assert _with_op_counts("int8", Counter({"int8": 20})) == "int8"
    assert _with_op_counts("int8", Counter({"int8": 20, "float": 5})) == "int8 + 5 float"
    # One op in int16 is not an int16x8 file (the old label of issue 39's O-Net file).
    assert _with_op_counts("int16x8", Counter({"int8": 19, "int16": 1})) == "int8 + 1 int16"
    assert _with_op_counts("int16x8", Counter({"int16": 12})) == "int16x8"
    assert _with_op_counts("dynamic", Counter({"float": 3})) == "dynamic"
    assert precision_family("int8 + 5 float") == "mixed" and precision_family("int8") == "int8"


def _int8_and_per_op(monkeypatch) -> None:
    """compress with only plain int8 and the per-op rung (the rest is tested elsewhere)."""
    from tfcompress.compression import api

    real = api.plan_ladder
    monkeypatch.setattr(
        api, "plan_ladder",
        lambda **options: tuple(r for r in real(**options) if r.name in ("int8", "per-op")),
    )  # fmt: skip


@pytest.fixture(scope="module")
def split():
    from tfcompress.samples.datasets import digits

    return digits(seed=0)


@pytest.fixture(scope="module")
def onet(split):
    from tfcompress.samples.face_nets import onet_data, trained_onet

    train = onet_data(Dataset(split.train.x[:400], split.train.y[:400]))
    test = onet_data(Dataset(split.test.x[:100], split.test.y[:100]))
    return trained_onet(train, epochs=1), Dataset(train.x[:64]), Dataset(test.x)


@pytest.mark.slow
def test_onet_keeps_its_prelu_float_on_purpose(onet, monkeypatch) -> None:
    _int8_and_per_op(monkeypatch)
    model, calib, test = onet
    result = tfcompress.compress(model, representative_data=calib, eval_data=test, min_snr=20.0)
    int8, *steps = result.attempts
    chosen = result.chosen
    assert chosen is not None and chosen is steps[0], str(result)
    # The speed step: every PRELU, which the plain int8 file runs on built-in kernels
    # (XNNPACK has no int8 PRELU), kept float; the name says what the file holds.
    # (The last PRELU, 256 values, costs under a microsecond either way: it may or may not
    # clear the per-op floor on a busy machine; the four on feature maps always do.)
    held = re.fullmatch(r"int8 \((.+) float\)", chosen.name)
    assert held is not None, chosen.name
    counts = {op: int(n) for n, op in (part.split(" ") for part in held.group(1).split(", "))}
    assert counts.get("PRELU", 0) >= 4, chosen.name
    assert "in int8 vs" in chosen.notes[0] and "x float32's" in chosen.notes[0]
    assert find_float_ops(result.model_content).count("PRELU") == counts["PRELU"]
    assert chosen.size_bytes < 0.3 * result.float32_bytes  # int8-class: weights int8
    assert chosen.size_bytes < 1.02 * int8.size_bytes
    # Plain int8 passed the gate and was refused as slower; the per-op file was not.
    assert int8.gate["passed"] and not int8.passed and "ms/sample is" in int8.why
    # benchmark labels the file by what it holds, read from the file.
    from tfcompress.bench.size import measure_size
    from tfcompress.models import TFLiteModel

    size = measure_size(TFLiteModel(result.model_content, label="x", verified=True))
    assert size.precision.startswith("int8 +") and "float" in size.precision


@pytest.mark.slow
def test_layer_norm_digits_returns_int8_size(split, monkeypatch) -> None:
    from tfcompress.samples.troublemakers import layer_norm_classifier

    _int8_and_per_op(monkeypatch)
    model = layer_norm_classifier(split.train, epochs=4)
    result = tfcompress.compress(
        model, representative_data=split.train.x[:200], eval_data=split.test, max_drop=0.02
    )
    chosen = result.chosen
    assert chosen is not None and chosen.passed, str(result)
    assert chosen.size_bytes < 0.35 * result.float32_bytes  # float16 would be ~0.5x
    assert "NEG" in find_float_ops(result.model_content)  # the converter's default fallback
