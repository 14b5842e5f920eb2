"""The post-training methods decided by the user's gate, and honest on SavedModels.

The keep rule and the plan run on hand-made candidates (no TensorFlow); one small Keras
model (random weights, 8x8 digits) and its SavedModel export run the rest end to end.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import tfcompress
from tfcompress.cli import main
from tfcompress.errors import InvalidInputError
from tfcompress.quantization.methods.catalog import (
    AUTO_CANDIDATES,
    auto_if_plain_fails,
    plan_candidates,
    refuse_unrunnable,
    runnable_candidates,
)
from tfcompress.quantization.methods.report import Candidate, GateMargin, OutputFidelity
from tfcompress.quantization.methods.selection import (
    SIZE_SLACK,
    check_methods_gate,
    choose,
    scaled_margin,
)
from tfcompress.testing import GateConfig


def _snr_margin(output: str, snr: float, threshold: float) -> GateMargin:
    margin = snr - threshold
    return GateMargin(
        output, "snr", "min_snr", snr, threshold, margin >= 0, margin, margin, f"{margin:+.2f} dB"
    )


def _gated(methods, snrs, thresholds, size=100_000) -> Candidate:
    outputs = [f"head{i}" for i in range(len(snrs))]
    return Candidate(
        tuple(methods),
        tuple(OutputFidelity(o, s, None) for o, s in zip(outputs, snrs, strict=True)),
        size_bytes=size,
        gate=tuple(_snr_margin(o, s, t) for o, s, t in zip(outputs, snrs, thresholds, strict=True)),
    )


GATES = (22.0, 20.0, 20.0)  # face, box, landmarks


def test_the_weakest_head_decides_not_every_head():
    """O-Net's case: +2 dB on the heads near the gate beats -0.5 dB on a head 15 dB above it."""
    plain = _gated((), (37.0, 21.0, 20.5), GATES)
    lifted = _gated(("equalize",), (36.5, 22.9, 22.5), GATES)
    index, reason = choose(plain, [lifted], gated=True)
    assert index == 0
    assert "equalize passes every gate, worst margin +2.50 dB" in reason
    assert "plain int8's +0.50 dB" in reason


def test_a_candidate_that_fails_the_gate_is_never_kept_over_plain_that_passes():
    plain = _gated((), (37.0, 21.0, 20.5), GATES)
    failing = _gated(("mse-ranges",), (40.0, 30.0, 19.9), GATES)  # better mean, one head fails
    index, reason = choose(plain, [failing], gated=True)
    assert index is None and "plain int8 passes every gate" in reason


def test_passing_is_what_counts_when_plain_int8_fails():
    plain = _gated((), (37.0, 19.6, 20.5), GATES)
    candidate = _gated(("percentile-ranges",), (30.0, 20.4, 20.1), GATES)
    index, reason = choose(plain, [candidate], gated=True)
    assert index == 0 and "vs plain int8's -0.40 dB (head1 snr)" in reason


def test_smallest_passing_first_then_margin_and_sizes_within_tolerance_are_equal():
    plain = _gated((), (30.0, 25.0, 25.0), GATES, size=100_000)
    near = _gated(("a",), (30.0, 28.0, 28.0), GATES, size=100_000 - SIZE_SLACK + 1)
    smaller = _gated(("b",), (30.0, 21.0, 21.0), GATES, size=50_000)
    assert choose(plain, [near], gated=True)[0] == 0  # same size: the larger margin wins
    index, reason = choose(plain, [near, smaller], gated=True)
    assert index == 1 and "50,000 bytes vs plain int8's 100,000" in reason


