"""Paired statistics and gate verdicts against values computed by hand (no TensorFlow here)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tfcompress.errors import GateFailedError, InvalidInputError
from tfcompress.testing import (
    AccuracyGateError,
    GateSettings,
    bootstrap_interval,
    clopper_pearson,
    judge_outputs,
    mcnemar_exact,
    paired_difference,
)
from tfcompress.testing.stats import binomial_cdf, paired_metric_difference


def pairs(both: int, ref_only: int, cand_only: int, neither: int) -> tuple[np.ndarray, np.ndarray]:
    """Correctness vectors with the given 2x2 table (reference right?, candidate right?)."""
    ref = [True] * both + [True] * ref_only + [False] * cand_only + [False] * neither
    cand = [True] * both + [False] * ref_only + [True] * cand_only + [False] * neither
    return np.array(ref), np.array(cand)


# --- binomial building blocks -------------------------------------------------------------


def test_binomial_cdf_matches_counting() -> None:
    assert binomial_cdf(1, 7, 0.5) == pytest.approx(8 / 128, abs=1e-15)
    assert binomial_cdf(2, 4, 0.25) == pytest.approx((81 + 108 + 54) / 256, abs=1e-15)
    assert binomial_cdf(-1, 4, 0.3) == 0.0
    assert binomial_cdf(4, 4, 0.3) == 1.0


@pytest.mark.parametrize(
    ("b", "c", "expected"),
    [
        (6, 1, 2 * (1 + 7) / 2**7),
        (5, 0, 2 / 2**5),
        (10, 2, 2 * (1 + 12 + 66) / 2**12),
        (3, 3, 1.0),  # 2 * P(X <= 3) > 1 is capped
        (0, 0, 1.0),  # no discordant pairs: no evidence of a difference
    ],
)
def test_mcnemar_exact_by_hand(b: int, c: int, expected: float) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(expected, abs=1e-12)
    assert mcnemar_exact(c, b) == pytest.approx(expected, abs=1e-12)  # symmetric


def test_clopper_pearson_closed_forms() -> None:
    # k = n: P(X >= n; p) = p**n = 0.025  ->  low = 0.025 ** (1/n)
    assert clopper_pearson(5, 5) == pytest.approx((0.025 ** (1 / 5), 1.0), abs=1e-12)
    # k = 0: P(X <= 0; p) = (1 - p)**n = 0.025
    assert clopper_pearson(0, 5) == pytest.approx((0.0, 1 - 0.025 ** (1 / 5)), abs=1e-12)
    # k = n - 1: upper bound solves 1 - p**n = 0.025
    low, high = clopper_pearson(6, 7)
    assert high == pytest.approx(0.975 ** (1 / 7), abs=1e-12)
    # lower bound solves P(X >= 6; p) = 7 p^6 (1 - p) + p^7 = 0.025
    assert 7 * low**6 * (1 - low) + low**7 == pytest.approx(0.025, abs=1e-12)
    assert clopper_pearson(0, 0) == (0.0, 1.0)
    # 90% interval uses 5% tails
    assert clopper_pearson(4, 4, confidence=0.9)[0] == pytest.approx(0.05 ** (1 / 4), abs=1e-12)


def test_clopper_pearson_agrees_with_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    for k, n in [(3, 40), (120, 300), (2, 2000), (999, 1000)]:
        expected = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
        assert clopper_pearson(k, n) == pytest.approx((expected.low, expected.high), abs=1e-9)
        assert mcnemar_exact(k, n - k) == pytest.approx(stats.binomtest(k, n).pvalue, abs=1e-9)


# --- paired differences -------------------------------------------------------------------


def _binomial_tail_at_least(k: int, n: int, p: float) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


def test_mcnemar_interval_all_discordant_favour_reference() -> None:
    ref, cand = pairs(both=40, ref_only=5, cand_only=0, neither=5)  # n = 50
    result = paired_difference(ref, cand)
    assert (result.samples, result.reference_only, result.candidate_only) == (50, 5, 0)
    assert result.reference_score == pytest.approx(0.9)
    assert result.candidate_score == pytest.approx(0.8)
    assert result.drop == pytest.approx(0.1)
    # 97.5% intervals (Bonferroni for 95%): theta in [0.0125 ** (1/5), 1]; pi = P(disagree)
    # in [pi_low, pi_high] with P(X >= 5; pi_low) = P(X <= 5; pi_high) = 0.0125, X ~ B(50, pi).
    theta_low = 0.0125 ** (1 / 5)
    pi_low, pi_high = clopper_pearson(5, 50, confidence=0.975)
    assert _binomial_tail_at_least(5, 50, pi_low) == pytest.approx(0.0125, abs=1e-9)
    assert 1 - _binomial_tail_at_least(6, 50, pi_high) == pytest.approx(0.0125, abs=1e-9)
    # 2 * theta_low - 1 = -0.17 < 0: the lowest drop pairs it with the highest disagreement rate
    assert result.ci_low == pytest.approx((2 * theta_low - 1) * pi_high, abs=1e-12)
    assert result.ci_high == pytest.approx(pi_high, abs=1e-12)
    assert result.ci_low < result.drop < result.ci_high
    assert result.p_value == pytest.approx(2 / 32)
    assert result.method == "mcnemar"


def test_mcnemar_interval_six_to_one() -> None:
    ref, cand = pairs(both=12, ref_only=6, cand_only=1, neither=1)  # n = 20
    result = paired_difference(ref, cand)
    assert result.drop == pytest.approx(0.25)
    _, pi_high = clopper_pearson(7, 20, confidence=0.975)
    assert result.ci_high == pytest.approx((2 * 0.9875 ** (1 / 7) - 1) * pi_high, abs=1e-12)
    assert result.ci_low < result.drop < result.ci_high
    assert result.p_value == pytest.approx(0.125)


def test_no_discordant_pairs_still_bounds_the_drop_by_the_sample_size() -> None:
    ref, cand = pairs(both=30, ref_only=0, cand_only=0, neither=3)  # n = 33
    result = paired_difference(ref, cand)
    # models that never disagreed on 33 samples may still disagree up to pi_high of the time
    pi_high = 1 - 0.0125 ** (1 / 33)
    assert (result.drop, result.p_value) == (0.0, 1.0)
    assert result.ci_low == pytest.approx(-pi_high, abs=1e-12)
    assert result.ci_high == pytest.approx(pi_high, abs=1e-12)
    big = paired_difference(*pairs(both=3000, ref_only=0, cand_only=0, neither=300))
    assert big.ci_high == pytest.approx(1 - 0.0125 ** (1 / 3300), abs=1e-12)  # ~0.13 pt


def test_bootstrap_matches_exact_resampling_distribution() -> None:
    # The bootstrap mean of [1, 0, 0, 0] is K/4 with K ~ Binomial(4, 1/4):
    # P(K <= 2) = 243/256 = 0.949 < 0.975 <= P(K <= 3) = 255/256, and P(K = 0) = 0.316 > 0.025,
    # so the 95% percentile interval is [0, 3/4].
    d = np.array([1.0, 0.0, 0.0, 0.0])
    assert bootstrap_interval(lambda i: float(d[i].mean()), 4, resamples=10_000) == (0.0, 0.75)
    ref, cand = pairs(both=0, ref_only=1, cand_only=0, neither=3)
    result = paired_difference(ref, cand, method="bootstrap", resamples=10_000)
    assert (result.drop, result.ci_low, result.ci_high) == (0.25, 0.0, 0.75)
    assert (result.resamples, result.seed) == (10_000, 0)


def test_bootstrap_is_seeded_and_paired() -> None:
    rng = np.random.default_rng(7)
    ref = rng.random(400) < 0.9
    cand = np.where(rng.random(400) < 0.05, ~ref, ref)
    first = paired_difference(ref, cand, method="bootstrap", seed=3)
    assert paired_difference(ref, cand, method="bootstrap", seed=3) == first
    # the generic bootstrap (any statistic) draws the same indices for the same seed
    diff = ref.astype(float) - cand.astype(float)
    generic = bootstrap_interval(lambda i: float(diff[i].mean()), 400, seed=3)
    assert generic == pytest.approx((first.ci_low, first.ci_high), abs=1e-12)
    # pairing matters: resampling the models independently would give a much wider interval
    assert first.ci_high - first.ci_low < 0.05


def test_bootstrap_sits_inside_the_conservative_mcnemar_interval_on_large_samples() -> None:
    rng = np.random.default_rng(1)
    ref = rng.random(10_000) < 0.9
    cand = rng.random(10_000) < 0.88
    mcnemar = paired_difference(ref, cand)
    boot = paired_difference(ref, cand, method="bootstrap")
    assert mcnemar.drop == boot.drop
    # the McNemar interval is conservative (Bonferroni over two exact intervals), never
    # narrower than the bootstrap's, but not by much on 10,000 samples
    assert mcnemar.ci_low <= boot.ci_low <= boot.drop <= boot.ci_high <= mcnemar.ci_high
    assert (mcnemar.ci_high - mcnemar.ci_low) < 1.5 * (boot.ci_high - boot.ci_low)


def test_metric_difference_uses_bootstrap() -> None:
    labels = np.array([0, 1, 1, 0, 1, 0, 1, 1])
    ref_ok = np.array([1, 1, 1, 1, 1, 1, 1, 0], bool)
    cand_ok = np.array([1, 0, 1, 1, 0, 1, 1, 0], bool)
    result = paired_metric_difference(
        lambda i: float(ref_ok[i].mean()), lambda i: float(cand_ok[i].mean()), len(labels)
    )
    assert result.drop == pytest.approx(2 / 8)
    assert result.method == "bootstrap"
    assert result.p_value is None and result.reference_only is None
    assert result.ci_low <= result.drop <= result.ci_high


def test_bootstrap_interval_is_widened_to_hold_the_point_estimate() -> None:
    # a statistic that is 1 only on the full sample (every index once): resamples almost
    # never reach it, so the raw percentile interval would be [0, 0] around a drop of 1
    def everything_once(idx: np.ndarray) -> float:
        return float(len(np.unique(idx)) == 20)

    result = paired_metric_difference(everything_once, lambda idx: 0.0, 20, resamples=200)
    assert result.drop == 1.0
    assert (result.ci_low, result.ci_high) == (0.0, 1.0)


@pytest.mark.parametrize(
    ("ref", "cand", "options", "message"),
    [
        ([1, 0], [1], {}, "same samples"),
        ([], [], {}, "non-empty"),
        ([1, 2], [1, 0], {}, "booleans or 0/1"),
        ([1, 0], [1, 0], {"confidence": 1.0}, "between 0 and 1"),
        ([1, 0], [1, 0], {"method": "wald"}, "mcnemar, bootstrap"),
        ([1, 0], [1, 0], {"method": "bootstrap", "resamples": 0}, "at least 1"),
    ],
)
def test_paired_difference_rejects_bad_input(
    ref: list[int], cand: list[int], options: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        paired_difference(np.array(ref), np.array(cand), **options)


# --- verdicts -----------------------------------------------------------------------------


def one_hot_outputs(labels: np.ndarray, correct: np.ndarray, classes: int = 3) -> np.ndarray:
    """Probabilities that are right where ``correct`` says so, else favour the next class."""
    predicted = np.where(correct, labels, (labels + 1) % classes)
    outputs = np.full((len(labels), classes), 0.1, np.float32)
    outputs[np.arange(len(labels)), predicted] = 0.8
    return outputs


def verdicts(both: int, ref_only: int, cand_only: int, neither: int, max_drop: float) -> dict:
    ref_ok, cand_ok = pairs(both, ref_only, cand_only, neither)
    labels = np.arange(len(ref_ok)) % 3
    ref_out, cand_out = one_hot_outputs(labels, ref_ok), one_hot_outputs(labels, cand_ok)
    return {
        mode: judge_outputs(
            labels, ref_out, cand_out, settings=GateSettings(max_drop=max_drop, mode=mode)
        ).passed
        for mode in ("strict", "tolerant", "proven")
    }


def test_modes_small_drop_on_small_sample() -> None:
    # drop 2 pt on 100 samples: interval [-6.12, +7.88] pt (2 disagreements say little)
    assert verdicts(98, 2, 0, 0, max_drop=0.01) == {
        "strict": False,  # 2 pt > 1 pt
        "tolerant": True,  # not significantly above 1 pt
        "proven": False,  # upper bound 7.9 pt > 1 pt
    }
    assert verdicts(98, 2, 0, 0, max_drop=0.03) == {
        "strict": True,
        "tolerant": True,
        "proven": False,  # 3 pt is not proven on 100 samples
    }
    assert verdicts(98, 2, 0, 0, max_drop=0.08)["proven"] is True


def test_modes_measured_ok_but_not_proven() -> None:
    # drop 0.1 pt on 1000 samples, but 19 discordant pairs make the interval [-1.48, +1.75] pt
    assert verdicts(960, 10, 9, 21, max_drop=0.005) == {
        "strict": True,
        "tolerant": True,
        "proven": False,
    }


def test_modes_significant_loss_fails_everywhere() -> None:
    assert verdicts(60, 30, 0, 10, max_drop=0.01) == {
        "strict": False,
        "tolerant": False,  # lower bound (2 * 0.0125**(1/30) - 1) * pi_low(30/100) > 14 pt
        "proven": False,
    }


def test_exact_threshold_passes_strict() -> None:
    assert verdicts(99, 1, 0, 0, max_drop=0.01)["strict"] is True


def test_result_message_and_dict() -> None:
    labels = np.repeat(np.arange(3), 20)
    ref_ok = np.ones(60, bool)
    cand_ok = ref_ok.copy()
    cand_ok[labels == 2] = np.arange(20) >= 8  # class 2 loses 8 of 20
    cand_ok[0] = False  # class 0 loses 1
    result = judge_outputs(
        labels,
        one_hot_outputs(labels, ref_ok),
        one_hot_outputs(labels, cand_ok),
        settings=GateSettings(max_drop=0.01),
        reference="float",
        candidate="int8.tflite",
        reference_backend="keras",
        backend="cpu",
    )
    assert not result.passed
    assert result.drop == pytest.approx(9 / 60)
    assert [c.label for c in result.per_class] == [2, 0, 1]  # worst first
    assert result.per_class[0].change == pytest.approx(-0.4)
    message = result.explain()
    for text in ("FAILED (strict)", "+15.00 pt", "60 samples", "int8.tflite", "-40.00 pt"):
        assert text in message
    data = result.to_dict()
    assert data["passed"] is False and data["samples"] == 60 and data["mode"] == "strict"
    (check,) = data["checks"]
    assert (check["metric"], check["threshold_name"], check["threshold"]) == (
        "accuracy",
        "max_drop",
        0.01,
    )
    assert check["reference_score"] == 1.0 and check["candidate_score"] == pytest.approx(0.85)
    assert check["drop"] == pytest.approx(0.15) and check["ci_low"] < 0.15 < check["ci_high"]
    assert [c["label"] for c in check["per_class"]] == [2, 0, 1]
    error = AccuracyGateError(result)
    assert isinstance(error, GateFailedError) and isinstance(error, AssertionError)
    assert error.exit_code == 1 and error.report is result and "+15.00 pt" in str(error)


def test_top5_and_callable_metrics() -> None:
    labels = np.array([0, 1, 2, 3, 4, 5] * 5)
    rng = np.random.default_rng(0)
    outputs = rng.random((30, 6)).astype(np.float32)
    top5 = judge_outputs(labels, outputs, outputs, settings=GateSettings(metric="top5"))
    assert top5.passed and top5.settings.metric_name == "top5" and top5.drop == 0.0

    def mean_true_prob(y: np.ndarray, out: np.ndarray) -> float:
        return float(out[np.arange(len(y)), y].mean())

    result = judge_outputs(
        labels, outputs, outputs * 0.5, settings=GateSettings(metric=mean_true_prob, max_drop=0.5)
    )
    assert result.difference.method == "bootstrap" and result.difference.p_value is None
    assert result.drop == pytest.approx(mean_true_prob(labels, outputs) * 0.5, rel=1e-5)
    assert result.passed and result.only.metric == "mean_true_prob"
    # a metric function gets per-class scores too, worst change first
    assert len(result.per_class) == 6 and result.per_class[0].change <= result.per_class[-1].change


def test_different_output_shapes_are_rejected() -> None:
    labels = np.array([0, 1])
    with pytest.raises(
        InvalidInputError, match=r"reference outputs shape \(3,\).*candidate.*\(4,\)"
    ):
        judge_outputs(labels, np.zeros((2, 3)), np.zeros((2, 4)), settings=GateSettings())
    with pytest.raises(InvalidInputError, match="one output row per labelled sample"):
        judge_outputs(
            np.array([0, 1, 2]), np.zeros((2, 3)), np.zeros((2, 3)), settings=GateSettings()
        )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_drop": -0.01}, r"must be in \[0, 1\] \(a fraction"),
        ({"max_drop": 1.5}, r"must be in \[0, 1\] \(a fraction"),
        ({"max_drop": 2}, "did you mean 0.02"),
        ({"max_drop": math.nan}, "must be a finite number, got nan"),
        ({"max_drop": "one"}, "must be a number"),
        ({"mode": "lenient"}, "strict, tolerant, proven"),
        ({"metric": "f1"}, "unknown metric"),
        ({"confidence": 0.0}, "between 0 and 1"),
        ({"interval": "wald"}, "auto, mcnemar, bootstrap"),
        ({"interval": "mcnemar", "metric": len}, "callable metric"),
        ({"resamples": 0}, "resamples must be an integer 1 to"),
        ({"backend": ""}, "backend name"),
    ],
)
def test_settings_reject_bad_values(options: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        GateSettings(**options)


def test_settings_accept_strings_and_edges() -> None:
    assert GateSettings(max_drop="0.02").max_drop == 0.02
    assert GateSettings(max_drop=0).max_drop == 0.0 and GateSettings(max_drop=1).max_drop == 1.0
    assert GateSettings(metric="top1").interval_method == "mcnemar"
    assert GateSettings(metric="top3").top_k == 3
    assert GateSettings().to_dict()["metric"] == "accuracy"


@pytest.mark.parametrize("gate", ["check_gate", "check_accuracy_drop"])
def test_settings_next_to_an_option_it_holds_is_refused(gate: str) -> None:
    import tfcompress.testing as testing

    # Refused before any model is read: nothing here is a model.
    with pytest.raises(InvalidInputError, match="settings= already holds mode"):
        getattr(testing, gate)("ref", "cand", "data", settings=GateSettings(), mode="tolerant")
    with pytest.raises(InvalidInputError, match="unknown option"):
        testing.check_gate("ref", "cand", "data", min_snrr=20)
