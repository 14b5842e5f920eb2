"""The LiteRT runner: quantized I/O, batching, fixed-batch models, XNNPACK on and off."""

import numpy as np
import pytest
from _shared import grid_step, kernel_atol, summed_terms

from tfcompress.errors import InvalidInputError, UnsupportedModelError
from tfcompress.runtime import create_runner
from tfcompress.runtime.litert import dequantize, quantize


def test_quantize_round_trip_is_within_half_a_step():
    detail = {"dtype": np.int8, "quantization": (0.02, -3)}
    x = np.linspace(-2.5, 2.5, 101, dtype=np.float32)
    q = quantize(x, detail)
    assert q.dtype == np.int8
    assert np.abs(dequantize(q, detail) - x).max() <= 0.01 + 1e-6
    assert quantize(np.array([100.0]), detail)[0] == 127  # saturates, never wraps


def test_batched_equals_one_by_one(int8_result, mnist_split):
    x = mnist_split.test.x[:70]
    with create_runner(int8_result.model, threads=2) as runner:
        batched = runner.predict(x, batch_size=32)  # 32 + 32 + padded 6
        single = np.concatenate([runner.predict(x[i : i + 1]) for i in range(len(x))])
    # one sample at a time takes other XNNPACK kernels than a batch of 32: a step per op
    step = grid_step(single)
    np.testing.assert_allclose(batched, single, atol=kernel_atol(single, terms=4, step=step))
    assert batched.shape == (70, 10)


def test_xnnpack_off_gives_the_same_answers(int8_result, trained_cnn, mnist_split):
    x = mnist_split.test.x[:16]
    with (
        create_runner(int8_result.reference, use_xnnpack=False) as plain,
        create_runner(int8_result.reference) as xnnpack,
    ):
        expected = plain.predict(x)
        atol = kernel_atol(expected, terms=summed_terms(trained_cnn))
        np.testing.assert_allclose(xnnpack.predict(x), expected, atol=atol)


def test_fixed_batch_model_is_chunked_and_padded(trained_tf_keras_cnn, mnist_split):
    import tf_keras

    import tfcompress

    layers = [
        layer.__class__.from_config(layer.get_config()) for layer in trained_tf_keras_cnn.layers
    ]
    fixed = tf_keras.Sequential([tf_keras.Input((28, 28, 1), batch_size=4), *layers])
    fixed.set_weights(trained_tf_keras_cnn.get_weights())
    content = tfcompress.quantize(fixed, recipe="float32").model_content
    x = mnist_split.test.x[:10]
    with create_runner(content) as runner:
        assert runner.layout.static_batch == 4 and runner.preferred_batch_size == 4
        outputs = runner.predict(x)
    expected = np.asarray(trained_tf_keras_cnn(x))
    atol = kernel_atol(expected, terms=summed_terms(trained_tf_keras_cnn))
    np.testing.assert_allclose(outputs, expected, atol=atol)


def test_runner_errors(int8_result, trained_cnn):
    with pytest.raises(InvalidInputError, match="threads must be at least 1"):
        create_runner(int8_result.model, threads=0)
    with pytest.raises(UnsupportedModelError, match="use backend='keras'"):
        create_runner(trained_cnn, backend="cpu")
    with pytest.raises(InvalidInputError, match="unknown backend 'tpu'"):
        create_runner(int8_result.model, backend="tpu")
