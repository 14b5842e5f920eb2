"""Backend and benchmark options: every one accepted is honoured or refused.

Runners take only the options their backend declares; the Keras row's threads are the ones
that ran; ``benchmark`` routes a named backend to the artifacts it runs (or a row saying
why), refuses before timing anything an option no row would honour, and never overwrites a
report without ``--force``.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from _bench_artifacts import build
from _shared import kernel_atol, summed_terms

import tfcompress
from tfcompress.cli import main
from tfcompress.errors import InvalidInputError, OutputExistsError
from tfcompress.runtime import (
    SettingUnavailableError,
    backend_option_names,
    create_runner,
    list_backends,
)
from tfcompress.runtime.base import BACKENDS, backend_class

FAST = {"runs": 3, "min_seconds": 0, "warmup_seconds": 0}
CLI_FAST = ["--runs", "3", "--min-seconds", "0", "--warmup-seconds", "0"]


@pytest.fixture(scope="module")
def files(trained_cnn, int8_result, mnist_split):
    return build(trained_cnn, int8_result, mnist_split)


@pytest.fixture(scope="module")
def test_data(mnist_split):
    return (mnist_split.test.x[:100], mnist_split.test.y[:100])


# --- runner options ---------------------------------------------------------------------


@pytest.mark.parametrize("backend", sorted(set(list_backends())))
def test_no_backend_swallows_options(backend):
    """No runner signature has a ``**kwargs`` sink that would drop an option unheard."""
    parameters = inspect.signature(backend_class(backend).__init__).parameters.values()
    assert not [p.name for p in parameters if p.kind is inspect.Parameter.VAR_KEYWORD]
    assert "threads" in backend_option_names(backend)  # every backend honours or refuses it


@pytest.mark.parametrize(
    ("backend", "option", "takers"),
    [
        ("cpu-compiled", "use_xnnpack", "option of the cpu backend"),
        ("gpu", "use_xnnpack", "option of the cpu backend"),
        ("edgetpu", "use_xnnpack", "option of the cpu backend"),
        ("keras", "use_xnnpack", "option of the cpu backend"),
        ("cpu", "device", "option of the edgetpu backend"),
        ("gpu", "providers", "option of the onnxruntime backend"),
        ("onnxruntime", "num_threads", "no backend has an option 'num_threads'"),
    ],
)
def test_unknown_option_is_refused_naming_who_takes_it(files, backend, option, takers):
    # Refused before the model is even loaded: a missing file does not hide the typo.
    with pytest.raises(InvalidInputError) as caught:
        create_runner(files["int8"], backend=backend, **{option: False})
    message = str(caught.value)
    assert f"the {backend!r} backend has no option {option!r}" in message
    assert takers in message


def test_xnnpack_is_refused_by_cpu_compiled_and_honoured_by_cpu(files):
    with pytest.raises(InvalidInputError, match="'cpu-compiled' backend has no option"):
        create_runner(files["int8"], backend="cpu-compiled", use_xnnpack=False)
    with create_runner(files["int8"], backend="cpu", use_xnnpack=False) as runner:
        assert runner.details()["xnnpack"] is False  # where it is an option, it is honoured


def test_a_forwarding_backend_gets_the_same_clear_error(monkeypatch, files):
    """A future backend that forwards ``**kwargs`` to a parent: Python's TypeError, rephrased."""
    from tfcompress.runtime.litert import LiteRTRunner

    class Forwarding(LiteRTRunner):
        def __init__(self, model, **kwargs):
            super().__init__(model, **kwargs)

    class Broken(LiteRTRunner):
        def __init__(self, model, *, threads=1):
            raise TypeError("a bug that has nothing to do with options")

    monkeypatch.setitem(BACKENDS, "forwarding", Forwarding)
    monkeypatch.setitem(BACKENDS, "broken", Broken)
    with pytest.raises(InvalidInputError, match="'forwarding' backend has no option 'device'"):
        create_runner(files["int8"], backend="forwarding", device="usb")
    with create_runner(files["int8"], backend="forwarding", threads=2) as runner:
        assert runner.threads == 2
    with pytest.raises(TypeError, match="nothing to do with options"):
        create_runner(files["int8"], backend="broken", threads=1)


# --- keras backend: threads and the compiled call -----------------------------------------