def test_plain_int8_wins_ties_and_the_closest_is_kept_when_none_passes():
    plain = _gated((), (30.0, 21.0, 21.0), GATES)
    same = _gated(("a",), (30.0, 21.0, 21.0), GATES)
    assert choose(plain, [same], gated=True)[0] is None
    failing_plain = _gated((), (30.0, 15.0, 21.0), GATES)
    closer = _gated(("b",), (30.0, 18.0, 21.0), GATES)
    farther = _gated(("c",), (30.0, 12.0, 25.0), GATES)
    index, reason = choose(failing_plain, [farther, closer], gated=True)
    assert index == 1 and reason.startswith("no candidate passes every gate; b comes closest")
    not_made = Candidate(("d",), error="could not be cloned")
    assert choose(plain, [not_made], gated=True)[0] is None


def test_without_a_gate_the_best_weakest_output_wins():
    plain = Candidate((), (OutputFidelity("a", 40.0, None), OutputFidelity("b", 20.0, None)))
    lifted = Candidate(("x",), (OutputFidelity("a", 30.0, None), OutputFidelity("b", 22.0, None)))
    tied = Candidate(("y",), (OutputFidelity("a", 45.0, None), OutputFidelity("b", 20.0, None)))
    assert choose(plain, [tied])[0] is None  # plain int8 wins ties
    index, reason = choose(plain, [tied, lifted])
    assert index == 1 and "22.00 dB (b)" in reason and "20.00 dB (b)" in reason


def test_margins_of_different_metrics_share_one_scale():
    # 3 dB inside --min-snr counts as much as 3 points inside --max-drop
    assert scaled_margin(3.0, "dB", 20.0) == pytest.approx(scaled_margin(0.03, "fraction", 0.01))
    assert scaled_margin(float("nan"), "dB", 20.0) == -np.inf


