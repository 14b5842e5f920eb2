"""One template test for every registered backend; unavailable ones skip with their reason.

The backends are the registry's (:func:`list_backends`), not a list here: a new backend module
runs this template as soon as it is registered. Each one gets the first file it accepts among
``OFFERED``: an int8 ``.tflite`` at a static batch of 1 (every ``.tflite`` runtime takes it,
a GPU and TFLite Micro included), the ``.onnx`` export, the Keras model.
"""

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
from tfcompress.runtime.base import backend_class

BACKENDS = list_backends()
# A static batch: a GPU takes the CNN whole (a dynamic batch adds SHAPE...), TFLM plans it.
OFFERED = ("int8_static", "onnx", "keras")


@pytest.fixture(scope="module")
def files(trained_cnn, int8_result, mnist_split, tmp_path_factory):
    made = dict(build(trained_cnn, int8_result, mnist_split))
    folder = tmp_path_factory.mktemp("static")
    for name, recipe in (("float32_static", "float32"), ("int8_static", "int8")):
        made[name] = folder / f"cnn_{name}.tflite"
        made[name].write_bytes(
            tfcompress.quantize(
                trained_cnn,
                recipe=Recipe(recipe, static_batch=1),
                representative_data=mnist_split.train.x[:100],
            ).model_content
        )
    return made


def test_the_registry_holds_the_backends_the_source_declares():
    from tfcompress._declared import declared_backends

    assert [b.name for b in declared_backends()] == BACKENDS  # what --backend offers


def _ops(model) -> int:
    return sum(tfcompress.inspect_model(model.content).op_histogram.values())


def _int8_atol(model, expected) -> float:
    """Two int8 kernels may round each requantizing op a step apart: a step of the output each."""
    return kernel_atol(expected, terms=_ops(model), step=grid_step(expected))


@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_template(backend, files, mnist_split):
    """Same check on every backend: loads, predicts a batch, agrees with Keras, binds, closes."""
    offered = [n for n in OFFERED if backend_class(backend).accepts(load_model(files[n]))]
    assert offered, f"{backend} runs none of {OFFERED}: add the artifact it runs"
    model = load_model(files[offered[0]])
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


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_backend_says_which_artifacts_it_runs(backend, files):
    loaded = {name: load_model(files[name]) for name in ("int8", "onnx", "keras")}
    runs = [n for n, m in loaded.items() if backend_class(backend).accepts(m)]
    assert runs, f"{backend} runs none of the int8 .tflite, the .onnx and the Keras model"
    for other in sorted(set(loaded) - set(runs)):  # refused, never run
        try:
            create_runner(loaded[other], backend=backend).close()
        except UnsupportedModelError:
            continue
        except BackendUnavailableError as error:
            pytest.skip(f"{backend} unavailable here: {error}")
        raise AssertionError(f"{backend} ran the {other} artifact, which it does not accept")


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
