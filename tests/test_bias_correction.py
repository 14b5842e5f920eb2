"""Bias correction on the calibrated graph: the same method for SavedModels and Keras.

The model is a SavedModel written by ``tf.saved_model.save`` from a ``tf.Module`` (no Keras
anywhere): a SAME-padded conv, a strided depthwise conv with a channel multiplier, and a
small linear dense head, each with a bias, fed positive inputs (after a ReLU the inputs
of real layers are never zero-mean, and the mean weight error becomes a mean output shift).
Weights per tensor, where rounding is coarse, so the shift is well above float noise.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import tfcompress
from tfcompress.data import Dataset
from tfcompress.models.loading import load_model
from tfcompress.quantization import Recipe
from tfcompress.quantization.converter import ConverterSettings, convert_all
from tfcompress.quantization.methods.bias_correction import correct_biases
from tfcompress.quantization.methods.calibrated import float_statistics
from tfcompress.quantization.selective import quantize_calibrated

RECIPE = Recipe("int8", per_channel=False)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """The SavedModel folder and its (positive) samples."""
    import tensorflow as tf

    rng = np.random.default_rng(7)

    def variable(*shape: int, scale: float = 0.3) -> tf.Variable:
        return tf.Variable(rng.normal(0.0, scale, shape).astype(np.float32))

    class Tiny(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.conv_b = variable(3, 3, 3, 8), variable(8, scale=0.05)
            # one wide channel: per-tensor weights round the others coarsely
            self.conv.assign(self.conv * np.r_[20.0, np.ones(7)].astype(np.float32))
            self.dw, self.dw_b = variable(3, 3, 8, 2), variable(16, scale=0.05)
            self.dense, self.dense_b = variable(4 * 4 * 16, 4, scale=0.05), variable(4, scale=0.01)

        @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 3], tf.float32, name="image")])
        def serve(self, image: tf.Tensor) -> dict[str, tf.Tensor]:
            x = tf.nn.relu(tf.nn.conv2d(image, self.conv, 1, "SAME") + self.conv_b)
            x = tf.nn.depthwise_conv2d(x, self.dw, [1, 2, 2, 1], "SAME") + self.dw_b
            x = tf.reshape(tf.nn.relu(x), [-1, 4 * 4 * 16])
            return {"box": tf.matmul(x, self.dense) + self.dense_b}

    module = Tiny()
    path = tmp_path_factory.mktemp("bias") / "tiny_savedmodel"
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    x = rng.uniform(0.0, 1.0, (64, 8, 8, 3)).astype(np.float32)
    return path, x


def _outputs(content: bytes, x: np.ndarray) -> np.ndarray:
    with tfcompress.create_runner(content) as runner:
        return next(iter(runner.run(x).values())).astype(np.float64)


def test_correction_moves_the_int8_mean_toward_float(saved):
    path, x = saved
    calibration = Dataset(x)
    settings = ConverterSettings(RECIPE, calibration, calibrate_only=True)
    reference, calibrated = convert_all(load_model(path), [None, settings])
    content, corrections = correct_biases(
        calibrated.content, float_statistics(calibrated.content, calibration), per_channel=False
    )
    # One entry per conv, depthwise and dense op, named by its output tensor.
    assert len(corrections) == 3 and all(c.max_shift > 0 for c in corrections)
    assert all(c.layer and c.max_bias > 0 for c in corrections)
    plain = quantize_calibrated(calibrated, RECIPE, source="tiny").content
    corrected = quantize_calibrated(replace(calibrated, content=content), RECIPE, source="tiny")
    expected = _outputs(reference.content, x)
    shift_plain = np.abs((_outputs(plain, x) - expected).mean(axis=0))
    shift_corrected = np.abs((_outputs(corrected.content, x) - expected).mean(axis=0))
    # The mean output error of the int8 model, summed over the output channels: 0.011 plain,
    # 0.0055 corrected (what is left: activation rounding, and errors through the ReLUs).
    assert shift_corrected.sum() <= 0.6 * shift_plain.sum(), (shift_plain, shift_corrected)
    assert len(corrected.content) == len(plain)  # biases edited in place: no new tensors


def test_savedmodel_takes_bias_correction_through_quantize(saved):
    """No Keras model to rewrite: the method runs on the calibrated graph, as asked."""
    path, x = saved
    recipe = replace(RECIPE, methods=("bias-correction",))
    result = tfcompress.quantize(path, recipe=recipe, representative_data=x)
    report = result.methods
    assert report is not None and report.kept == ("bias-correction",) == result.recipe.methods
    kept = report.kept_candidate
    assert kept.error is None and kept.rewrite is None  # nothing rewritten, only the graph
    # the graph method's edits under its report key, the ranges for range methods only
    entries = kept.to_dict()["edits"]["corrected"]
    assert len(entries) == 3 and all(e["max_shift"] > 0 for e in entries)
    assert kept.ranges == () and len(kept.edits["corrected"]) == len(entries)
    assert "3 corrected" in kept.line()
    (mine,), (plain,) = kept.fidelity, report.plain.fidelity
    assert mine.snr_db >= plain.snr_db + 2  # 21.4 against 17.1 dB, on the calibration samples


def test_a_shared_or_missing_bias_gets_one_of_its_own():
    """The converter gives equal biases one tensor and drops all-zero ones: each op's own."""
    from tfcompress._compat.keras import KerasFlavour, keras_module
    from tfcompress._compat.litert import flatbuffer_utils
    from tfcompress.quantization.methods.calibrated import linear_ops, tensor_array

    keras = keras_module(KerasFlavour.KERAS3)
    keras.utils.set_random_seed(1)
    layers, same = keras.layers, keras.initializers.Constant(0.1)
    image = keras.Input((6, 6, 2))
    wide = layers.Conv2D(4, 3, padding="same", bias_initializer=same)(image)
    narrow = layers.Conv2D(4, 1, bias_initializer=same)(image)
    pooled = layers.GlobalAveragePooling2D()(layers.Concatenate()([wide, narrow]))
    model = keras.Model(image, layers.Dense(3)(pooled))  # a zero bias: none in the file
    calibration = Dataset(np.random.default_rng(0).uniform(0, 1, (32, 6, 6, 2)).astype("float32"))
    settings = ConverterSettings(RECIPE, calibration, calibrate_only=True)
    (calibrated,) = convert_all(model, [settings])
    read = flatbuffer_utils().read_model_from_bytearray
    ops = linear_ops(read(bytearray(calibrated.content)))
    assert [o.kind for o in ops] == ["conv", "conv", "dense"]
    assert ops[0].bias == ops[1].bias >= 0 and ops[2].bias == -1  # the layout this test is for
    content, corrections = correct_biases(
        calibrated.content, float_statistics(calibrated.content, calibration), per_channel=False
    )
    edited = read(bytearray(content))
    after = linear_ops(edited)
    assert len({o.bias for o in after}) == 3 and all(o.bias >= 0 for o in after)
    for op, correction in zip(after, corrections, strict=True):
        bias = tensor_array(edited, op.bias).astype(np.float64)
        before = 0.0 if op.kind == "dense" else 0.1
        assert correction.max_bias == pytest.approx(before)
        assert np.abs(bias - before).max() == pytest.approx(correction.max_shift, rel=1e-4)
        assert correction.max_shift > 0
