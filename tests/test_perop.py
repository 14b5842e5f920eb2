"""Precision per op (methods/slow_ops.py): the ops int8 makes slower, then the worst, kept float.

The arithmetic on hand-written profiles; then the two models of issue 39, built in code and
trained for seconds on sklearn's digits, through compress with the ladder cut to plain int8 and
the per-op rung: an MTCNN O-Net-shaped model, whose int8 PRELU ops fall back from XNNPACK to
LiteRT's built-in kernels (found op by op, kept float on purpose), and the 8x8-digits model
with a LayerNormalization, where compress used to return float16; and ``quantize --methods
per-op`` (methods/per_op.py) on a small conv + PReLU net. Nothing here asserts a
timing: what is asserted is read from the files (which ops compute in float, where XNNPACK
placed them) and from their sizes; "not slower than float32" is the search's own rule.
"""

from __future__ import annotations

import re

import pytest

import tfcompress
from tfcompress.data import Dataset
from tfcompress.quantization.float_ops import find_float_ops
from tfcompress.quantization.methods.slow_ops import (
    FLOOR_MS,
    OP_FLOOR_MS,
    Latency,
    describe,
    plan_steps,
    short,
    slow_ops,
    too_slow,
)


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
    held = re.fullmatch(r"int8 \((.+) float\)( \+ equalize)?", chosen.name)
    assert held is not None, chosen.name
    counts = {op: int(n) for n, op in (part.split(" ") for part in held.group(1).split(", "))}
    assert counts.get("PRELU", 0) >= 4, chosen.name
    assert "in int8 vs" in chosen.notes[0] and "x float32's" in chosen.notes[0]
    assert find_float_ops(result.model_content).count("PRELU") == counts["PRELU"]
    # Every op kept float was timed slower in int8 here: the PRELUs on any CPU; on some (an
    # AMD EPYC) a CONV_2D of few input channels too, and the file is larger by its weights.
    for op in counts:
        assert re.search(rf"\({op} [\d.]+ us in int8 vs", chosen.notes[0]), (op, chosen.notes)
    assert chosen.size_bytes < 0.5 * result.float32_bytes  # under float16's: the climb's end
    if set(counts) == {"PRELU"}:
        assert chosen.size_bytes < 1.02 * int8.size_bytes  # the alphas only
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


@pytest.fixture(scope="module")
def prelu_net(tmp_path_factory):
    """A small conv + PReLU net (random weights, seeded), saved, with calibration samples."""
    import numpy as np

    from tfcompress._compat.keras import KerasFlavour, keras_module

    keras = keras_module(KerasFlavour.KERAS3)
    keras.utils.set_random_seed(0)
    layers = keras.layers
    inputs = keras.Input((32, 32, 3), name="image")
    x = inputs
    for index, filters in enumerate((16, 16)):
        x = layers.Conv2D(filters, 3, name=f"conv{index}")(x)
        x = layers.PReLU(shared_axes=[1, 2], name=f"prelu{index}")(x)
    # Most weights in a Dense, whose int8 kernel is fast on every CPU: the convs kept float
    # where a CPU runs them slower in int8 (an AMD EPYC) leave the file int8-sized.
    outputs = layers.Dense(4, name="head")(layers.Dense(32)(layers.Flatten()(x)))
    root = tmp_path_factory.mktemp("prelu")
    keras.Model(inputs, outputs).save(root / "prelu.keras")
    x = np.random.default_rng(0).uniform(0, 1, (32, 32, 32, 3)).astype(np.float32)
    np.savez(root / "calib.npz", x=x)
    return root


@pytest.mark.slow
def test_quantize_method_per_op_keeps_the_prelu_float(prelu_net, tmp_path, capfd) -> None:
    """``quantize --methods per-op``: the PRELU ops XNNPACK has no int8 kernel for stay float."""
    import json

    from tfcompress.cli import main

    out = tmp_path / "per_op.tflite"
    argv = ["quantize", str(prelu_net / "prelu.keras"), "--data", str(prelu_net / "calib.npz")]
    bar = ["--per-op-min-snr", "24"]  # PerOpBar's field as a flag: it reaches the climb
    assert main([*argv, "--methods", "per-op", *bar, "--out", str(out), "--json"]) == 0
    report = json.loads(capfd.readouterr().out)["methods"]
    (kept,) = report["kept"]
    assert re.fullmatch(r"int8 \(2 PRELU(, \d+ [A-Z_0-9]+)* float\)( \+ equalize)?", kept), kept
    step = next(c for c in report["candidates"] if c["methods"] == [kept])
    # The method's own measurement: good enough and not slower than float32.
    assert report["reason"].startswith("it reaches the 24 dB bar"), report["reason"]
    ratio = re.search(r"\((\d+\.\d+)x float32's [\d,]+ B\)", report["reason"])
    assert ratio is not None and float(ratio.group(1)) < 1.0, report["reason"]
    assert step["latency_ms"] > 0 and step["size_bytes"] > report["plain"]["size_bytes"]
    assert find_float_ops(out.read_bytes()).count("PRELU") == 2
    bad = tmp_path / "x.tflite"
    for method, flags, says in (
        ("per-op", ["--target", "mcu"], "times every op on LiteRT's CPU"),
        ("per-op,mse-ranges", [], "combines with no other method"),
        ("per-op", ["--integer-only"], "chooses the ops kept float itself: drop --integer-only"),
    ):
        assert main([*argv, "--methods", method, *flags, "--out", str(bad)]) == 2
        err = capfd.readouterr().err
        assert says in err.strip().splitlines()[-1] and "Traceback" not in err