def test_the_plan():
    # eval data alone: the converter's plain int8; asked: auto; a gate: auto if plain fails
    assert plan_candidates("int8", (), None, has_eval=True) == ((), False)
    assert plan_candidates("int8", (), "auto", has_eval=True) == (AUTO_CANDIDATES, True)
    assert auto_if_plain_fails("int8", (), None, has_eval=True, gated=True)
    assert not auto_if_plain_fails("int8", (), "none", has_eval=True, gated=True)
    assert not auto_if_plain_fails("int8", (), None, has_eval=False, gated=True)
    assert ("mse-ranges",) in AUTO_CANDIDATES and ("percentile-ranges",) in AUTO_CANDIDATES
    # On a SavedModel: only what does not need a Keras model runs, the rest says why.
    kept, skipped = runnable_candidates(AUTO_CANDIDATES, "it is a SavedModel")
    assert ("mse-ranges",) in kept and all("equalize" not in c for c in kept)
    assert skipped and all("equalize" in why and "a Keras model" in why for _, why in skipped)
    # Said when planning, before anything ran: a budget may skip the rest later (basic-pitch:
    # "the rest is bias-correction, tried already" above "bias-correction: skipped (budget)").
    assert all("tried" not in why for _, why in skipped)
    assert all(tuple(why.split("; ")[1].split()[0].split("+")) in kept for _, why in skipped)
    with pytest.raises(InvalidInputError, match="needs a Keras model") as refused:
        refuse_unrunnable(("equalize", "mse-ranges"), "it is a SavedModel", source="hed")
    assert "mse-ranges" in str(refused.value) and "\n" not in str(refused.value)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A small random-weight CNN on 8x8 digits, its .keras and SavedModel files and data."""
    import keras
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images[:, :, :, None] / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8, 8, 1))
    h = keras.layers.Conv2D(8, 3, activation="relu")(inputs)
    h = keras.layers.BatchNormalization()(h)
    h = keras.layers.Flatten()(h)
    model = keras.Model(inputs, keras.layers.Dense(10, activation="softmax", name="digit")(h))
    root = tmp_path_factory.mktemp("gated")
    model.save(root / "small.keras")
    model.export(str(root / "small_savedmodel"), verbose=False)
    np.savez(root / "calib.npz", x=x[:64])
    np.savez(root / "test.npz", x=x[1000:1100], y=y[1000:1100])
    return model, x, root


def _quantize(capfd, root, *extra):
    out = root / "out.tflite"
    argv = ["quantize", str(root / "small.keras"), "--data", str(root / "calib.npz")]
    argv += ["--eval", str(root / "test.npz"), "--out", str(out), "--force", "--json", *extra]
    code = main(argv)
    captured = capfd.readouterr()
    return code, json.loads(captured.out) if captured.out else None, captured.err, out


def test_gate_decides_when_auto_runs_through_the_cli(capfd, small):
    _, _, root = small
    # plain int8 passes: it is written, the methods cost nothing but its scoring
    code, report, err, out = _quantize(capfd, root, "--min-snr", "5")
    assert code == 0, err
    methods = report["methods"]
    assert methods["why_run"] == "plain int8 passed the gate: auto not run"
    assert methods["candidates"] == [] and methods["kept"] == []
    assert report["size_bytes"] == methods["plain"]["size_bytes"] == out.stat().st_size
    assert methods["plain"]["passes"] is True
    # plain int8 fails: auto runs, judged by the same gate; the gate still fails (exit 1)
    code, report, err, out = _quantize(capfd, root, "--min-snr", "200")
    assert code == 1 and out.exists()
    methods = report["methods"]
    assert methods["why_run"] == "plain int8 failed the gate" and methods["gated"]
    tried = [c["methods"] for c in methods["candidates"]]
    budgeted = [s["methods"] for s in methods["skipped"]]
    # most payoff per cost first; what auto's budget would not pay for is skipped and said,
    # never dropped
    made_or_not = sorted(tuple(m) for m in [*tried, *(m.split("+") for m in budgeted)])
    assert made_or_not == sorted(AUTO_CANDIDATES)
    assert all("auto's budget 1.5x plain int8" in s["why"] for s in methods["skipped"])
    assert all(c["passes"] is False and c["gate"] for c in methods["candidates"])
    seconds = methods["seconds"]
    assert seconds["total"] >= seconds["plain"] > 0 and len(seconds["candidates"]) == len(tried)
    assert seconds["budget"] > 0


def test_savedmodel_tries_what_can_run_and_refuses_what_cannot(capfd, small, monkeypatch):
    from tfcompress.quantization.methods import apply

    _, x, root = small
    saved = root / "small_savedmodel"
    monkeypatch.setattr(apply, "AUTO_BUDGET", float("inf"))  # what runs, whatever it costs
    result = tfcompress.quantize(
        str(saved), representative_data=x[:64], eval_data=x[1000:1100], methods="auto"
    )
    report = result.methods
    tried = [c.methods for c in report.candidates]
    assert ("mse-ranges",) in tried and ("percentile-ranges",) in tried
    assert all(c.error is None and "equalize" not in c.methods for c in report.candidates)
    assert {label for label, _ in report.skipped} >= {"equalize+bias-correction"}
    assert result.model_content  # one of them, or plain int8, byte for byte

    # Named explicitly: one line, exit 2, before any conversion (nothing converts here).
    def no_conversion(*args, **kwargs):
        raise AssertionError("converted before refusing")

    monkeypatch.setattr("tfcompress.quantization.methods.apply.convert_all", no_conversion)
    monkeypatch.setattr("tfcompress.quantization.converter_ptq.convert_all", no_conversion)
    capfd.readouterr()
    out = root / "refused.tflite"
    argv = ["quantize", str(saved), "--data", str(root / "calib.npz"), "--out", str(out)]
    code = main([*argv, "--methods", "equalize,bias-correction,mse-ranges"])
    err = capfd.readouterr().err
    assert code == 2 and not out.exists()
    assert len(err.strip().splitlines()) == 1 and "a Keras model to rewrite" in err
    assert "mse-ranges" in err  # what would run
    with pytest.raises(InvalidInputError, match="eval_data scores the int8 post-training"):
        tfcompress.quantize(str(saved), representative_data=x[:64], eval_data=x[1000:1100])
    with pytest.raises(InvalidInputError, match="gate= decides"):
        tfcompress.quantize(
            str(saved),
            representative_data=x[:64],
            eval_data=x[1000:1100],
            methods="none",
            gate=GateConfig.from_options(min_snr=20),
        )


def test_quantize_takes_the_gates_own_config_and_refuses_what_it_cannot_honour():
    gate = GateConfig.from_options(outputs="digit", min_snr=25, mode="tolerant")
    assert check_methods_gate(gate) is gate
    for bad, words in (
        (GateConfig(threads=2), "threads=2"),
        (GateConfig(batch_dims={"x": 1}), "--batch-dim"),
        (GateConfig(input_values={"sr": 16000}), "--input-value"),
        (GateConfig.from_options(backend="gpu"), "backend='gpu'"),
        ("min_snr=25", "GateConfig"),
    ):
        with pytest.raises(InvalidInputError, match="gate") as refused:
            check_methods_gate(bad)
        assert words in str(refused.value) and "\n" not in str(refused.value)


def test_auto_budget_skips_before_paying_and_named_methods_are_always_made(small, monkeypatch):
    from tfcompress.quantization.methods import apply

    model, x, _ = small
    data = {"representative_data": x[:64], "eval_data": x[1000:1100]}
    monkeypatch.setattr(apply, "AUTO_BUDGET", 0.0)  # nothing fits: every candidate skipped

    def no_rewrite(*args, **kwargs):
        raise AssertionError("a rewrite was paid for past the budget")

    monkeypatch.setattr(apply, "_rewritten", no_rewrite)
    # Nobody asked: a gate that plain int8 fails starts auto, within its budget.
    gate = GateConfig(thresholds={"min_snr": 200.0})
    report = tfcompress.quantize(model, gate=gate, **data).methods
    assert report.why_run == "plain int8 failed the gate"
    assert report.candidates == () and report.kept == ()
    assert report.reason.startswith("auto's budget (0x plain int8, 0.0 s) left room for no")
    assert sorted(label for label, _ in report.skipped) == sorted(map("+".join, AUTO_CANDIDATES))
    assert all("name it to make it (--methods" in why for _, why in report.skipped)
    assert all("would be passed" in why for _, why in report.skipped)
    assert report.to_dict()["seconds"]["budget"] == 0.0
    # asked for, auto has the same budget; methods named are paid for, whatever it is
    monkeypatch.undo()
    monkeypatch.setattr(apply, "AUTO_BUDGET", 0.0)
    monkeypatch.setattr(apply, "_rewritten", no_rewrite)
    asked = tfcompress.quantize(model, methods="auto", **data).methods
    assert asked.why_run == "asked" and asked.candidates == () and asked.budget_seconds == 0.0
    assert len(asked.skipped) == len(AUTO_CANDIDATES)
    monkeypatch.undo()
    monkeypatch.setattr(apply, "AUTO_BUDGET", 0.0)
    named = tfcompress.quantize(model, methods="bias-correction,mse-ranges", **data).methods
    assert [c.methods for c in named.candidates] == [("bias-correction", "mse-ranges")]
    assert named.skipped == () and named.budget_seconds is None
    (made,) = named.candidates
    assert made.edits["corrected"] and made.ranges  # each in its own field


def test_budget_refuses_by_the_numbers():
    from tfcompress.quantization.methods.apply import Budget

    budget = Budget(1.5, 2.0)  # 3.0 s in all
    assert budget.refuses("mse-ranges", spent=2.5, estimate=0.5) is None
    why = budget.refuses("equalize+bias-correction", spent=2.5, estimate=0.6)
    assert why.startswith("auto's budget 1.5x plain int8 (3.0 s) would be passed (2.5 s spent")
    assert "--methods equalize,bias-correction" in why
    assert Budget(None, 2.0).refuses("equalize", spent=1e9, estimate=1e9) is None
