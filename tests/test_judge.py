"""The many-output judge: checks, statistics per metric, modes, report (pure numpy)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tfcompress.errors import InvalidDataError, InvalidInputError
from tfcompress.testing import GateSettings, clopper_pearson
from tfcompress.testing.judge import Check, build_checks, judge_outputs_by_name, plan_checks
from tfcompress.testing.report import GateReport
from tfcompress.testing.stats import paired_metric_difference

RNG = np.random.default_rng(0)
N = 200
CLASSES = RNG.integers(0, 4, N)
LOGITS = RNG.normal(size=(N, 4)) + 4 * np.eye(4)[CLASSES]
PROBABILITIES = np.exp(LOGITS) / np.exp(LOGITS).sum(axis=1, keepdims=True)
BOXES = RNG.uniform(0, 1, size=(N, 4))
STRICT = GateSettings()


def judge(labels, ref, cand, checks=None, settings=STRICT) -> GateReport:
    return judge_outputs_by_name(labels, ref, cand, checks=checks, settings=settings)


def damaged(probabilities: np.ndarray, wrong: int) -> np.ndarray:
    """The first ``wrong`` samples' top class moved to the next class."""
    out = probabilities.copy()
    out[:wrong] = np.roll(out[:wrong], 1, axis=1)
    return out


# --- which statistics for which metric -------------------------------------------------------


def test_accuracy_uses_mcnemar_with_per_class_changes() -> None:
    report = judge(
        {"class": CLASSES}, {"class": PROBABILITIES}, {"class": damaged(PROBABILITIES, 20)}
    )
    verdict = report.verdict("class")
    assert verdict.metric == "accuracy" and verdict.method == "mcnemar"
    assert verdict.difference is not None and verdict.difference.p_value is not None
    assert verdict.difference.reference_only >= 1  # the damaged samples the reference got
    assert verdict.value == pytest.approx(verdict.reference_score - verdict.candidate_score)
    assert verdict.per_class and verdict.per_class[0].change < 0
    assert not verdict.passed and verdict.chosen_because is not None


def test_agreement_uses_clopper_pearson() -> None:
    report = judge(None, {"class": PROBABILITIES}, {"class": damaged(PROBABILITIES, 3)})
    verdict = report.verdict("class")
    assert verdict.metric == "agreement" and verdict.method == "clopper-pearson"
    assert verdict.reference_score is None and verdict.value == (N - 3) / N
    assert (verdict.ci_low, verdict.ci_high) == pytest.approx(clopper_pearson(N - 3, N))
    assert verdict.candidate_score == verdict.value


def test_interval_bootstrap_applies_to_every_interval() -> None:
    ref = {"class": PROBABILITIES, "box": BOXES}
    cand = {"class": damaged(PROBABILITIES, 5), "box": BOXES + 0.01}
    checks = [Check("class", "accuracy"), Check("class", "agreement"), Check("box", "snr")]
    settings = GateSettings(interval="bootstrap", resamples=500, seed=3)
    report = judge({"class": CLASSES}, ref, cand, checks, settings)
    assert {v.method for v in report.verdicts} == {"bootstrap"}
    assert report.verdict("class", "accuracy").difference.resamples == 500


def test_mse_and_miou_use_the_bootstrap() -> None:
    noisy = BOXES + RNG.normal(scale=0.1, size=BOXES.shape)
    masks = RNG.integers(0, 3, size=(N, 4, 4))
    scores = np.eye(3)[masks] + RNG.normal(scale=0.4, size=(N, 4, 4, 3))
    report = judge(
        {"box": BOXES, "mask": masks},
        {"box": BOXES, "mask": np.eye(3)[masks]},
        {"box": noisy, "mask": scores},
        checks=[Check("box", "mse", 0.05), Check("mask", None, 0.5)],
    )
    for verdict in report.verdicts:
        assert verdict.method == "bootstrap" and verdict.difference is not None
        assert verdict.difference.resamples == 2000 and verdict.difference.seed == 0
        assert verdict.ci_low <= verdict.value <= verdict.ci_high
    assert report.verdict("mask").metric == "miou"