@pytest.mark.slow
def test_the_rung_ranks_the_ops_of_the_int8_file_it_changes(onet) -> None:
    """compress's per-op rung ranks the converter's plain int8, the file its steps change: the
    PRELU ops are measured there (LiteRT Quantizer's file keeps them float, and on the real
    O-Net the ops after them then ranked first for the noise they only carry), and an op that
    adds no noise of its own (the Flatten's RESHAPE copies int8 values) is not ranked."""
    from types import SimpleNamespace

    from tfcompress.compression.perop import _ranked
    from tfcompress.quantization.methods.slow_ops import opcodes_of

    model, calib, test = onet
    reference = tfcompress.quantize(model, recipe="float32").model_content
    int8 = tfcompress.quantize(model, recipe="int8", representative_data=calib).model_content
    ops = opcodes_of(reference)
    assert "RESHAPE" in ops.values()
    ranked = [
        ops[name] for name in _ranked(SimpleNamespace(eval_set=test, seed=0), int8, reference)
    ]
    assert "PRELU" in ranked and "RESHAPE" not in ranked, ranked


def test_per_op_keeps_plain_int8_unless_a_step_is_faster_or_nearer_the_bar() -> None:
    """The choice of ``--methods per-op`` on made candidates (the real emotion classifier's and
    O-Net's numbers, docs/benchmarks.md): a step is kept over plain int8 only for being faster
    beyond the timings' noise; when none reaches the bar, the nearest to it under float16's
    size."""
    from types import SimpleNamespace

    from tfcompress.quantization.methods.per_op import PerOpBar, _Climb

    def made(snr: float, size: int, ms: float) -> SimpleNamespace:
        return SimpleNamespace(error=None, worst_snr=snr, size_bytes=size, label=f"{snr} dB",
                               latency_ms=Latency(ms, 0.002))  # fmt: skip

    climb = object.__new__(_Climb)
    climb.gate, climb.bar, climb.float_ms = None, PerOpBar(), Latency(0.389, 0.002)
    climb.reference = SimpleNamespace(content=bytes(239_392))
    plain, same_speed, faster = (
        made(26.3, 102_304, 0.2416),
        made(26.7, 102_712, 0.2413),
        made(26.7, 102_712, 0.12),
    )
    for step, kept in ((same_speed, plain), (faster, faster)):
        climb.steps = [(step, b"", ())]
        chosen, why = climb._choose(plain)
        assert chosen is kept and why.startswith("it reaches the 25 dB bar"), why
    climb.reference = SimpleNamespace(content=bytes(1_564_316))
    slow_plain = made(22.4, 414_136, 0.89)  # int8 PRELU: slower than float32
    steps = [made(22.7, 416_720, 0.128), made(24.1, 418_168, 0.14), made(24.9, 800_000, 0.36)]
    climb.steps = [(step, b"", ()) for step in steps]
    chosen, why = climb._choose(slow_plain)
    assert chosen is steps[1] and "kept 24.1 dB, the nearest to it" in why, why


def test_the_per_op_bar_is_one_declared_option() -> None:
    from tfcompress._config_fields import declared_options
    from tfcompress.errors import InvalidInputError
    from tfcompress.quantization.methods.per_op import PerOpBar

    declared = declared_options("quantization.methods.per_op", "PerOpBar")["per_op_min_snr"]
    assert declared.default == PerOpBar().per_op_min_snr == 25.0 and declared.unit == "dB"
    for bad in (float("nan"), "25", True):
        with pytest.raises(InvalidInputError, match="per_op_min_snr must be a finite number"):
            PerOpBar(per_op_min_snr=bad)
