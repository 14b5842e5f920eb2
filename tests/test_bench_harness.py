"""tfcompress.benchmark end to end on real artifacts: rows, accuracy, ratios, per-row errors."""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest
from _bench_artifacts import build, runnable_backends

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
    backends = ("cpu", "onnxruntime", "keras", "gpu", "edgetpu")
    artifacts = [files["float32"], files["int8"], files["onnx"], files["keras"]]
    result = tfcompress.benchmark(
        artifacts,
        data=test_data,
        backends=backends,
        threads=(1, 2),
        batch_sizes=(1, 4),
        **FAST,
    )
    from tfcompress.runtime.keras import tensorflow_threads

    rows = {(r.artifact, r.backend, r.threads, r.batch): r for r in result.rows}
    ok = [r for r in result.rows if r.ok]
    # Each artifact x each backend that runs it here x 2 threads x 2 batches, more with a
    # GPU/Edge TPU. TensorFlow runs one thread count per process (its pools are fixed once it
    # starts, here by the session's fixtures): keras rows are measured at that count only.
    runnable = {path.name: runnable_backends(path, backends) for path in artifacts}
    keras_threads = tensorflow_threads()[0]
    expected = {
        (name, backend, threads)
        for name, found in runnable.items()
        for backend in found
        for threads in (1, 2)
        if backend != "keras" or threads == keras_threads
    }
    assert {(r.artifact, r.backend, r.threads) for r in ok} == expected
    assert len(ok) == len(expected) * 2
    for threads in {1, 2} - {keras_threads}:  # never labelled with a count that did not run
        status = rows[("cnn.keras", "keras", threads, None)].status
        assert status.startswith(f"unavailable: the keras backend cannot run with {threads}")
    for row in ok:
        assert row.latency.runs >= 3
        assert 0 < row.latency.min <= row.latency.p50 <= row.latency.p99 <= row.latency.max
        # From the file to a ready runner: loading the file is part of it, so never 0.
        assert row.init_ms is not None and row.init_ms > 0
        assert row.throughput_per_s == pytest.approx(row.batch * 1000 / row.latency.p50)
        assert 0.85 <= row.accuracy <= 1.0  # trained CNN on real digits
        assert row.process_peak_rss_mb > 0
        assert row.rss_growth_mb is not None  # per row: RSS after its timing minus before
    # gpu/edgetpu rows for each .tflite that cannot run here say why.
    for name in ("cnn_float32.tflite", "cnn_int8.tflite"):
        for backend, reason in (("edgetpu", "libedgetpu"), ("gpu", "GPU")):
            if backend in runnable[name]:
                continue
            status = rows[(name, backend, None, None)].status
            assert status.startswith("unavailable: ") and reason in status, status
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
    assert not any("init_ms is empty" in note for note in result.notes)  # all from files
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
    monkeypatch.setattr("tfcompress.bench.rows.measure", lambda *a, **k: timed.append(a))
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


def test_batched_tf_data_counts_samples_not_batches(files, test_data):
    import tensorflow as tf

    x, y = test_data
    batched = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    result = tfcompress.benchmark(files["int8"], data=batched, **FAST)
    assert result.samples == len(x)
    (row,) = result.rows
    assert 0.85 <= row.accuracy <= 1.0


def test_generator_of_batches_counts_samples(files, test_data):
    x, y = test_data

    def batches():
        for start in range(0, len(x), 16):
            yield x[start : start + 16], y[start : start + 16]

    result = tfcompress.benchmark(files["int8"], data=batches, **FAST)
    assert result.samples == len(x)


def test_keras_init_includes_loading_the_file(files, test_data, trained_cnn):
    """A .keras path: init is load + runner creation; a loaded model: unknown, with a note."""
    from tfcompress.models import load_model

    start = time.perf_counter()
    load_model(files["keras"])
    load_ms = (time.perf_counter() - start) * 1000.0
    from tfcompress.runtime.keras import tensorflow_threads

    result = tfcompress.benchmark(
        {"from_file": files["keras"], "in_memory": trained_cnn},
        data=test_data,
        backends=("keras",),
        threads=(tensorflow_threads()[0],),  # the one count TensorFlow runs in this process
        **FAST,
    )
    from_file, in_memory = result.rows
    assert from_file.ok and in_memory.ok
    # Loading a .keras file takes tens of milliseconds; the old timer measured ~0.
    assert from_file.init_ms > 0.2 * load_ms
    assert in_memory.init_ms is None
    assert in_memory.to_dict()["init_ms"] is None
    (note,) = [n for n in result.notes if "init_ms" in n]
    assert "in_memory" in note and "from_file" not in note


def test_rss_growth_is_measured_around_each_rows_runner(files, monkeypatch):
    readings = iter([100.0, 130.0, 135.0])  # before the runner, after batch 1, after batch 2
    monkeypatch.setattr("tfcompress.bench.rows.current_rss_mb", lambda: next(readings))
    result = tfcompress.benchmark(files["int8"], batch_sizes=(1, 2), isolate=False, **FAST)
    assert [r.rss_growth_mb for r in result.rows] == [30.0, 35.0]
    assert all(r.process_peak_rss_mb > 0 for r in result.rows)
    assert result.rows[0].to_dict()["rss_growth_mb"] == 30.0
    assert {r.details["process"] for r in result.rows} == {"in-process"}
    # In a worker process (the default), memory is the worker's own: no reading of ours.
    isolated = tfcompress.benchmark(files["int8"], batch_sizes=(1, 2), **FAST)
    assert {r.details["process"] for r in isolated.rows} == {"worker"}
    assert all(r.rss_growth_mb is not None and r.process_peak_rss_mb > 0 for r in isolated.rows)


def test_saved_model_precision_is_read_from_its_variables(tmp_path):
    import tensorflow as tf

    from tfcompress.bench.size import measure_size
    from tfcompress.models.loading import SavedModelDir

    class Scale(tf.Module):
        def __init__(self, dtypes):
            super().__init__()
            self.weights_ = [tf.Variable(tf.ones([3], d)) for d in dtypes]
            self.step = tf.Variable(0, dtype=tf.int64)  # bookkeeping, not a weight

        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
        def __call__(self, x):
            for w in self.weights_:
                x = x * tf.cast(w, tf.float32)
            return x

    cases = {
        "f32": ((tf.float32,), "float32"),
        "f16": ((tf.float16,), "float16"),
        "both": ((tf.float32, tf.float16), "mixed"),
        "none": ((), "unknown"),  # no weights to read a dtype from: say so, not "float32"
    }
    for name, (dtypes, expected) in cases.items():
        tf.saved_model.save(Scale(dtypes), str(tmp_path / name))
        size = measure_size(SavedModelDir(tmp_path / name))
        assert size.precision == expected, name
        assert size.file_bytes > 0


def test_exported_keras_saved_model_row_says_float32(trained_cnn, tmp_path, test_data):
    from tfcompress.runtime.keras import tensorflow_threads

    trained_cnn.export(str(tmp_path / "exported"), verbose=False)
    result = tfcompress.benchmark(
        tmp_path / "exported",
        data=test_data,
        backends=("keras",),
        threads=(tensorflow_threads()[0],),  # the one count TensorFlow runs in this process
        **FAST,
    )
    (row,) = result.rows
    assert row.ok and row.size.precision == "float32"
    assert row.details["call"] == "saved_model_signature"  # its signature, a graph already
    assert row.init_ms > 0  # the SavedModel is loaded inside runner creation