def test_drop_of_lower_is_better_metrics_is_candidate_minus_reference() -> None:
    worse = BOXES + 0.2
    report = judge(
        {"box": BOXES}, {"box": BOXES + 0.1}, {"box": worse}, [Check("box", "mae", 0.05)]
    )
    verdict = report.verdict("box")
    assert verdict.reference_score == pytest.approx(
        0.1
    ) and verdict.candidate_score == pytest.approx(0.2)
    assert verdict.value == pytest.approx(0.1) and not verdict.passed  # worse by 0.1 > 0.05
    better = judge(
        {"box": BOXES}, {"box": worse}, {"box": BOXES + 0.1}, [Check("box", "mae", 0.05)]
    )
    assert better.verdict("box").value == pytest.approx(-0.1) and better.passed


def test_paired_metric_difference_direction() -> None:
    ref_err, cand_err = np.full(10, 1.0), np.full(10, 3.0)

    def mean_of(values: np.ndarray):
        return lambda idx: float(values[idx].mean())

    higher = paired_metric_difference(mean_of(ref_err), mean_of(cand_err), 10)
    lower = paired_metric_difference(
        mean_of(ref_err), mean_of(cand_err), 10, higher_is_better=False
    )
    assert higher.drop == -2.0 and lower.drop == 2.0
    assert (lower.ci_low, lower.ci_high) == (2.0, 2.0)
    assert lower.reference_score == 1.0 and lower.candidate_score == 3.0


def test_max_abs_has_no_interval_and_the_point_value_decides() -> None:
    cand = BOXES.copy()
    cand[0, 0] += 0.05
    for mode in ("strict", "tolerant", "proven"):
        report = judge(
            None,
            {"box": BOXES},
            {"box": cand},
            [Check("box", "max_abs", 0.1)],
            GateSettings(mode=mode),
        )
        verdict = report.verdict("box")
        assert verdict.method == "none" and verdict.ci_low is None and verdict.ci_high is None
        assert verdict.value == pytest.approx(0.05) and verdict.passed
        assert verdict.decided_by == "value"
        assert any("no interval" in note for note in verdict.notes)


# --- modes -----------------------------------------------------------------------------------


def test_modes_use_the_favourable_and_unfavourable_ends_for_fidelity() -> None:
    # snr around 20 dB with a bootstrap interval on each side of the threshold
    noise = RNG.normal(size=BOXES.shape)
    scale = math.sqrt((BOXES**2).sum() / (noise**2).sum() / 100)  # exactly 20 dB
    cand = {"box": BOXES + 0.98 * scale * noise}  # a little above 20 dB
    verdicts = {
        mode: judge(
            None, {"box": BOXES}, cand, [Check("box", "snr", 20)], GateSettings(mode=mode)
        ).verdict("box")
        for mode in ("strict", "tolerant", "proven")
    }
    strict = verdicts["strict"]
    assert strict.ci_low < 20 < strict.value < strict.ci_high
    assert strict.passed and verdicts["tolerant"].passed and not verdicts["proven"].passed
    assert verdicts["tolerant"].decided_by == "ci_high"
    assert verdicts["proven"].decided_by == "ci_low"
    assert "interval lower bound" in verdicts["proven"].rule()
    below = judge(
        None, {"box": BOXES}, cand, [Check("box", "snr", 20.3)], GateSettings(mode="tolerant")
    )
    assert below.verdict("box").value < 20.3 and below.passed  # not significantly below


def test_modes_on_a_task_drop() -> None:
    cand = {"class": damaged(PROBABILITIES, 3)}
    verdicts = {
        mode: judge(
            {"class": CLASSES},
            {"class": PROBABILITIES},
            cand,
            [Check("class", "accuracy", 0.02)],
            GateSettings(mode=mode),
        ).verdict("class")
        for mode in ("strict", "tolerant", "proven")
    }
    assert verdicts["strict"].passed and verdicts["tolerant"].passed
    assert not verdicts["proven"].passed  # 200 samples cannot prove a drop within 2 points
    assert verdicts["tolerant"].decided_by == "ci_low"
    assert "not proven" in verdicts["proven"].advice()


