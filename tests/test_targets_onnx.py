"""ONNX export (tf2onnx) and ORT static int8 quantization of the trained CNN."""

from __future__ import annotations

import numpy as np
import pytest
from _bench_artifacts import build
from _shared import kernel_atol, summed_terms

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
    expected = trained_cnn(x, training=False).numpy()
    atol = kernel_atol(expected, terms=summed_terms(trained_cnn))
    np.testing.assert_allclose(outputs, expected, atol=atol)


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


# --- the ONNX target: verified export, ONNX Runtime int8/dynamic/float16 --------------------


@pytest.fixture(scope="module")
def onnx_int8(trained_cnn, mnist_split):
    import tfcompress

    return tfcompress.quantize(
        trained_cnn, format="onnx", recipe="int8", representative_data=mnist_split.train
    )


def _accuracy_drop(result, mnist_split) -> float:
    import tfcompress

    evaluation = tfcompress.evaluate(
        {"float32": result.reference, result.recipe.name: result.model},
        (mnist_split.test.x, mnist_split.test.y),
    )
    reference, variant = evaluation.rows
    assert reference.backend == variant.backend == "onnxruntime"
    return evaluation.drop(variant.name)


def test_export_matches_keras_within_1e_4_on_the_mnist_cnn(trained_cnn, mnist_split):
    import tfcompress

    export = tfcompress.export_onnx(trained_cnn, sample_data=mnist_split.test.x[:64])
    check = export.verification
    assert check.passed and check.inputs == "data" and check.samples == 64
    assert check.worst[0] == "dense_1" and check.worst[1] <= 1e-4
    assert export.opset == 17 and export.source == "small_cnn" and export.path is None
    # independently of the built-in check: every test digit, through the runner
    x = mnist_split.test.x
    with create_runner(export) as runner:
        got = runner.predict(x)
    assert float(np.max(np.abs(got - trained_cnn.predict(x, verbose=0)))) <= 1e-4
    assert "max |onnx - keras|" in str(export) and export.to_dict()["verification"]["passed"]


def test_onnx_runtime_int8_keeps_accuracy_and_shrinks(onnx_int8, mnist_split):
    assert onnx_int8.format == "onnx" and onnx_int8.recipe.calibration_method == "minmax"
    assert onnx_int8.recipe.per_channel is True and onnx_int8.calibration_samples == 200
    assert onnx_int8.size_ratio <= 0.35  # int8 .onnx vs the float .onnx bytes
    assert measure_size(onnx_int8.model).precision == "int8"
    assert _accuracy_drop(onnx_int8, mnist_split) <= 0.01  # at most 1.0 point
    assert onnx_int8.export_check is not None and onnx_int8.export_check.passed


def test_onnx_result_has_the_tflite_result_interface(onnx_int8, int8_result, tmp_path):
    from tfcompress.quantization.onnx_ptq import OnnxRecipe

    for name in ("recipe", "size_bytes", "reference_size_bytes", "size_ratio", "model"):
        assert hasattr(int8_result, name) and hasattr(onnx_int8, name)
    data = onnx_int8.to_dict()
    assert data["format"] == "onnx" and int8_result.to_dict()["format"] == "tflite"
    assert OnnxRecipe.from_dict(data["recipe"]) == onnx_int8.recipe  # replayable
    assert "[int8, onnx]" in str(onnx_int8) and "of float32" in str(onnx_int8)
    saved = onnx_int8.save(tmp_path / "m.onnx")
    assert load_model(saved).content == onnx_int8.model_content
    with pytest.raises(OutputExistsError):
        onnx_int8.save(saved)


@pytest.mark.parametrize("method", ["entropy", "percentile"])
def test_histogram_calibration_streams_in_chunks(trained_cnn, mnist_split, monkeypatch, method):
    import math

    import tfcompress
    from tfcompress.targets.onnx import ort_quantize

    readers = []
    real = ort_quantize.make_reader

    def recording(*args, **kwargs):
        readers.append(real(*args, **kwargs))
        return readers[-1]

    monkeypatch.setattr(ort_quantize, "make_reader", recording)
    monkeypatch.setenv("TFCOMPRESS_IN_PROCESS", "1")  # the reader is read here, to be seen
    result = tfcompress.quantize(
        trained_cnn,
        format="onnx",
        representative_data=mnist_split.train,
        calibration_method=method,
        calibration_samples=100,
    )
    (reader,) = readers
    batches = math.ceil(100 / ort_quantize.CALIBRATION_BATCH)
    # ONNX Runtime reduced the activations of at most CHUNK batches at a time
    assert reader.largest_chunk == ort_quantize.CALIBRATION_CHUNK
    assert reader.ranges == math.ceil(batches / ort_quantize.CALIBRATION_CHUNK)
    assert result.recipe.calibration_method == method
    assert _accuracy_drop(result, mnist_split) <= 0.01


@pytest.mark.parametrize(("recipe", "max_ratio"), [("dynamic", 0.35), ("float16", 0.55)])
def test_dynamic_and_float16(trained_cnn, mnist_split, recipe, max_ratio):
    import tfcompress

    result = tfcompress.quantize(trained_cnn, format="onnx", recipe=recipe)
    assert result.calibration_samples == 0 and result.size_ratio <= max_ratio
    assert _accuracy_drop(result, mnist_split) <= 0.01


