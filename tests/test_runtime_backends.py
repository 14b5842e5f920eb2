"""One template test for every registered backend; unavailable ones skip with their reason."""

from __future__ import annotations

import numpy as np
import pytest
from _bench_artifacts import build

from tfcompress.errors import BackendUnavailableError, UnsupportedModelError
from tfcompress.models import load_model
from tfcompress.runtime import create_runner, list_backends

ARTIFACT_FOR = {
    "cpu": "int8",
    "cpu-compiled": "int8",
    "gpu": "float32",
    "edgetpu": "int8",
    "onnxruntime": "onnx",
}
EXPECTED = {"cpu", "cpu-compiled", "gpu", "edgetpu", "onnxruntime", "keras"}


@pytest.fixture(scope="module")
def files(trained_cnn, int8_result, mnist_split):
    return build(trained_cnn, int8_result, mnist_split)


def test_all_backends_registered():
    assert set(list_backends()) >= EXPECTED


@pytest.mark.parametrize("backend", sorted(EXPECTED))
def test_backend_template(backend, files, mnist_split):
    """Same check on every backend: loads, predicts a batch, agrees with Keras, binds, closes."""
    model = load_model(files[ARTIFACT_FOR.get(backend, "keras")])
    try:
        runner = create_runner(model, backend=backend, threads=1)
    except BackendUnavailableError as error:
        pytest.skip(f"{backend} unavailable here: {error}")
    x = mnist_split.test.x[:40]
    reference = load_model(files["keras"])(x, training=False).numpy()
    with runner:
        outputs = runner.predict(x, batch_size=16)
        assert outputs.shape == (40, 10)
        assert outputs.dtype == np.float32
        # Same predictions as the Keras model on real digits (int8 may flip a rare one).
        agreement = (outputs.argmax(1) == reference.argmax(1)).mean()
        assert agreement >= 0.95
        call = runner.bind(x[:4])
        call()
        assert isinstance(runner.details(), dict)


def test_cpu_counts_delegated_ops_with_and_without_xnnpack(files):
    model = load_model(files["float32"])
    with create_runner(model, backend="cpu", use_xnnpack=True) as runner:
        on = runner.details()
    with create_runner(model, backend="cpu", use_xnnpack=False) as runner:
        off = runner.details()
    assert on["ops"] == off["ops"] > 0
    assert 0 < on["delegated_ops"] <= on["ops"]
    assert off["delegated_ops"] == 0


def test_compiled_model_path_runs_on_cpu_accelerator(files, mnist_split):
    """The gpu backend's CompiledModel code, exercised with the CPU accelerator here."""
    from tfcompress.runtime.gpu import CompiledModelRunner

    model = load_model(files["int8"])
    x = mnist_split.test.x[:5]
    with create_runner(model, backend="cpu") as cpu:
        expected = cpu.predict(x)
    with CompiledModelRunner(model, accelerators=("cpu",)) as runner:
        outputs = runner.predict(x)
        assert runner.details()["fully_accelerated"] is False
    np.testing.assert_allclose(outputs, expected, atol=0.02)


def test_each_backend_says_which_artifacts_it_runs(files):
    from tfcompress.runtime.base import backend_class

    loaded = {name: load_model(files[name]) for name in ("int8", "onnx", "keras")}
    runs = {
        backend: sorted(n for n, m in loaded.items() if backend_class(backend).accepts(m))
        for backend in EXPECTED
    }
    assert runs == {
        "cpu": ["int8"],
        "cpu-compiled": ["int8"],
        "gpu": ["int8"],
        "edgetpu": ["int8"],
        "onnxruntime": ["onnx"],
        "keras": ["keras"],
    }


def test_unavailable_backends_say_why():
    from tfcompress.runtime.edgetpu import find_library

    with pytest.raises(BackendUnavailableError, match="not found"):
        find_library("/nonexistent/libedgetpu.so.1")


def test_backend_refuses_wrong_format(files):
    with pytest.raises(UnsupportedModelError, match="onnxruntime"):
        create_runner(load_model(files["float32"]), backend="onnxruntime")
    with pytest.raises(UnsupportedModelError, match=r"\.tflite"):
        create_runner(load_model(files["onnx"]), backend="cpu")


@pytest.mark.gpu
def test_gpu_reports_full_acceleration(files):
    try:
        runner = create_runner(load_model(files["float32"]), backend="gpu")
    except BackendUnavailableError as error:
        pytest.skip(f"no GPU here: {error}")
    with runner:
        assert isinstance(runner.details()["fully_accelerated"], bool)


@pytest.mark.edgetpu
def test_edgetpu_runs_when_present(files):
    try:
        runner = create_runner(load_model(files["int8"]), backend="edgetpu")
    except BackendUnavailableError as error:
        pytest.skip(f"no Edge TPU here: {error}")
    with runner:
        assert "edgetpu_ops" in runner.details()
