"""tfcompress.benchmark end to end on real artifacts: rows, accuracy, ratios, per-row errors."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from _bench_artifacts import build

import tfcompress
from tfcompress.errors import InvalidDataError, InvalidInputError, ModelLoadError

FAST = {"runs": 3, "min_seconds": 0, "warmup_seconds": 0}


@pytest.fixture(scope="module")
def files(trained_cnn, int8_result, mnist_split):
    return build(trained_cnn, int8_result, mnist_split)


@pytest.fixture(scope="module")
def test_data(mnist_split):
    return (mnist_split.test.x[:200], mnist_split.test.y[:200])


def test_benchmark_side_by_side(files, test_data):
    result = tfcompress.benchmark(
        [files["float32"], files["int8"], files["onnx"], files["keras"]],
        data=test_data,
        backends=("cpu", "onnxruntime", "keras", "gpu", "edgetpu"),
        threads=(1, 2),
        batch_sizes=(1, 4),
        **FAST,
    )
    rows = {(r.artifact, r.backend, r.threads, r.batch): r for r in result.rows}
    ok = [r for r in result.rows if r.ok]
    # 3 artifacts x their backend x 2 threads x 2 batches, plus cpu tflite x 2 -> 4 combos each.
    assert len(ok) == 4 * 2 * 2
    for row in ok:
        assert row.latency.runs >= 3
        assert 0 < row.latency.min <= row.latency.p50 <= row.latency.p99 <= row.latency.max
        assert row.init_ms is not None and row.init_ms >= 0
        assert row.throughput_per_s == pytest.approx(row.batch * 1000 / row.latency.mean)
        assert 0.85 <= row.accuracy <= 1.0  # trained CNN on real digits
        assert row.peak_rss_mb > 0
    # gpu/edgetpu rows for each .tflite say why they are unavailable here.
    for name in ("cnn_float32.tflite", "cnn_int8.tflite"):
        for backend, reason in (("edgetpu", "libedgetpu"), ("gpu", "")):
            if (name, backend, None, None) in rows:
                assert rows[(name, backend, None, None)].status.startswith("unavailable: ")
                assert reason in rows[(name, backend, None, None)].status
    float32 = rows[("cnn_float32.tflite", "cpu", 1, 1)]
    int8 = rows[("cnn_int8.tflite", "cpu", 1, 1)]
    assert result.reference == "cnn_float32.tflite"
    assert float32.speedup == pytest.approx(1.0)
    assert int8.size_ratio == pytest.approx(int8.size.file_bytes / float32.size.file_bytes)
    assert int8.size_ratio < 0.35
    assert int8.size.precision == "int8" and float32.size.precision == "float32"
    assert int8.size.macs == float32.size.macs > 0
    assert abs(int8.accuracy - float32.accuracy) < 0.03
    assert result.samples == 200
    assert any("int8" in note and "float32" in note for note in result.notes)
    text = str(result)
    assert "cnn_int8.tflite" in text and "CPU:" in text


def test_without_data_uses_random_inputs_and_reports_no_accuracy(files):
    result = tfcompress.benchmark(files["int8"], **FAST)
    (row,) = result.rows
    assert row.ok and row.accuracy is None and result.samples == 0
    assert row.to_dict()["latency_ms"]["runs"] >= 3


def test_failing_rows_do_not_lose_the_others(files, test_data):
    result = tfcompress.benchmark(
        {"good": files["float32"], "unpreparable": files["unresolved"]},
        data=test_data,
        batch_sizes=(1, 2),
        **FAST,
    )
    by_name = {}
    for row in result.rows:
        by_name.setdefault(row.artifact, []).append(row)
    assert all(r.ok for r in by_name["good"]) and len(by_name["good"]) == 2
    (unpreparable,) = by_name["unpreparable"]
    assert "NotARealOp" in unpreparable.status


def test_corrupt_artifact_is_an_error_before_anything_is_timed(files, test_data, monkeypatch):
    timed = []
    monkeypatch.setattr("tfcompress.bench.harness.measure", lambda *a, **k: timed.append(a))
    with pytest.raises(ModelLoadError, match="corrupt"):
        tfcompress.benchmark(
            {"good": files["float32"], "corrupt": files["corrupt"]}, data=test_data, **FAST
        )
    assert timed == []


def test_wrong_shape_data_is_an_input_error(files):
    small = (np.zeros((10, 8, 8, 1), np.float32), np.zeros(10, np.int64))
    with pytest.raises(InvalidDataError, match="shape"):
        tfcompress.benchmark([files["float32"]], data=small, **FAST)


def test_allocation_failure_is_a_row_error(files):
    huge = 10**9  # ~3 TB of input: the allocation fails, the batch-1 row still appears
    result = tfcompress.benchmark([files["int8"]], batch_sizes=(1, huge), **FAST)
    small, big = result.rows
    assert small.ok
    assert big.batch == huge and big.status.startswith("error: ")
    assert "Memory" in big.status or "memory" in big.status or "allocate" in big.status


def test_bad_options_are_input_errors(files):
    with pytest.raises(InvalidInputError, match="unknown backend"):
        tfcompress.benchmark([files["int8"]], backends=("tpu",))
    with pytest.raises(InvalidInputError, match="threads"):
        tfcompress.benchmark([files["int8"]], threads=(0,))
    with pytest.raises(InvalidInputError, match="no artifacts"):
        tfcompress.benchmark([])


def test_import_stays_light():
    code = (
        "import sys, tfcompress; tfcompress.BenchmarkResult; tfcompress.benchmark; "
        "print(sorted(m for m in ('tensorflow', 'onnxruntime', 'matplotlib') if m in sys.modules))"
    )
    import subprocess

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