def test_two_inputs_two_outputs_export_and_quantize():
    import tfcompress
    from tfcompress._compat.keras import keras_module
    from tfcompress.models import model_signature
    from tfcompress.samples.datasets import digits
    from tfcompress.samples.tasks import two_head_cnn, two_input_data

    data = two_input_data(digits().train)
    keras_module("keras3").utils.set_random_seed(0)
    model = two_head_cnn()  # untrained: exporting and quantizing need no training
    export = tfcompress.export_onnx(model, sample_data=data)
    signature = model_signature(export)
    assert signature.input_names == ("image", "gain")  # the Keras names, in the Keras order
    assert signature.output_names == ("cls", "box")
    assert {name for name, _ in export.verification.max_abs_diff} == {"cls", "box"}
    result = tfcompress.quantize(model, format="onnx", representative_data=data)
    assert model_signature(result.model).output_names == ("cls", "box")
    x = {name: array[:32] for name, array in data.x.items()}
    with create_runner(result.model) as int8, create_runner(export) as float32:
        got, want = int8.run(x), float32.run(x)
    assert got["cls"].shape == (32, 10) and got["box"].shape == (32, 4)
    for head in ("cls", "box"):  # int8 stays within a few hundredths of float32 (~0.01 seen)
        assert float(np.max(np.abs(got[head] - want[head]))) < 0.05


def _gelu_model():
    import keras

    inputs = keras.Input((6,), name="x")
    hidden = keras.layers.Dense(4, activation="gelu", name="exact_gelu")(inputs)  # uses Erfc
    return keras.Model(inputs, keras.layers.Dense(2, name="y")(hidden), name="gelu_net")


def test_an_op_tf2onnx_cannot_convert_is_named(tmp_path):
    from tfcompress.errors import ConversionError

    out = tmp_path / "gelu.onnx"
    with pytest.raises(ConversionError, match=r"Erfc .*exact_gelu.*approximate=True"):
        export_onnx(_gelu_model(), out)
    assert list(tmp_path.iterdir()) == []  # nothing written, no temporary file left


def test_export_that_differs_from_keras_is_refused(trained_cnn, tmp_path):
    from tfcompress.errors import ConversionError

    out = tmp_path / "strict.onnx"
    with pytest.raises(ConversionError, match=r"output 'dense_1' differs by up to \d"):
        export_onnx(trained_cnn, out, atol=0.0)  # float32 rounding is never exactly zero
    assert not out.exists()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"recipe": "int16x8"}, "int16x8' is .tflite only"),
        ({"recipe": "int4"}, "unknown ONNX recipe"),
        ({"calibration_method": "kl"}, "unknown calibration method"),
        ({"recipe": "dynamic", "calibration_method": "entropy"}, "does not calibrate"),
        ({"recipe": "float16", "per_channel": False}, "no integer weights"),
        ({"input_type": "int8"}, "applies to .tflite only"),
        ({"integer_only": True}, "applies to .tflite only"),
        ({"opset": 19}, "choose 13 to 18"),
        ({"format": "coreml"}, "unknown format"),
    ],
)
def test_bad_onnx_options(trained_cnn, mnist_split, kwargs, message):
    import tfcompress
    from tfcompress.errors import InvalidInputError

    options = {"format": "onnx", "representative_data": mnist_split.train.x[:8], **kwargs}
    with pytest.raises(InvalidInputError, match=message):
        tfcompress.quantize(trained_cnn, **options)


def test_onnx_options_are_refused_for_tflite(trained_cnn):
    import tfcompress
    from tfcompress.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="applies to format='onnx'"):
        tfcompress.quantize(trained_cnn, recipe="dynamic", calibration_method="entropy")


def test_float16_without_a_converter_names_the_package(files, monkeypatch):
    from tfcompress._compat import onnx as compat
    from tfcompress.errors import MissingDependencyError
    from tfcompress.targets.onnx import ort_quantize

    monkeypatch.setattr(compat, "FLOAT16_CONVERTERS", ("no_such_module_a", "no_such_module_b"))
    compat.float16_converter.cache_clear()
    try:
        with pytest.raises(MissingDependencyError, match="pip install onnxconverter-common"):
            ort_quantize.float16(load_model(files["onnx"]))
    finally:
        compat.float16_converter.cache_clear()


def _data_sized_fill(path):
    """An ``.onnx`` whose ConstantOfShape holds max(x) * 1e9 floats: 4 GB on data near 1."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("ReduceMax", ["x"], ["top"], keepdims=0),
        helper.make_node("Mul", ["top", "scale"], ["scaled"]),
        helper.make_node("Cast", ["scaled"], ["count"], to=TensorProto.INT64),
        helper.make_node("Reshape", ["count", "one"], ["shape"]),
        helper.make_node("ConstantOfShape", ["shape"], ["filled"]),
        helper.make_node("ReduceSum", ["filled"], ["total"], keepdims=1),
        helper.make_node("MatMul", ["x", "w"], ["mixed"]),
        helper.make_node("Add", ["mixed", "total"], ["y"]),
    ]
    constants = [
        helper.make_tensor("scale", TensorProto.FLOAT, [], [1e9]),
        helper.make_tensor("one", TensorProto.INT64, [1], [1]),
        helper.make_tensor("w", TensorProto.FLOAT, [4, 2], np.ones(8).tolist()),
    ]
    graph = helper.make_graph(
        nodes,
        "fill",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 2])],
        constants,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def test_a_fill_the_data_sizes_ends_in_one_line_in_calibration(tmp_path, capsys):
    from tfcompress.cli import main

    model, data, out = tmp_path / "fill.onnx", tmp_path / "calib.npz", tmp_path / "int8.onnx"
    _data_sized_fill(model)
    np.savez(data, x=np.random.default_rng(0).uniform(0.5, 1.0, (16, 4)).astype(np.float32))
    code = main(["quantize", str(model), "--data", str(data), "--out", str(out)])
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert code == 2 and len(errors) == 1 and not out.exists(), errors
    assert "ONNX Runtime ran out of memory" in errors[0] and "ConstantOfShape" in errors[0]
    assert "TFCOMPRESS_MEMORY_LIMIT" in errors[0]