def test_keras_runner_is_a_traced_graph_not_eager_calls(files, mnist_split):
    from tfcompress.models import load_model

    model = load_model(files["keras"])
    x = mnist_split.test.x[:8]
    with create_runner(model, backend="keras") as runner:
        assert runner.details()["call"] == "tf.function"
        outputs = runner.predict(x, batch_size=4)
        expected = model(x, training=False).numpy()  # eager kernels; the graph may fuse ops
        atol = kernel_atol(expected, terms=summed_terms(model))
        np.testing.assert_allclose(outputs, expected, atol=atol)
        call = runner.bind(x[:4])
        traced = runner._function.experimental_get_tracing_count()
        for _ in range(5):
            call()
        # A graph traced once and replayed: eager calls (the old baseline) trace nothing.
        assert 1 <= traced == runner._function.experimental_get_tracing_count()


def test_keras_threads_are_honoured_or_refused_in_a_running_process(files):
    from tfcompress.models import load_model
    from tfcompress.runtime.keras import tensorflow_threads

    model = load_model(files["keras"])  # TensorFlow has started: its pools are fixed
    running, _ = tensorflow_threads()
    with create_runner(model, backend="keras", threads=running) as runner:
        assert runner.details()["threads"] == running
    other = running + 1
    with pytest.raises(SettingUnavailableError) as caught:
        create_runner(model, backend="keras", threads=other)
    assert str(caught.value).startswith(
        f"the keras backend cannot run with {other} thread(s) in this process: TensorFlow "
        f"fixes its thread pools when it starts and already runs {running} intra-op thread(s)"
    )


def test_benchmark_labels_no_keras_row_with_threads_that_did_not_happen(files, test_data):
    from tfcompress.runtime.keras import tensorflow_threads

    running, _ = tensorflow_threads()
    result = tfcompress.benchmark(
        files["keras"], data=test_data, backends=("keras",), threads=(running, running + 1), **FAST
    )
    measured, refused = result.rows
    assert measured.ok and measured.threads == running
    assert measured.details["threads"] == running and measured.details["call"] == "tf.function"
    assert refused.threads == running + 1 and refused.latency is None
    expected = f"unavailable: the keras backend cannot run with {running + 1} thread(s)"
    assert refused.status.startswith(expected)


