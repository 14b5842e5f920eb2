"""The metric registry against values computed by hand (pure numpy, no TensorFlow)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tfcompress.bench.metrics import (
    choose_metric,
    get_metric,
    metric_names,
    resolve_metric,
)
from tfcompress.errors import InvalidDataError, InvalidInputError

# --- task metrics ----------------------------------------------------------------------------


def test_accuracy_topk_and_one_hot_by_hand() -> None:
    labels = np.array([0, 1, 2, 1])
    outputs = np.array(
        [[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.2, 0.1, 0.7], [0.2, 0.5, 0.3]]
    )  # top-1 right on 0, 2, 3; label of sample 1 is second best
    accuracy = get_metric("top1")
    assert accuracy.name == "accuracy" and accuracy.kind == "task"
    assert accuracy.direction == "higher" and accuracy.unit == "fraction"
    assert accuracy.score(labels, outputs) == 0.75
    assert get_metric("top2").score(labels, outputs) == 1.0
    one_hot = np.eye(3)[labels]
    assert accuracy.score(one_hot, outputs) == 0.75
    _stats, correct = accuracy.measure(labels, outputs)
    assert correct.tolist() == [True, False, True, True]
    assert accuracy.scorer(labels, outputs)(np.array([1, 1, 0])) == pytest.approx(1 / 3)


def test_topk_refuses_meaningless_k() -> None:
    outputs, labels = np.eye(3), np.array([0, 1, 2])
    with pytest.raises(InvalidInputError, match="always right; use --metric accuracy or top2"):
        get_metric("top3").score(labels, outputs)
    with pytest.raises(InvalidInputError, match="binary_accuracy"):
        get_metric("top2").score(np.array([0, 1]), np.array([[0.2], [0.9]]))


def test_binary_accuracy_cuts_probabilities_and_logits() -> None:
    labels = np.array([1, 0, 1, 0])
    probabilities = np.array([[0.9], [0.6], [0.4], [0.1]])  # cut at 0.5: 1, 1, 0, 0
    logits = np.array([[2.0], [-1.0], [-0.5], [0.3]])  # cut at 0: 1, 0, 0, 1
    binary = get_metric("binary_accuracy")
    assert "above 0.5 counts as positive when the reference outputs lie in [0, 1]" in (
        binary.description
    )
    assert binary.score(labels, probabilities) == 0.5
    assert binary.score(labels, logits) == 0.5
    assert get_metric("binary_accuracy@0.55").score(labels, probabilities) == 0.5
    assert get_metric("binary_accuracy@0.35").score(labels, probabilities) == 0.75
    # the reference decides the cut for both models: a candidate a hair outside [0, 1]
    # is still read as probabilities
    bound = binary.for_reference(probabilities)
    assert "above 0.5" in bound.description and "probabilities" in bound.description
    candidate, negatives = np.array([[1.0001], [0.6], [0.4], [0.1]]), np.array([1, 0, 0, 0])
    assert bound.score(negatives, candidate) == 0.75
    assert binary.score(negatives, candidate) == 0.25  # alone it would cut at 0 (logits)


def test_binary_accuracy_multi_label_has_no_per_sample_correctness() -> None:
    labels = np.array([[1, 0, 1], [0, 0, 1]])
    outputs = np.array([[0.9, 0.2, 0.3], [0.1, 0.1, 0.8]])  # 5 of 6 elements right
    _stats, correct = get_metric("binary_accuracy").measure(labels, outputs)
    assert correct is None
    assert get_metric("binary_accuracy").score(labels, outputs) == pytest.approx(5 / 6)


def test_regression_metrics_by_hand() -> None:
    labels = np.array([[1.0, 2.0], [3.0, 4.0]])
    outputs = np.array([[1.0, 3.0], [5.0, 4.0]])  # errors 0, 1, 2, 0
    assert get_metric("mse").score(labels, outputs) == 5 / 4
    assert get_metric("mae").score(labels, outputs) == 3 / 4
    assert get_metric("rmse").score(labels, outputs) == math.sqrt(5 / 4)
    for name in ("mse", "mae", "rmse"):
        metric = get_metric(name)
        assert metric.direction == "lower" and metric.unit == "number"
        assert metric.default_threshold is None
    # a (N, 1) output takes (N,) labels
    assert get_metric("mse").score(np.array([1.0, 2.0]), np.array([[1.0], [4.0]])) == 2.0


def one_hot_masks(predicted: np.ndarray, classes: int) -> np.ndarray:
    return np.eye(classes)[predicted]


MASK_LABELS = np.array([[[0, 0], [1, 1]], [[2, 2], [0, 1]]])
MASK_PREDICTED = np.array([[[0, 1], [1, 1]], [[2, 0], [0, 1]]])


def test_miou_on_tiny_masks_by_hand() -> None:
    # class 0: 3 label pixels, 3 predicted, 2 shared -> 2 / 4; class 1: 3, 4, 3 -> 3 / 4;
    # class 2: 2, 1, 1 -> 1 / 2; mean (0.5 + 0.75 + 0.5) / 3
    outputs = one_hot_masks(MASK_PREDICTED, 3)
    miou = get_metric("miou")
    assert miou.kind == "task" and miou.direction == "higher"
    assert miou.score(MASK_LABELS, outputs) == pytest.approx(1.75 / 3)
    assert miou.score(MASK_LABELS[..., np.newaxis], outputs) == pytest.approx(1.75 / 3)
    # the second sample alone: class 0: 1, 2, 1 -> 1/2; class 1: 1, 1, 1 -> 1; class 2: 1/2
    assert miou.scorer(MASK_LABELS, outputs)(np.array([1])) == pytest.approx(2 / 3)
    # the mean is over classes present in labels or predictions of the subset only
    first = miou.scorer(MASK_LABELS, outputs)(np.array([0]))
    assert first == pytest.approx((1 / 2 + 2 / 3) / 2)


def test_miou_single_channel_masks_are_cut() -> None:
    labels = np.array([[[1, 0], [0, 0]]])
    probabilities = np.array([[[[0.8], [0.7]], [[0.1], [0.2]]]])  # predicts 1, 1, 0, 0
    # class 0: labels 3, predicted 2, shared 2 -> 2/3; class 1: 1, 2, 1 -> 1/2
    expected = (2 / 3 + 1 / 2) / 2
    assert get_metric("miou").score(labels, probabilities) == pytest.approx(expected)
    assert get_metric("miou").score(labels, probabilities[..., 0]) == pytest.approx(expected)


def test_miou_rejects_bad_masks() -> None:
    outputs = one_hot_masks(MASK_PREDICTED, 3)
    with pytest.raises(InvalidDataError, match="whole class ids"):
        get_metric("miou").score(MASK_LABELS + 0.5, outputs)
    with pytest.raises(InvalidDataError, match=r"3 classes \(ids 0..2\) but its labels hold 3"):
        get_metric("miou").score(MASK_LABELS + 1, outputs)
    with pytest.raises(InvalidDataError, match=r"expects labels \(N, 2, 2\)"):
        get_metric("miou").score(MASK_LABELS[:, :1], outputs)
    with pytest.raises(InvalidInputError, match="use --metric accuracy"):
        get_metric("miou").score(np.array([0, 1]), np.eye(2))


# --- fidelity metrics ------------------------------------------------------------------------


def test_snr_cosine_max_abs_agreement_by_hand() -> None:
    ref, cand = np.array([[3.0, 4.0]]), np.array([[3.0, 3.0]])
    snr = get_metric("snr")
    assert snr.kind == "fidelity" and snr.unit == "dB" and snr.default_threshold == 20.0
    assert snr.score(ref, cand) == pytest.approx(10 * math.log10(25))
    assert get_metric("cosine").score(ref, cand) == pytest.approx(21 / (5 * math.sqrt(18)))
    assert get_metric("max_abs").score(ref, cand) == 1.0
    ref_classes = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    cand_classes = np.array([[0.2, 0.8], [0.4, 0.6], [0.4, 0.6]])
    agreement = get_metric("agreement")
    assert agreement.score(ref_classes, cand_classes) == pytest.approx(2 / 3)
    assert agreement.measure(ref_classes, cand_classes)[1].tolist() == [True, False, True]


def test_snr_of_identical_outputs_is_infinite_and_shown_as_such() -> None:
    outputs = np.arange(12.0).reshape(3, 4)
    snr = get_metric("snr")
    assert snr.score(outputs, outputs) == math.inf
    assert snr.format_value(math.inf) == "+inf dB"
    assert snr.score(np.zeros((2, 2)), np.ones((2, 2))) == -math.inf
    assert math.isnan(snr.score(outputs, np.full_like(outputs, np.nan)))


def test_cosine_zero_norm_rules() -> None:
    ref = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0]])
    cand = np.array([[0.0, 0.0], [1.0, 0.0], [-1.0, 0.0]])
    per_sample = get_metric("cosine").measure(ref, cand)[0][:, 0]
    assert per_sample.tolist() == [1.0, 0.0, -1.0]


def test_fidelity_refuses_different_shapes_and_non_finite_reference() -> None:
    with pytest.raises(InvalidInputError, match="same model"):
        get_metric("snr").score(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(InvalidDataError, match="NaN or Inf"):
        get_metric("snr").score(np.array([[np.nan]]), np.array([[1.0]]))
    with pytest.raises(InvalidInputError, match="use --metric snr or cosine"):
        get_metric("agreement").score(np.zeros((2, 4, 4, 3)), np.zeros((2, 4, 4, 3)))


# --- registry and validation -----------------------------------------------------------------


def test_get_metric_names_aliases_and_unknown() -> None:
    assert get_metric("TOP-5").name == "top5"
    assert get_metric("sqnr").name == "snr" and get_metric("mean_iou").name == "miou"
    assert get_metric(get_metric("mse")).name == "mse"
    with pytest.raises(InvalidInputError) as error:
        get_metric("f1")
    for name in metric_names():
        assert name in str(error.value)
    assert "topK" not in metric_names()  # every listed name is one get_metric takes
    assert "topN for the top-N accuracy" in str(error.value)  # how to ask for any k
    with pytest.raises(InvalidInputError, match="must be a number"):
        get_metric("binary_accuracy@high")


def test_resolve_metric_keeps_its_contract() -> None:
    name, fn = resolve_metric("top1")
    assert name == "accuracy" and fn(np.array([1, 0]), np.array([[0.1, 0.9], [0.2, 0.8]])) == 0.5
    assert resolve_metric("top-5")[0] == "top5"
    with pytest.raises(InvalidInputError, match="unknown metric"):
        resolve_metric("mse")  # GateSettings relies on top-k names only


def test_meaningless_metrics_are_refused_never_scored_as_zero() -> None:
    boxes = np.array([[0.1, 0.2, 0.5, 0.9], [0.3, 0.1, 0.8, 0.4]])
    with pytest.raises(InvalidInputError, match="use --metric mse"):
        get_metric("accuracy").score(boxes + 0.05, boxes)
    masks = np.zeros((2, 4, 4, 1))
    with pytest.raises(InvalidInputError, match="use --metric miou"):
        get_metric("accuracy").score(np.zeros((2, 4, 4), int), masks)
    with pytest.raises(InvalidInputError, match="multi-label"):
        get_metric("accuracy").score(np.array([[1, 1, 0]]), np.array([[0.5, 0.4, 0.1]]))


def test_labels_that_do_not_fit_name_the_output_and_shape() -> None:
    with pytest.raises(InvalidDataError, match=r"output 'box' expects .* \(N, 4\), got \(N,\)"):
        get_metric("mse").score(np.zeros(3), np.zeros((3, 4)), output="box")
    with pytest.raises(InvalidDataError, match=r"'class' has 3 classes .* hold 7"):
        get_metric("accuracy").score(np.array([0, 7]), np.zeros((2, 3)), output="class")
    with pytest.raises(InvalidDataError, match="whole numbers"):
        get_metric("accuracy").score(np.array([0.5, 1.0]), np.zeros((2, 3)))
    with pytest.raises(InvalidDataError, match="3 labels for 2 samples"):
        get_metric("accuracy").score(np.array([0, 1, 2]), np.zeros((2, 3)))
    with pytest.raises(InvalidDataError, match="NaN or Inf"):
        get_metric("mse").score(np.array([np.nan, 1.0]), np.zeros(2))


@pytest.mark.parametrize(
    ("metric", "value", "message"),
    [
        ("accuracy", 2, "did you mean 0.02"),
        ("accuracy", -0.01, r"\[0, 1\]"),
        ("mse", -0.5, ">= 0"),
        ("cosine", 1.5, r"\[-1, 1\]"),
        ("agreement", 99, "did you mean 0.99"),
        ("max_abs", -1, ">= 0"),
        ("snr", float("inf"), "finite"),
        ("snr", "loud", "must be a number"),
    ],
)
def test_thresholds_out_of_range_are_refused(metric: str, value: object, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        get_metric(metric).check_threshold(value)


def test_thresholds_in_range() -> None:
    assert get_metric("mse").check_threshold("2.5") == 2.5
    assert get_metric("snr").check_threshold(-3) == -3.0
    assert get_metric("cosine").check_threshold(-1) == -1.0


# --- choosing a metric -----------------------------------------------------------------------

PROBABILITIES = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])


@pytest.mark.parametrize(
    ("shape", "labels", "reference", "expected", "words"),
    [
        ((None, 3), np.array([0, 2]), None, "accuracy", "class ids"),
        ((None, 3), np.eye(3)[[0, 2]], None, "accuracy", "one-hot"),
        ((None, 3), np.array([[1, 0, 1], [0, 1, 1]]), None, "binary_accuracy", "multi-hot"),
        ((None, 1), np.array([0, 1]), None, "binary_accuracy", "0/1"),
        ((None, 1), np.array([0.5, 2.0]), None, "snr", "regression"),
        ((None, 4), np.array([[0.1, 0.2, 0.5, 0.9]] * 2), None, "snr", "real numbers"),
        ((None, 8, 8, 3), np.zeros((2, 8, 8), int), None, "miou", "class masks"),
        ((None, 8, 8, 1), np.zeros((2, 8, 8, 1), int), None, "miou", "class masks"),
        ((None, 16000, 1), np.linspace(-1, 1, 32000).reshape(2, 16000, 1), None, "snr", "numbers"),
        ((None, 3), None, PROBABILITIES, "agreement", "top-1 agreement"),
        ((None, 3), None, None, "agreement", "no labels"),
        ((None, 3), None, np.log(PROBABILITIES), "snr", "class logits, pass --metric agreement"),
        ((None, 4), None, np.array([[0.1, 0.2, 0.5, 0.9]] * 2), "snr", "no labels"),
        ((None, 8, 8, 3), None, None, "snr", "no labels"),
        ((None, 16000, 1), None, None, "snr", "fidelity to the reference"),
        ((None, 16000), None, np.zeros((2, 16000)), "snr", "fidelity"),
    ],
)
def test_choose_metric(
    shape: tuple[int | None, ...],
    labels: np.ndarray | None,
    reference: np.ndarray | None,
    expected: str,
    words: str,
) -> None:
    metric, reason = choose_metric(shape, labels, output="head", reference_outputs=reference)
    assert metric.name == expected
    assert "output 'head'" in reason and words in reason


def test_choose_metric_reason_for_a_box_without_labels() -> None:
    boxes = np.array([[0.1, 0.2, 0.5, 0.9], [0.3, 0.1, 0.8, 0.4]])
    metric, reason = choose_metric(boxes.shape, None, output="box", reference_outputs=boxes)
    assert metric.name == "snr"
    assert reason.startswith("no labels for output 'box' (shape (N, 4)): fidelity to the")


def test_choose_metric_refuses_labels_that_fit_nothing() -> None:
    with pytest.raises(InvalidInputError, match=r"cannot choose .* \(N, 7\); pass --metric"):
        choose_metric((None, 4), np.zeros((2, 7)), output="box")
    with pytest.raises(InvalidDataError, match="not numbers"):
        choose_metric((None, 4), np.array(["a", "b"]), output="box")


# --- every registered metric: the metric contract, down to `tfcompress gate` -------------------
# Each metric is scored on the first case its validation accepts (outputs of a per-sample shape
# and labels), then gated end to end: an ONNX model pair (y = x and y = 1.001 x, ONNX Runtime:
# no TensorFlow) on those samples, `gate --metric NAME` with its own threshold flag.

_RNG = np.random.default_rng(0)
_SCORES = _RNG.random((48, 4), dtype=np.float32)
_MASKS = _RNG.random((48, 4, 4, 3), dtype=np.float32)
_UNIT = _RNG.random((48, 1), dtype=np.float32)
CASES = {  # name -> (inputs = reference outputs, labels)
    "classes": (_SCORES, _SCORES.argmax(1)),
    "regression": (_SCORES, _SCORES * 2 + 0.1),
    "binary": (_UNIT, (_UNIT[:, 0] > 0.5).astype(np.int64)),
    "masks": (_MASKS, _MASKS.argmax(-1)),
}


def metric_case(name: str) -> str:
    """The first case whose outputs and labels (or reference outputs) ``name`` validates."""
    definition = get_metric(name)
    for case, (x, labels) in CASES.items():
        try:
            definition.validate(labels if definition.kind == "task" else x, x * 1.001)
        except InvalidInputError:  # InvalidDataError too
            continue
        return case
    raise AssertionError(f"metric {name!r} validates none of the cases {sorted(CASES)}")


def _mul_model(path, shape: tuple[int, ...], scale: float) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *shape])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", *shape])
    s = numpy_helper.from_array(np.array(scale, np.float32), "s")
    graph = helper.make_graph([helper.make_node("Mul", ["x", "s"], ["y"])], "g", [x], [y], [s])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)


METRICS = [n if n != "top5" else "top2" for n in metric_names()]  # the models have 3 classes


@pytest.fixture(scope="module")
def gate_checks(tmp_path_factory) -> dict[str, dict]:
    """Every metric's check from `tfcompress gate --json`: one run per case, every metric of
    the case named by ``--metric`` with its threshold flag (a registered metric's flag)."""
    import contextlib
    import io
    import json

    from tfcompress.bench.thresholds import get_threshold
    from tfcompress.cli import main

    checks = {}
    for case, (x, labels) in CASES.items():
        names = [n for n in METRICS if metric_case(n) == case]
        folder = tmp_path_factory.mktemp(case)
        _mul_model(folder / "ref.onnx", x.shape[1:], 1.0)
        _mul_model(folder / "cand.onnx", x.shape[1:], 1.001)
        np.savez(folder / "data.npz", x=x, y=labels)
        argv = ["gate", str(folder / "ref.onnx"), str(folder / "cand.onnx")]
        argv += ["--eval", str(folder / "data.npz"), "--metric", ",".join(names), "--json"]
        for row in {get_threshold(get_metric(n).threshold_name) for n in names}:
            upper = row.name.startswith("max_")  # the judged number may not exceed it
            value = row.default if row.default is not None else 1.0 if upper else 0.0
            argv += [row.flag, str(value)]
        with contextlib.redirect_stdout(io.StringIO()) as out:
            code = main(argv)
        assert code in (0, 1), f"{argv}: exit {code}"  # a verdict, never exit 2 or 3
        checks.update((c["metric"], c) for c in json.loads(out.getvalue())["checks"])
    return checks


@pytest.mark.parametrize("name", METRICS)
def test_every_registered_metric_keeps_the_contract(name, gate_checks) -> None:
    import pickle

    from tfcompress.bench.thresholds import get_threshold, threshold_names

    definition = get_metric(name)
    assert definition.name == name and definition.kind in ("task", "fidelity")
    assert definition.direction in ("higher", "lower") and definition.description
    assert pickle.loads(pickle.dumps(definition)).name == name  # results cross processes
    # Its threshold is in the table (a flag of gate and quantize, a check_gate keyword).
    assert definition.threshold_name in threshold_names()
    if definition.kind == "task":
        assert definition.threshold_name == "max_drop"
    else:
        assert get_threshold(definition.threshold_name).metric == name
    x, labels = CASES[metric_case(name)]
    target = labels if definition.kind == "task" else x
    rows = definition.measure(target, x * 1.001)[0]  # statistics that add up over samples
    assert definition.aggregate(rows[:10]) == definition.score(target[:10], x[:10] * 1.001)
    # End to end: `gate --metric NAME` with its threshold flag judged it.
    check = gate_checks[name]
    assert check["threshold_name"] == definition.threshold_name
    assert isinstance(check["passed"], bool)