# --- many outputs ----------------------------------------------------------------------------


def test_damaged_head_fails_only_its_own_verdict() -> None:
    labels = {"class": CLASSES, "box": BOXES}
    ref = {"class": PROBABILITIES, "box": BOXES + 0.01}
    cand = {"class": PROBABILITIES, "box": BOXES + RNG.normal(scale=0.3, size=BOXES.shape)}
    report = judge(
        labels, ref, cand, build_checks(["class"]) + build_checks(["box"], ["mse"], max_drop=0.01)
    )
    assert report.verdict("class").passed and report.verdict("class").metric == "accuracy"
    box = report.verdict("box")
    assert box.metric == "mse" and not box.passed
    assert not report.passed and report.failures == (box,)
    assert report.headline().startswith("gate FAILED (strict): 1 of 2 checks on 2 outputs failed")
    text = report.explain()
    assert "output 'box', mse: drop +" in text and "What to do" in text
    assert "class" in report.table() and "box" in report.table()


def test_chosen_metrics_keep_their_reason_and_named_ones_do_not() -> None:
    ref = {"class": PROBABILITIES, "box": BOXES}
    report = judge({"class": CLASSES}, ref, ref)
    assert [(v.output, v.metric) for v in report.verdicts] == [
        ("class", "accuracy"),
        ("box", "snr"),
    ]
    assert "labels are class ids" in report.verdict("class").chosen_because
    assert report.verdict("box").chosen_because.startswith("no labels for output 'box'")
    assert report.passed and "metrics chosen for you" in report.explain()
    named = judge(None, ref, ref, [Check("box", "cosine")])
    assert named.verdict("box").chosen_because is None
    assert named.verdict("box").threshold == 0.99  # the default


def test_named_metric_wins_over_the_same_metric_chosen() -> None:
    ref = {"box": BOXES}
    checks = (*build_checks(["box"], min_snr=30), Check("box"))
    report = judge(None, ref, ref, checks)
    assert [(v.metric, v.threshold) for v in report.verdicts] == [("snr", 30.0)]


def test_non_finite_candidate_fails_with_a_note() -> None:
    cand = BOXES.copy()
    cand[3, 1] = np.nan
    report = judge(None, {"box": BOXES}, {"box": cand}, [Check("box", "snr")])
    verdict = report.verdict("box")
    assert math.isnan(verdict.value) and not verdict.passed
    assert "1 NaN or Inf" in verdict.notes[0]
    data = report.to_dict()
    json.dumps(data, allow_nan=False)
    assert data["checks"][0]["value"] is None and data["checks"][0]["non_finite"]["value"] == "nan"


def test_to_dict_keys_and_infinite_snr() -> None:
    ref = {"class": PROBABILITIES, "box": BOXES}
    report = judge({"class": CLASSES}, ref, ref, settings=GateSettings(mode="tolerant"))
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert set(data) == {
        "passed", "mode", "confidence", "samples", "failed", "reference", "candidate",
        "reference_backend", "backend", "checks",
    }  # fmt: skip
    assert data["passed"] is True and data["mode"] == "tolerant" and data["samples"] == N
    class_check, box_check = data["checks"]
    for key in (
        "output", "metric", "kind", "reference_score", "candidate_score", "value", "drop",
        "ci_low", "ci_high", "threshold", "threshold_name", "passed", "chosen_because",
        "interval", "samples", "per_class", "non_finite",
    ):  # fmt: skip
        assert key in class_check and key in box_check
    assert class_check["drop"] == 0.0 and class_check["threshold_name"] == "max_drop"
    assert box_check["metric"] == "snr" and box_check["value"] is None and box_check["drop"] is None
    assert box_check["non_finite"] == {
        "candidate_score": "+inf",
        "value": "+inf",
        "ci_low": "+inf",
        "ci_high": "+inf",
    }
    assert "+inf dB" in report.table()


