"""One template test for every registered backend; unavailable ones skip with their reason."""

from __future__ import annotations

import re

import numpy as np
import pytest
from _bench_artifacts import build
from _shared import grid_step, kernel_atol

import tfcompress
from tfcompress.errors import BackendUnavailableError, UnsupportedModelError
from tfcompress.models import load_model
from tfcompress.quantization import Recipe
from tfcompress.runtime import create_runner, list_backends

ARTIFACT_FOR = {
    "cpu": "int8",
    "cpu-compiled": "int8",
    "gpu": "float32_static",  # a GPU takes the CNN whole at a static batch (dynamic: SHAPE...)
    "edgetpu": "int8",
    "onnxruntime": "onnx",
}
EXPECTED = {"cpu", "cpu-compiled", "gpu", "edgetpu", "onnxruntime", "keras"}


@pytest.fixture(scope="module")
def files(trained_cnn, int8_result, mnist_split, tmp_path_factory):
    made = dict(build(trained_cnn, int8_result, mnist_split))
    static = tmp_path_factory.mktemp("gpu") / "cnn_float32_b1.tflite"
    static.write_bytes(
        tfcompress.quantize(trained_cnn, recipe=Recipe("float32", static_batch=1)).model_content
    )
    return {**made, "float32_static": static}


def _ops(model) -> int:
    return sum(tfcompress.inspect_model(model.content).op_histogram.values())


def _int8_atol(model, expected) -> float:
    """Two int8 kernels may round each requantizing op a step apart: a step of the output each."""
    return kernel_atol(expected, terms=_ops(model), step=grid_step(expected))


def test_all_backends_registered():
    assert set(list_backends()) >= EXPECTED


@pytest.mark.parametrize("backend", sorted(EXPECTED))
def test_backend_template(backend, files, mnist_split):
    """Same check on every backend: loads, predicts a batch, agrees with Keras, binds, closes."""
    model = load_model(files[ARTIFACT_FOR.get(backend, "keras")])
    threads = 1
    if backend == "keras":  # TensorFlow runs one thread count per process: ask for that one
        from tfcompress.runtime.keras import tensorflow_threads

        threads = tensorflow_threads()[0]
    try:
        runner = create_runner(model, backend=backend, threads=threads)
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
        # Every backend reports the thread count it really ran, equal to the one asked for.
        assert runner.details()["threads"] == threads


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
    from tfcompress.runtime.compiled_model import CompiledModelRunner

    model = load_model(files["int8"])
    x = mnist_split.test.x[:5]
    with create_runner(model, backend="cpu") as cpu:
        expected = cpu.predict(x)
    with CompiledModelRunner(model, accelerators=("cpu",)) as runner:
        outputs = runner.predict(x)
        assert runner.details()["fully_accelerated"] is False
    np.testing.assert_allclose(outputs, expected, atol=_int8_atol(model, expected))


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
def test_gpu_runs_like_the_cpu_or_says_why_not(files, mnist_split):
    """With a GPU: the same predictions as the CPU runtime, on the GPU. Without: a reason."""
    model = load_model(files["float32_static"])
    try:
        runner = create_runner(model, backend="gpu")
    except BackendUnavailableError as error:
        message = str(error)
        assert re.search(r"\bGPU\b", message), message  # names what is missing
        assert "'cpu'" in message, message  # and what to use instead
        return
    x = mnist_split.test.x[:32]
    with create_runner(model, backend="cpu") as cpu:
        expected = cpu.predict(x)
    with runner:
        outputs = runner.predict(x)
        details = runner.details()
    # GPU delegates compute in fp16 where allowed: each op rounds its inputs and its output.
    atol = kernel_atol(expected, terms=2 * _ops(model), dtype="float16")
    np.testing.assert_allclose(outputs, expected, atol=atol)
    assert (outputs.argmax(1) == expected.argmax(1)).mean() >= 0.97
    assert details["accelerators"] == "GPU|CPU"
    # At a static batch every op of the CNN has a GPU kernel: the whole model must run
    # accelerated, not quietly in the interpreter.
    ops = set(tfcompress.inspect_model(model.content).op_histogram)
    assert ops == {"CONV_2D", "MAX_POOL_2D", "RESHAPE", "FULLY_CONNECTED", "SOFTMAX"}, ops
    assert details["fully_accelerated"] is True
    # The dynamic-batch file computes its Flatten shape (SHAPE, STRIDED_SLICE, PACK): a GPU
    # refuses it, and the message names those ops and the fix, not "no GPU".
    with pytest.raises(UnsupportedModelError, match=r"SHAPE \(op \d+\).*--static-batch 1"):
        create_runner(load_model(files["float32"]), backend="gpu")


@pytest.mark.edgetpu
def test_edgetpu_runs_like_the_cpu_or_says_why_not(files, mnist_split):
    """With libedgetpu and a device: CPU-equal predictions. Without: the library and its fix."""
    model = load_model(files["int8"])
    try:
        runner = create_runner(model, backend="edgetpu")
    except BackendUnavailableError as error:
        message = str(error)
        # Either the runtime library is missing (named, with the package that installs it),
        # or it loaded and no device answered (named, with how to check the device).
        assert "libedgetpu" in message, message
        assert "libedgetpu1-std" in message or "plugged in" in message, message
        return
    x = mnist_split.test.x[:32]
    with create_runner(model, backend="cpu") as cpu:
        expected = cpu.predict(x)
    with runner:
        outputs = runner.predict(x)
        details = runner.details()
    # An uncompiled int8 model runs its ops on the CPU through the same kernels.
    assert details["edgetpu_ops"] == 0
    np.testing.assert_allclose(outputs, expected, atol=_int8_atol(model, expected))