def test_benchmark_pins_tensorflow_threads_in_a_fresh_process(files, tmp_path):
    """The CLI pins TensorFlow to the first --threads value before loading the model."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    command = [sys.executable, "-m", "tfcompress", "benchmark", str(files["keras"])]
    command += ["--backends", "keras", "--threads", "1,2", "--json", *CLI_FAST]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    one, two = json.loads(done.stdout)["rows"]
    assert one["status"] == "ok" and one["threads"] == 1
    assert one["backend_details"]["threads"] == 1
    assert one["backend_details"]["inter_op_threads"] == 1
    assert one["backend_details"]["threads_pinned"] is True
    assert two["threads"] == 2 and two["latency_ms"] is None
    assert "cannot run with 2 thread(s)" in two["status"] and "runs 1 intra-op" in two["status"]


# --- routes: onnxruntime without .onnx, named backends that run nothing -------------------


def test_onnxruntime_without_onnx_runs_the_keras_export_once(files, test_data, monkeypatch):
    import tfcompress.targets.onnx as targets_onnx

    calls = []
    real_export = targets_onnx.export_onnx

    def counting_export(model, *args, **kwargs):
        calls.append(model)
        return real_export(model, *args, **kwargs)

    monkeypatch.setattr(targets_onnx, "export_onnx", counting_export)
    result = tfcompress.benchmark(
        [files["keras"], files["int8"]],
        data=test_data,
        backends=("onnxruntime",),
        threads=(1, 2),
        **FAST,
    )
    assert len(calls) == 1  # one export per artifact, shared by its thread counts
    keras_rows = result["cnn.keras"]
    assert [(r.backend, r.threads, r.status) for r in keras_rows] == [
        ("onnxruntime", 1, "ok"),
        ("onnxruntime", 2, "ok"),
    ]
    for row in keras_rows:
        assert row.details["converted"] == "keras -> onnx (tf2onnx)"
        assert row.details["converted_bytes"] > 0 and row.accuracy >= 0.85
    skipped, *cpu_rows = result["cnn_int8.tflite"]
    assert skipped.backend == "onnxruntime" and skipped.latency is None
    assert skipped.status == (
        "skipped: onnxruntime runs .onnx; cnn_int8.tflite is a .tflite, and tfcompress "
        "converts only Keras models to ONNX."
    )
    assert {r.backend for r in cpu_rows} == {"cpu"} and all(r.ok for r in cpu_rows)


def test_the_conversion_serves_onnxruntime_only(files, test_data):
    from tfcompress.runtime.keras import tensorflow_threads

    result = tfcompress.benchmark(
        files["keras"],
        data=test_data,
        backends=("onnxruntime", "keras"),
        threads=(tensorflow_threads()[0],),
        **FAST,
    )
    onnx_row, keras_row = result.rows
    assert onnx_row.ok and onnx_row.details["converted"] == "keras -> onnx (tf2onnx)"
    assert "providers" in onnx_row.details  # ONNX Runtime ran it
    assert keras_row.ok and "converted" not in keras_row.details
    assert keras_row.details["call"] == "tf.function"  # the Keras model itself, not the export
    assert abs(onnx_row.accuracy - keras_row.accuracy) < 0.01


def test_a_named_backend_that_runs_no_artifact_says_why(files, capsys):
    code = main(
        ["benchmark", str(files["keras"]), "--backends", "gpu,cpu-compiled", "--json", *CLI_FAST]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err  # a skipped row is not a failure
    rows = json.loads(captured.out)["rows"]
    statuses = {r["backend"]: r["status"] for r in rows}
    assert statuses["gpu"] == (
        "skipped: gpu runs .tflite; cnn.keras is a Keras model: convert it first "
        "(tfcompress quantize MODEL --recipe float32 --out M.tflite)."
    )
    assert statuses["cpu-compiled"].startswith("skipped: cpu-compiled runs .tflite;")
    assert "keras" in statuses  # still measured on its natural backend, as before


def test_onnx_present_means_no_conversion(files, test_data):
    result = tfcompress.benchmark(
        [files["onnx"], files["int8"]], data=test_data, backends=("onnxruntime", "cpu"), **FAST
    )
    assert [(r.artifact, r.backend) for r in result.rows] == [
        ("cnn_float32.onnx", "onnxruntime"),
        ("cnn_int8.tflite", "cpu"),
    ]
    assert all(r.ok and "converted" not in r.details for r in result.rows)


# --- benchmark options refused before anything is timed -----------------------------------


@pytest.mark.parametrize(
    ("backends", "options", "message"),
    [
        (("cpu-compiled",), {"cpu-compiled": {"use_xnnpack": False}}, "has no option"),
        (("cpu",), {"edgetpu": {"device": "usb"}}, "not among the requested backends"),
        (("cpu",), {"cpu": {"threads": 4}}, "labels every row"),
    ],
)
def test_benchmark_refuses_options_no_row_would_honour(
    files, monkeypatch, backends, options, message
):
    timed = []
    monkeypatch.setattr("tfcompress.bench.rows.measure", lambda *a, **k: timed.append(a))
    with pytest.raises(InvalidInputError, match=message):
        tfcompress.benchmark(files["int8"], backends=backends, backend_options=options, **FAST)
    assert timed == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--no-xnnpack", "--backends", "cpu-compiled"], "--no-xnnpack applies to the cpu backend"),
        (["--edgetpu-device", "usb:0"], "applies to the edgetpu backend"),
        (["--force"], "--force replaces report files; give it with --report DIR"),
    ],
)
def test_cli_refuses_flags_no_row_would_honour(files, capsys, argv, message):
    assert main(["benchmark", str(files["int8"]), *argv, *CLI_FAST]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and message in captured.err


def test_report_folder_with_a_report_is_refused_before_timing(files, tmp_path, monkeypatch):
    first = tfcompress.benchmark(files["int8"], report_dir=tmp_path, **FAST)
    assert first.report_files
    written = {p: p.read_bytes() for p in first.report_files}
    timed = []
    monkeypatch.setattr("tfcompress.bench.rows.measure", lambda *a, **k: timed.append(a))
    with pytest.raises(OutputExistsError, match=r"already holds benchmark\.json"):
        tfcompress.benchmark(files["int8"], report_dir=tmp_path, **FAST)
    assert timed == []  # refused before anything was timed
    assert {p: p.read_bytes() for p in first.report_files} == written
