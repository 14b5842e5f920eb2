"""Post-training quantization on a CNN trained on real MNIST digits."""

import contextlib
import json

import numpy as np
import pytest

import tfcompress
from tfcompress.errors import InvalidDataError, InvalidInputError, UnsupportedModelError
from tfcompress.quantization import Recipe, list_recipes


@pytest.fixture(scope="module")
def recipes(trained_cnn, mnist_split, int8_result):
    results = {"int8": int8_result}
    for name in ("dynamic", "float16", "int16x8"):
        results[name] = tfcompress.quantize(
            trained_cnn, recipe=name, representative_data=mnist_split.train
        )
    return results


@pytest.fixture(scope="module")
def evaluation(trained_cnn, recipes, mnist_split):
    variants = {"keras": trained_cnn, "float32": recipes["int8"].reference}
    variants |= {name: result.model for name, result in recipes.items()}
    return tfcompress.evaluate(variants, mnist_split.test)


@pytest.mark.parametrize(
    ("recipe", "max_ratio"), [("int8", 0.30), ("dynamic", 0.35), ("float16", 0.55)]
)
def test_size_ratios(recipes, recipe, max_ratio):
    result = recipes[recipe]
    assert result.size_ratio <= max_ratio, str(result)
    assert result.size_bytes == len(result.model_content)


def test_reference_is_the_float32_tflite(evaluation):
    assert evaluation["keras"].score > 0.93  # the fixture really learned
    assert abs(evaluation["float32"].score - evaluation["keras"].score) <= 0.002


@pytest.mark.parametrize(
    ("recipe", "max_drop"),
    [("int8", 0.01), ("dynamic", 0.01), ("float16", 0.002), ("int16x8", 0.005)],
)
def test_accuracy_drop_on_held_out_digits(evaluation, recipe, max_drop):
    assert evaluation.samples >= 1000
    assert evaluation.drop(recipe) <= max_drop, str(evaluation)


def test_int8_artifact_is_full_integer(int8_result):
    info = tfcompress.inspect_model(int8_result.model_content)
    assert info.op_histogram.get("QUANTIZE") == 1  # float input quantized once
    assert info.op_histogram.get("DEQUANTIZE") == 1  # and the output dequantized once
    assert int8_result.calibration_samples == 200
    assert int8_result.float_ops == ()  # no op stayed float


def test_tf_keras_model_quantizes(trained_tf_keras_cnn, mnist_split):
    result = tfcompress.quantize(
        trained_tf_keras_cnn, recipe="int8", representative_data=mnist_split.train
    )
    assert result.size_ratio <= 0.30
    evaluation = tfcompress.evaluate(
        {"keras": trained_tf_keras_cnn, "int8": result.model}, mnist_split.test
    )
    assert evaluation.drop("int8") <= 0.01, str(evaluation)


@pytest.mark.parametrize("io_type", ["int8", "uint8"])
def test_integer_input_and_output_types(trained_cnn, mnist_split, io_type):
    result = tfcompress.quantize(
        trained_cnn,
        recipe="int8",
        representative_data=mnist_split.train.x[:100],
        input_type=io_type,
    )
    info = tfcompress.inspect_model(result.model_content)
    assert info.inputs[0].dtype == io_type and info.outputs[0].dtype == io_type
    evaluation = tfcompress.evaluate([trained_cnn, result.model], mnist_split.test.take(300))
    assert evaluation.rows[0].score - evaluation.rows[1].score <= 0.02


def test_per_tensor_and_sample_count_are_recorded(trained_cnn, mnist_split):
    result = tfcompress.quantize(
        trained_cnn,
        recipe="int8",
        representative_data=mnist_split.train,
        per_channel=False,
        calibration_samples=32,
    )
    assert result.recipe == Recipe("int8", per_channel=False, calibration_samples=32)
    assert result.calibration_samples == 32
    assert json.loads(json.dumps(result.to_dict()))["recipe"]["per_channel"] is False


def test_recipe_round_trips_through_json():
    for name in list_recipes():
        recipe = Recipe(name)
        assert Recipe.from_json(recipe.to_json()) == recipe
    assert list_recipes() == [
        "dynamic",
        "float16",
        "int8",
        "int16x8",
        "int4-weights",
        "int4-dynamic",
    ]
    assert list_recipes(engine="converter") == ["dynamic", "float16", "int8", "int16x8"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"recipe": "int4"}, "unknown recipe 'int4'; choose one of float32, dynamic, float16"),
        ({"recipe": "float16", "input_type": "int8"}, "does not support input_type='int8'"),
        ({"recipe": "int8", "calibration_samples": 0}, "calibration_samples must be at least 1"),
        ({"recipe": "int8"}, "pass representative_data"),
    ],
)
def test_bad_options(trained_cnn, kwargs, message):
    with pytest.raises(InvalidInputError, match=message):
        tfcompress.quantize(trained_cnn, **kwargs)


