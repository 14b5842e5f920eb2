"""Collapse warnings say what is true of the output's kind (tfcompress.bench.collapse)."""

from __future__ import annotations

import numpy as np

from tfcompress.bench.collapse import find_collapse


def _rows(samples: int, width: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(samples, width))


def test_a_regression_output_is_judged_by_snr_not_by_a_top1_class():
    ref = _rows(64, 2)  # (N, 2) values: no class scores, though shaped like them
    (constant,) = find_collapse({"xy": ref}, {"xy": np.tile([0.0, 5.0], (64, 1))})
    assert "top-1" not in constant and "chance" not in constant
    assert constant.startswith("output xy collapsed: SNR ")
    assert "the same value on every sample, where the float model's varies" in constant
    (noisy,) = find_collapse({"xy": ref}, {"xy": _rows(64, 2, seed=1)})
    assert "SNR " in noisy and "correlation " in noisy and "top-1" not in noisy


def test_class_scores_are_judged_by_top1_agreement():
    ids = np.arange(40) % 4
    softmax = np.eye(4)[ids] * 0.7 + 0.075  # probability rows
    (said,) = find_collapse({"cls": softmax}, {"cls": np.eye(4)[np.zeros(40, int)]})
    assert "its top-1 class agrees with the float model on 25.0% of 40 predictions" in said
    logits = np.eye(4)[ids] * 5.0 - 1.0  # not probabilities: classes only by their labels
    collapsed = np.eye(4)[np.zeros(40, int)]
    assert "top-1 class" in find_collapse({"cls": logits}, {"cls": collapsed}, {"cls": ids})[0]
    assert "top-1" not in find_collapse({"cls": logits}, {"cls": collapsed})[0]