def test_units_in_the_table() -> None:
    ref = {"class": PROBABILITIES, "box": BOXES}
    cand = {"class": damaged(PROBABILITIES, 4), "box": BOXES + 0.1}
    checks = [Check("class", "accuracy"), Check("box", "mse", 0.1), Check("box", "snr")]
    table = judge({"class": CLASSES, "box": BOXES}, ref, cand, checks).table()
    assert " pt " in table and "%" in table and " dB" in table and "max_drop 0.1" in table


# --- refused -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"metrics": ["accuracy"], "min_snr": 20}, "--min-snr applies to the snr metric"),
        ({"metrics": ["snr", "cosine"], "max_drop": 0.01}, "--max-drop applies to task metrics"),
        ({"metrics": ["cosine"], "min_cosine": 1.2}, r"\[-1, 1\]"),
        ({"min_agreement": 1.5}, r"\[0, 1\]"),
        ({"metrics": ["mse"], "max_drop": -0.1}, ">= 0"),
        ({"max_drop": -0.1}, r"must be in \[0, 1\] \(a fraction"),
        ({"metrics": ["accuracy"], "max_drop": 5}, "did you mean 0.05"),
        ({"metrics": ["f1"]}, "unknown metric"),
    ],
)
def test_impossible_option_combinations_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        build_checks(**kwargs)


def test_build_checks_pairs_outputs_metrics_and_thresholds() -> None:
    checks = build_checks(["a", "b"], ["top1", "snr"], max_drop=0.02, min_snr=25)
    assert [(c.output, c.metric, c.threshold) for c in checks] == [
        ("a", "accuracy", 0.02), ("a", "snr", 25.0), ("b", "accuracy", 0.02), ("b", "snr", 25.0),
    ]  # fmt: skip
    assert build_checks() == (Check(),)
    assert build_checks(min_agreement=0.995) == (Check(None, "agreement", 0.995),)


def test_judge_refuses_what_cannot_be_judged() -> None:
    ref = {"class": PROBABILITIES, "box": BOXES}
    with pytest.raises(InvalidDataError, match="accuracy on output 'class' compares it to labels"):
        judge(None, ref, ref, [Check("class", "accuracy")])
    with pytest.raises(InvalidInputError, match="no default threshold; pass --max-drop"):
        judge({"box": BOXES}, ref, ref, [Check("box", "mse")])
    with pytest.raises(InvalidInputError, match="pass --max-abs"):
        judge(None, ref, ref, [Check("box", "max_abs")])
    with pytest.raises(InvalidInputError, match="no output named 'boxes'"):
        judge(None, ref, ref, [Check("boxes", "snr")])
    with pytest.raises(InvalidInputError, match="no output has labels") as caught:
        judge(None, ref, ref, build_checks(max_drop=0.02))
    # It names the threshold that fits each output: agreement for class scores, snr for boxes.
    assert "the thresholds that fit: --min-agreement for 'class', --min-snr for 'box'" in str(
        caught.value
    )
    with pytest.raises(InvalidInputError, match="no output has labels"):  # before any candidate
        plan_checks(None, ref, checks=build_checks(max_drop=0.02), settings=STRICT)
    assert plan_checks(None, ref, checks=None, settings=STRICT) == (
        ("class", "agreement", 0.99), ("box", "snr", 20.0),
    )  # fmt: skip
    with pytest.raises(InvalidInputError, match="--max-drop applies to task metrics"):
        judge(None, ref, ref, [Check("box", None, 0.02)])
    with pytest.raises(InvalidInputError, match="interval='mcnemar' needs per-sample"):
        judge(
            {"box": BOXES}, ref, ref, [Check("box", "mse", 0.1)], GateSettings(interval="mcnemar")
        )
    with pytest.raises(InvalidInputError, match="use --metric mse"):
        judge({"box": BOXES}, ref, ref, [Check("box", "accuracy")])
    with pytest.raises(InvalidInputError, match="the candidate"):
        judge(None, ref, {"class": PROBABILITIES}, None)
    with pytest.raises(InvalidInputError, match="which the model does not output"):
        judge({"mask": BOXES}, ref, ref, None)
    with pytest.raises(InvalidInputError, match="different numbers of samples"):
        short = {"class": PROBABILITIES, "box": BOXES[:10]}
        judge(None, short, short, None)
