"""ONNX export (tf2onnx) and ORT static int8 quantization of the trained CNN."""

from __future__ import annotations

import numpy as np
import pytest
from _bench_artifacts import build

from tfcompress.bench.size import measure_size
from tfcompress.errors import ModelLoadError, OutputExistsError, UnsupportedModelError
from tfcompress.models import OnnxModel, input_spec, load_model
from tfcompress.runtime import create_runner
from tfcompress.targets.onnx import export_onnx


@pytest.fixture(scope="module")
def files(trained_cnn, int8_result, mnist_split):
    return build(trained_cnn, int8_result, mnist_split)


def test_exported_model_matches_keras(files, trained_cnn, mnist_split):
    model = load_model(files["onnx"])
    assert isinstance(model, OnnxModel)
    assert input_spec(model).shape == (None, 28, 28, 1)
    x = mnist_split.test.x[:64]
    with create_runner(model) as runner:
        outputs = runner.predict(x)
    np.testing.assert_allclose(outputs, trained_cnn(x, training=False).numpy(), atol=1e-4)


def test_static_int8_is_smaller_and_keeps_accuracy(files, mnist_split):
    float_model, int8_model = load_model(files["onnx"]), load_model(files["onnx_int8"])
    float_size, int8_size = measure_size(float_model), measure_size(int8_model)
    assert float_size.precision == "float32" and int8_size.precision == "int8"
    assert int8_size.file_bytes < 0.3 * float_size.file_bytes
    assert int8_size.macs == float_size.macs == 2_631_040  # conv, conv, dense, dense
    x, y = mnist_split.test.x, mnist_split.test.y
    with create_runner(float_model) as a, create_runner(int8_model) as b:
        drop = (a.predict(x).argmax(1) == y).mean() - (b.predict(x).argmax(1) == y).mean()
    assert drop < 0.02


def test_export_refuses_non_keras_and_existing_output(files, trained_cnn):
    with pytest.raises(UnsupportedModelError, match="Keras"):
        export_onnx(load_model(files["float32"]))
    with pytest.raises(OutputExistsError):
        export_onnx(trained_cnn, files["onnx"])


def test_corrupt_onnx_is_a_load_error(files, tmp_path):
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(files["onnx"].read_bytes()[:3000])
    with pytest.raises(ModelLoadError, match="corrupt"):
        load_model(broken)
    wrong = tmp_path / "wrong.onnx"
    wrong.write_bytes(b"TFL3 not onnx")
    with pytest.raises(ModelLoadError, match="not an ONNX model"):
        load_model(wrong)