def test_calibration_data_of_the_wrong_shape(trained_cnn):
    with pytest.raises(InvalidDataError, match=r"calibration data has shape \(4, 32, 32, 3\)"):
        tfcompress.quantize(
            trained_cnn, recipe="int8", representative_data=np.zeros((4, 32, 32, 3), np.float32)
        )


def test_calibration_data_with_nan(trained_cnn, mnist_split):
    poisoned = mnist_split.train.x[:10].copy()
    poisoned[3, 0, 0, 0] = np.nan
    with pytest.raises(InvalidDataError, match="NaN or Inf values in 1 of 10 samples"):
        tfcompress.quantize(trained_cnn, recipe="int8", representative_data=poisoned)


def test_quantized_tflite_input_is_rejected(int8_result):
    # A float .tflite goes to LiteRT Quantizer (tests/test_litert_quantizer.py); a quantized
    # one is refused whichever engine is asked.
    with pytest.raises(UnsupportedModelError, match="already quantized"):
        tfcompress.quantize(int8_result.model_content, recipe="dynamic")
    with pytest.raises(UnsupportedModelError, match="already quantized"):  # said first
        tfcompress.quantize(int8_result.model_content, engine="converter")


def test_save_is_atomic_and_refuses_overwrite(tmp_path, int8_result):
    path = int8_result.save(tmp_path / "m.tflite")
    assert path.read_bytes() == int8_result.model_content
    with pytest.raises(tfcompress.OutputExistsError):
        int8_result.save(path)


def _bare_conversions(model, x):
    """What quantize must equal: TF's converter on one export, float32 then int8.

    The export is TensorFlow's own save of a serving function and the model's variables (what
    ``model.export`` saves, less the model object: the same file but for two internal tensor
    names, see test_a_keras3_export_holds_the_serving_function_and_the_variables). The
    function returns a dict keyed by the Keras output name, so the ``.tflite`` keeps it.
    """
    import tempfile

    import tensorflow as tf

    from tfcompress.models import model_signature

    signature = model_signature(model)  # names as Keras gives them (layer names)
    (name,), (given,) = signature.output_names, signature.inputs
    spec = tf.TensorSpec(given.shape, given.dtype, name=given.name)
    serve = tf.function(lambda image: {name: model(image, training=False)}, input_signature=[spec])
    holder = tf.Module()
    holder.model_variables = [v.value for v in model.variables]  # Keras 3: the tf.Variables
    holder.serve = serve
    with tempfile.TemporaryDirectory() as export_dir:
        tf.saved_model.save(holder, export_dir, signatures={"serving_default": serve})
        reference = tf.lite.TFLiteConverter.from_saved_model(export_dir).convert()
        converter = tf.lite.TFLiteConverter.from_saved_model(export_dir)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.representative_dataset = lambda: ([sample[np.newaxis]] for sample in x)
        return reference, converter.convert()


def test_quantize_traces_once_and_matches_the_bare_converter(trained_cnn, mnist_split, monkeypatch):
    import tensorflow as tf

    x = mnist_split.train.x[:32]  # exactly calibration_samples: no random subset
    reference, quantized = _bare_conversions(trained_cnn, x)
    exports = []
    original = tf.saved_model.save  # what every Keras export ends in

    def counting_export(*args, **kwargs):
        exports.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(tf.saved_model, "save", counting_export)
    result = tfcompress.quantize(
        trained_cnn, recipe="int8", representative_data=x, calibration_samples=32
    )
    assert len(exports) == 1  # one trace serves the float32 reference and the int8 file
    assert result.reference_content == reference
    assert result.model_content == quantized
    assert result.conversion_seconds > 0


def test_tf_keras_model_is_saved_once(trained_tf_keras_cnn, mnist_split, monkeypatch):
    import tensorflow as tf

    saves = []
    original = tf.saved_model.save

    def counting_save(*args, **kwargs):
        saves.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(tf.saved_model, "save", counting_save)
    result = tfcompress.quantize(
        trained_tf_keras_cnn, recipe="dynamic", representative_data=mnist_split.train
    )
    assert len(saves) == 1
    assert result.size_ratio <= 0.35


def test_float32_recipe_is_the_reference_converted_once(trained_cnn):
    result = tfcompress.quantize(trained_cnn, recipe="float32")
    assert result.model_content == result.reference_content
    assert result.float_ops is None  # activations are float anyway: nothing to report


def test_convert_all_never_reuses_a_configured_converter(trained_cnn):
    from tfcompress.quantization.converter import ConverterSettings, convert_all
    from tfcompress.quantization.recipes import Recipe

    quantized, plain = convert_all(trained_cnn, [ConverterSettings(Recipe("dynamic")), None])
    (float32,) = convert_all(trained_cnn, [ConverterSettings(Recipe("float32"))])
    assert plain.content == float32.content  # the dynamic setting did not leak into it
    assert len(quantized.content) < 0.35 * len(plain.content)


