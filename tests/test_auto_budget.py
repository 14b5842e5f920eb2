"""``--methods auto`` asked for is bounded, and its range search holds statistics only (issue 39).

Cheap: one small random-weight CNN on 8x8 digits. The budget is checked on a fake clock
(each conversion, rewrite and candidate advances it by a stated number of seconds), so what
auto made and skipped follows from the numbers, not from this machine's speed.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import tfcompress
from tfcompress.quantization.methods import apply, calibrated
from tfcompress.quantization.methods.catalog import AUTO_CANDIDATES


@pytest.fixture(scope="module")
def small():
    """The model, 48 calibration samples and the calibrate-only .tflite auto edits."""
    import keras
    from sklearn.datasets import load_digits

    x = (load_digits().images[:, :, :, None] / 16.0).astype(np.float32)
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8, 8, 1))
    h = keras.layers.Conv2D(8, 3, activation="relu", padding="same")(inputs)
    h = keras.layers.DepthwiseConv2D(3, activation="relu")(h)
    h = keras.layers.Flatten()(h)
    model = keras.Model(inputs, keras.layers.Dense(10, name="digit")(h))
    seen: list[bytes] = []
    with pytest.MonkeyPatch.context() as patch:
        real = apply._candidate

        def keep(methods, base, *args, **kwargs):
            seen.append(base[0].content)
            return real(methods, base, *args, **kwargs)

        patch.setattr(apply, "_candidate", keep)
        tfcompress.quantize(model, representative_data=x[:48], methods="mse-ranges")
    return model, x[:48], seen[0]


class _Clock:
    """A clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fake_clock(monkeypatch):
    """Auto's clock, moved 20 s by the first trace (its three conversions said to take 10,
    12 and 5 s: a 2 s trace, 8 and 10 s of their own, the calibrate-only one plain int8's
    3 s calibration, made by no conversion more) and 1 s by each candidate; a rewrite is
    refused."""
    clock = _Clock()
    monkeypatch.setattr(apply, "_clock", clock)
    real_convert, real_candidate = apply.convert_all, apply._candidate

    def convert(model, configures, **kwargs):
        made = real_convert(model, configures, **kwargs)
        assert len(configures) == 3  # reference, plain int8, calibrate-only: one trace
        clock.now += 20.0
        return [replace(m, seconds=s) for m, s in zip(made, (10.0, 12.0, 5.0), strict=True)]

    def candidate(*args, **kwargs):
        clock.now += 1.0
        return real_candidate(*args, **kwargs)

    def no_rewrite(*args, **kwargs):
        raise AssertionError("a rewrite was paid for past the budget")

    monkeypatch.setattr(apply, "convert_all", convert)
    monkeypatch.setattr(apply, "_candidate", candidate)
    monkeypatch.setattr(apply, "_rewritten", no_rewrite)
    return clock


def test_asked_for_auto_spends_at_most_its_budget_on_a_fake_clock(small, fake_clock):
    model, x, _ = small
    report = tfcompress.quantize(model, representative_data=x, methods="auto").methods
    # Plain int8: the 20 s of the trace, which made nothing plain int8 does not make, so the
    # budget is 1.5 x 20 = 30 s, plus 1.5x the real instant quantize spent before the methods
    # (checking the data).
    assert report.why_run == "asked" and report.budget_seconds == pytest.approx(30.0, abs=1.0)
    made = [c.methods for c in report.candidates]
    skipped = {label: why for label, why in report.skipped}
    # Running the reference and plain int8 (estimated as two 3 s calibrations) fits, and is
    # paid first; then most expected payoff per estimated second: the graph candidates (about
    # a second each once the float run is shared) fit; each rewrite (24 s, two conversions)
    # would not.
    assert made == [
        ("mse-ranges",),
        ("bias-correction", "mse-ranges"),
        ("bias-correction",),
        ("percentile-ranges",),
    ]
    assert set(skipped) == {"+".join(c) for c in AUTO_CANDIDATES if "equalize" in c}
    assert all("auto's budget 1.5x plain int8 (30." in w for w in skipped.values())
    assert all("would be passed" in w for w in skipped.values())
    assert (
        "name it to make it (--methods equalize,bias-correction)"
        in skipped["equalize+bias-correction"]
    )
    assert report.total_seconds <= report.budget_seconds
    assert "skipped (auto's budget" in str(report)  # said where people read it too


def test_a_float_run_that_would_pass_the_budget_stops_and_is_reported(
    small, fake_clock, monkeypatch
):
    model, x, _ = small

    def slow_pace(*args, **kwargs):
        raise calibrated.OverBudget("its float run over 48 samples would take about 99.0 s")

    monkeypatch.setattr(calibrated, "run_float", slow_pace)
    report = tfcompress.quantize(model, representative_data=x, methods="auto").methods
    graph_only = [c for c in AUTO_CANDIDATES if "equalize" not in c]
    skipped = dict(report.skipped)
    for methods in graph_only:  # every candidate of that float run, once it stopped
        assert "would take about 99.0 s" in skipped["+".join(methods)]
    assert report.candidates == () and "left room for no candidate" in report.reason


def test_streamed_statistics_equal_the_all_at_once_ones(small):
    _, x, content = small
    samples = tfcompress.data.Dataset(x)
    whole = calibrated.float_statistics(content, samples, max_batch=len(x))
    streamed = calibrated.float_statistics(content, samples, max_batch=1)
    assert whole.histograms and whole.patches
    assert set(whole.histograms) == set(streamed.histograms)
    for index, histogram in whole.histograms.items():
        np.testing.assert_array_equal(histogram.counts, streamed.histograms[index].counts)
        assert histogram.zeros == streamed.histograms[index].zeros
        assert histogram.counts.sum() + histogram.zeros > 0
    for index, patch in whole.patches.items():
        np.testing.assert_allclose(patch.mean, streamed.patches[index].mean, rtol=1e-9)
    # Only what is asked for is gathered.
    ranges_only = calibrated.float_statistics(
        content, samples, {calibrated.WANTED_KEY: {"histograms"}}
    )
    assert ranges_only.histograms and not ranges_only.patches


def test_a_batch_whose_tensors_pass_the_memory_bound_is_not_run(small, monkeypatch):
    _, x, content = small
    monkeypatch.setattr(calibrated, "MEMORY_SHARE", 1e-12)
    with pytest.raises(calibrated.OverBudget, match="of the memory limit") as stopped:
        calibrated.float_statistics(content, tfcompress.data.Dataset(x))
    assert "TFCOMPRESS_MEMORY_LIMIT" in str(stopped.value)