def test_a_converter_loads_its_saved_model_once(trained_cnn, mnist_split, monkeypatch):
    from tensorflow.python.saved_model import load as saved_model_load

    from tfcompress.quantization import converter

    def quantize() -> tuple[bytes, bytes, int]:
        loads = []
        original = saved_model_load.load_partial  # what TensorFlow's load() calls
        monkeypatch.setattr(
            saved_model_load,
            "load_partial",
            lambda *args, **kwargs: loads.append(args[0]) or original(*args, **kwargs),
        )
        result = tfcompress.quantize(
            trained_cnn, recipe="int8", representative_data=mnist_split.train
        )
        monkeypatch.setattr(saved_model_load, "load_partial", original)
        return result.model_content, result.reference_content, len(loads)

    # float32 and int8 from one converter: one load, where TensorFlow alone makes three
    monkeypatch.setenv("TFCOMPRESS_IN_PROCESS", "1")  # the loads counted here, not in a child
    shared = quantize()
    monkeypatch.setattr(converter, "loads_shared", lambda loads: contextlib.nullcontext())
    unshared = quantize()
    assert shared[2] == 1 and unshared[2] == 3
    assert shared[:2] == unshared[:2]  # the same files


def test_a_keras3_export_holds_the_serving_function_and_the_variables(
    trained_cnn, mnist_split, monkeypatch, tmp_path, caplog
):
    import keras
    import tensorflow as tf

    from tfcompress._compat.litert import make_interpreter
    from tfcompress.quantization import converter

    def details(content: bytes) -> tuple[object, list[tuple[object, ...]], np.ndarray]:
        interpreter = make_interpreter(content, num_threads=1, use_xnnpack=False)
        tensors = [  # everything but the name
            (t["index"], tuple(t["shape"]), t["dtype"], t["quantization"])
            for t in interpreter.get_tensor_details()
        ]
        run = interpreter.get_signature_runner()
        (name,) = run.get_input_details()
        scores = run(**{name: mnist_split.test.x[:16]})
        return interpreter.get_signature_list(), tensors, next(iter(scores.values()))

    data = mnist_split.train
    lean = tfcompress.quantize(trained_cnn, recipe="int8", representative_data=data)
    with monkeypatch.context() as patched:  # model.export's SavedModel, as before
        patched.setattr(converter, "save_serving_function", lambda *args: False)
        archived = tfcompress.quantize(trained_cnn, recipe="int8", representative_data=data)
    for made, before in ((lean.model_content, archived.model_content),
                         (lean.reference_content, archived.reference_content)):  # fmt: skip
        (signatures, tensors, scores), (signatures_0, tensors_0, scores_0) = (
            details(made),
            details(before),
        )
        assert signatures == signatures_0 and tensors == tensors_0
        np.testing.assert_array_equal(scores, scores_0)
        assert abs(len(made) - len(before)) <= 16  # two internal tensor names differ
    # A model that reads a lookup table besides its variables is exported by Keras.
    inputs = keras.Input((3,), dtype="int64", name="ids")
    looked_up = keras.Model(inputs, keras.layers.IntegerLookup(vocabulary=[4, 7])(inputs))
    caplog.set_level("INFO", logger=converter.__name__)
    converter._export_keras3(looked_up, str(tmp_path / "lookup"))
    assert "whole for conversion" in caplog.text
    serve = tf.saved_model.load(str(tmp_path / "lookup")).signatures["serving_default"]
    ids = np.array([[4, 7, 5]])
    np.testing.assert_array_equal(next(iter(serve(ids=ids).values())), looked_up(ids))


def test_quantized_content_is_the_int8_file_quantize_makes(trained_cnn, mnist_split, int8_result):
    from tfcompress.quantization.converter_ptq import quantized_content

    # Selection measures this file without converting the float32 reference it never uses.
    conversion = quantized_content(
        trained_cnn, recipe="int8", representative_data=mnist_split.train
    )
    assert conversion.content == int8_result.model_content


def test_quantized_content_refuses_what_needs_the_reference(trained_cnn, int8_result, tmp_path):
    from tfcompress.errors import ConversionError
    from tfcompress.quantization.converter_ptq import quantized_content
    from tfcompress.samples.troublemakers import write_weightless_saved_model

    # Every refusal comes before a conversion.
    with pytest.raises(InvalidInputError, match="made by LiteRT Quantizer"):
        quantized_content(trained_cnn, recipe="int4-weights")
    with pytest.raises(InvalidInputError, match=r"is a \.tflite"):
        quantized_content(int8_result.reference_content, recipe="int8")
    with pytest.raises(InvalidInputError, match="scored against the float32 reference"):
        quantized_content(trained_cnn, recipe=Recipe("int8", methods=("bias-correction",)))
    with pytest.raises(InvalidInputError, match="pass representative_data"):
        quantized_content(trained_cnn, recipe="int8")
    # The weights check runs on the quantized file when no reference is converted.
    saved = write_weightless_saved_model(tmp_path / "weightless")
    with pytest.raises(ConversionError, match="uninitialised variable"):
        quantized_content(saved, recipe="float16")
