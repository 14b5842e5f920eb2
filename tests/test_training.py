"""QAT, pruning and clustering on real MNIST digits, measured on the exported .tflite files.

Every artifact is trained once per module and shared by the tests that check it.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import tfcompress
from tfcompress.data import Dataset
from tfcompress.errors import InvalidInputError
from tfcompress.training.sparsity import has_m_by_n, kernel_arrays

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def legacy_env_before() -> str | None:
    """TF_USE_LEGACY_KERAS as it was before any tfmot import in this module."""
    return os.environ.get("TF_USE_LEGACY_KERAS")


@pytest.fixture(scope="module")
def qat_result(legacy_env_before, trained_cnn, mnist_split):
    return tfcompress.qat(
        trained_cnn, train_data=mnist_split.train, eval_data=mnist_split.test, epochs=1
    )


@pytest.fixture(scope="module")
def pruned_int8(trained_cnn, mnist_split):
    return tfcompress.prune(
        trained_cnn,
        train_data=mnist_split.train,
        eval_data=mnist_split.test,
        target_sparsity=0.75,
        epochs=2,
        then="int8",
        qat_epochs=1,
    )


@pytest.fixture(scope="module")
def pruned_2_4(trained_cnn, mnist_split):
    return tfcompress.prune(
        trained_cnn,
        train_data=mnist_split.train,
        eval_data=mnist_split.test,
        structure="2:4",
        epochs=1,
    )


@pytest.fixture(scope="module")
def residual_model(mnist_split):
    """Keras 3 Functional: residual Add, BatchNormalization, DepthwiseConv2D and a PReLU."""
    from tfcompress.samples.cnn import residual_cnn, train_classifier

    model = residual_cnn()  # tfmot can neither quantize nor prune its PReLU
    return train_classifier(model, mnist_split.train.take(2000), epochs=2)


def _accuracy(model, data) -> float:
    return tfcompress.evaluate(model, data).rows[0].score


# --- QAT ---------------------------------------------------------------------------------------


def test_qat_int8_within_half_a_point_of_float(qat_result):
    assert qat_result.recipe == "int8"
    assert qat_result.reference_accuracy > 0.9  # the float model is a real classifier
    assert qat_result.accuracy_drop <= 0.005, str(qat_result)
    assert all(w.dtype == "int8" for w in qat_result.weights)
    assert qat_result.skipped_layers == []


def test_qat_no_worse_than_ptq_int8(qat_result, int8_result, mnist_split):
    ptq = _accuracy(int8_result.model, mnist_split.test)
    assert qat_result.accuracy >= ptq - 0.003, (qat_result.accuracy, ptq)


def test_qat_keeps_tf_keras_choice_and_caller_model(
    qat_result, legacy_env_before, trained_cnn, mnist_split
):
    import tensorflow as tf

    assert os.environ.get("TF_USE_LEGACY_KERAS") == legacy_env_before
    assert tf.keras.version().startswith("3.")  # tf.keras still means Keras 3
    assert type(trained_cnn).__module__.startswith("keras.")
    assert qat_result.bridge_difference <= 1e-5
    # The caller's model was not fine-tuned in place.
    assert _accuracy(trained_cnn, mnist_split.test) == pytest.approx(qat_result.reference_accuracy)


def test_qat_result_reports(qat_result, tmp_path):
    data = qat_result.to_dict()
    for key in ("size_bytes", "accuracy", "reference_accuracy", "accuracy_drop", "skipped_layers"):
        assert key in data
    assert {row["status"] for row in data["coverage"]} == {"quantized"}
    assert "qat -> int8" in str(qat_result)
    path = qat_result.save(tmp_path / "qat.tflite")
    assert path.read_bytes() == qat_result.model_content
    with pytest.raises(tfcompress.OutputExistsError):
        qat_result.save(path)


# --- pruning -----------------------------------------------------------------------------------


def test_pruning_75_sparsity_measured_on_exported_file(pruned_int8):
    pruned = {c.layer for c in pruned_int8.coverage if c.status == "pruned"}
    assert pruned == {"conv2d", "conv2d_1", "dense", "dense_1"}
    rows = pruned_int8.rewritten_weights
    assert {w.layer for w in rows} == pruned
    assert all(w.sparsity >= 0.74 for w in rows), [(w.layer, w.sparsity) for w in rows]
    # Independent of the result's own table: read the kernels back from the bytes.
    for _, _, dtype, values in kernel_arrays(pruned_int8.model_content):
        assert dtype == "int8"
        assert np.mean(values == 0) >= 0.74


def test_pruning_75_accuracy_and_gzip(pruned_int8):
    assert pruned_int8.accuracy_drop <= 0.015, str(pruned_int8)
    assert pruned_int8.gzip_bytes <= 0.5 * pruned_int8.reference_gzip_bytes
    assert pruned_int8.gzip_bytes <= 0.15 * pruned_int8.float_gzip_bytes
    # Zeros are stored like any value: the raw file is as large as the dense int8 one.
    assert pruned_int8.size_bytes >= 0.9 * pruned_int8.reference_size_bytes


def test_structured_2_4_on_exported_file(pruned_2_4):
    rows = pruned_2_4.rewritten_weights
    assert {w.layer for w in rows} == {"conv2d_1", "dense", "dense_1"}
    assert all(w.m_by_n_ok for w in rows)
    skipped = {s["layer"]: s["reason"] for s in pruned_2_4.skipped_layers}
    assert "input channel" in skipped["conv2d"]  # 1 input channel cannot hold groups of 4
    by_layer = {w.tensor: w.layer for w in pruned_2_4.weights}
    for tensor, _, _, values in kernel_arrays(pruned_2_4.model_content):
        if by_layer[tensor] != "conv2d":
            assert has_m_by_n(values, (2, 4))
            assert np.mean(values == 0) >= 0.5
    assert pruned_2_4.accuracy_drop <= 0.02


def test_has_m_by_n_detects_a_bad_group():
    good = np.array([[0, 1, 0, 2, 0, 0, 3, 4]], np.float32)
    assert has_m_by_n(good, (2, 4))
    assert not has_m_by_n(np.array([[0, 1, 5, 2]], np.float32), (2, 4))
    assert not has_m_by_n(np.zeros((2, 6), np.float32), (2, 4))  # 6 is no multiple of 4


# --- clustering ------------------------------------------------------------------------------


def test_cluster_16_shrinks_gzip(trained_cnn, mnist_split):
    result = tfcompress.cluster(
        trained_cnn,
        train_data=mnist_split.train,
        eval_data=mnist_split.test,
        clusters=16,
        epochs=1,
    )
    rows = result.rewritten_weights
    assert len(rows) == 4
    assert all(w.unique_values <= 16 for w in rows), [(w.layer, w.unique_values) for w in rows]
    assert result.gzip_bytes <= 0.5 * result.reference_gzip_bytes
    assert result.accuracy_drop <= 0.015, str(result)


# --- a model tfmot only partly supports ------------------------------------------------------


def test_residual_model_qat_skips_prelu(residual_model, mnist_split):
    result = tfcompress.qat(
        residual_model,
        train_data=mnist_split.train.take(1000),
        eval_data=mnist_split.test.take(400),
        epochs=1,
    )
    skipped = [s["layer"] for s in result.skipped_layers]
    assert skipped == ["prelu"]
    statuses = {c.kind: c.status for c in result.coverage}
    for kind in ("Conv2D", "BatchNormalization", "DepthwiseConv2D", "Add", "Dense"):
        assert statuses[kind] == "quantized"
    assert {w.op for w in result.weights} >= {"conv", "depthwise", "dense"}
    assert all(w.dtype == "int8" for w in result.weights)
    assert result.bridge_difference <= 1e-5
    assert result.accuracy >= result.reference_accuracy - 0.05


def test_residual_model_pruning_skips_prelu(residual_model, mnist_split):
    result = tfcompress.prune(
        residual_model,
        train_data=mnist_split.train.take(1000),
        eval_data=mnist_split.test.take(400),
        epochs=1,
    )
    skipped = {s["layer"]: s["reason"] for s in result.skipped_layers}
    assert "PReLU" in skipped["prelu"]
    pruned = sorted(c.kind for c in result.coverage if c.status == "pruned")
    assert pruned == ["Conv2D", "Conv2D", "Dense"]
    assert all(w.sparsity >= 0.74 for w in result.rewritten_weights)


def test_tf_keras_model_is_pruned_without_bridge_changes(mnist_split):
    from tfcompress.samples.cnn import small_cnn, train_classifier

    train = Dataset(mnist_split.train.x[:1000], mnist_split.train.y[:1000])
    model = train_classifier(small_cnn(flavour="tf_keras"), train, epochs=1)
    before = [w.copy() for w in model.get_weights()]
    result = tfcompress.prune(
        model, train_data=train, eval_data=mnist_split.test.take(300), epochs=1, then="float16"
    )
    assert result.bridge_difference == 0.0
    assert all(w.dtype == "float16" for w in result.weights)
    assert all(w.sparsity >= 0.74 for w in result.rewritten_weights)
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights(), strict=True))


def test_export_saves_the_serving_function_or_else_the_whole_model(monkeypatch, tmp_path, caplog):
    # The export's SavedModel holds the serving function and the model's variables (tf-keras
    # traces every layer when the model itself is saved): the same .tflite as the whole
    # model's. A function that also reads a resource outside the variables is saved whole.
    import tensorflow as tf
    import tf_keras

    from tfcompress.models.signature import model_signature
    from tfcompress.quantization import converter
    from tfcompress.training import export as training_export

    class Lookup(tf_keras.layers.Layer):  # a hash table: a resource that is not a variable
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            keys, values = tf.constant([0, 1], tf.int64), tf.constant([0.5, 2.0])
            initializer = tf.lookup.KeyValueTensorInitializer(keys, values)
            self.table = tf.lookup.StaticHashTable(initializer, default_value=1.0)

        def call(self, inputs):
            return inputs * self.table.lookup(tf.constant(1, tf.int64))

    x = np.random.default_rng(0).normal(size=(16, 4)).astype("float32")
    inputs = tf_keras.Input((4,), name="x")
    plain = tf_keras.Model(inputs, tf_keras.layers.Dense(3, name="y")(inputs))
    looked_up = tf_keras.Model(inputs, Lookup(name="scale")(plain(inputs)))

    def exported(model):
        signature = model_signature(model)
        calibration = Dataset({signature.input_names[0]: x})
        return training_export.export(model, "int8", calibration, signature=signature).content

    lean = exported(plain)
    with monkeypatch.context() as patched:  # as before: the whole model saved
        patched.setattr(training_export, "save_serving_function", lambda *args: False)
        assert exported(plain) == lean
    # The serving-only save refuses the table (TFLite has no kernel for it either, so the
    # saved folder is what is checked): saved whole, it serves what the model computes.
    folder = tmp_path / "looked_up"
    caplog.set_level("INFO", logger=converter.__name__)
    training_export._save_named(looked_up, model_signature(looked_up), folder, "looked_up")
    assert "whole for conversion" in caplog.text
    serve = tf.saved_model.load(str(folder)).signatures["serving_default"]
    np.testing.assert_allclose(serve(x=x)["scale"], looked_up(x), rtol=1e-6)


# --- prune records the schedule that ran ----------------------------------------------------


def test_resolve_schedule_names_what_runs():
    from tfcompress.training.prune import resolve_schedule

    assert resolve_schedule(None, None) == ("polynomial", None)
    assert resolve_schedule("constant", None) == ("constant", None)
    assert resolve_schedule(None, (2, 4)) == ("constant", None)
    assert resolve_schedule("constant", (2, 4)) == ("constant", None)
    ran, warning = resolve_schedule("polynomial", (2, 4))
    assert ran == "constant" and "structure 2:4" in warning and "constant schedule ran" in warning
    with pytest.raises(InvalidInputError, match="schedule must be null or one of"):
        tfcompress.prune("missing.keras", train_data="t.npz", schedule="cubic")  # the config's


@pytest.mark.slow
def test_prune_with_structure_records_the_constant_schedule_that_ran(monkeypatch):
    """End to end on sklearn's 8x8 digits: the record names the tfmot schedule built."""
    import keras

    from tfcompress._compat.tfmot import tfmot
    from tfcompress.samples.datasets import digits

    sparse = tfmot().sparsity.keras
    built = []
    for name in ("ConstantSparsity", "PolynomialDecay"):
        real = getattr(sparse, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            built.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(sparse, name, spy)
    split = digits()
    model = keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            keras.layers.Flatten(),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile("adam", "sparse_categorical_crossentropy")
    result = tfcompress.prune(
        model,
        train_data=split.train.take(320),
        eval_data=split.test.take(100),
        structure="2:4",
        schedule="polynomial",  # what `tfcompress prune --structure 2:4` passes by default
        epochs=1,
        batch_size=32,
        isolate=False,  # the spy sees this process's tfmot only
    )
    assert built == ["ConstantSparsity"]
    assert result.options["schedule"] == "constant"
    assert result.options["structure"] == "2:4"
    assert result.warnings[0].startswith("schedule='polynomial' does not apply to structure 2:4")
    assert result.to_dict()["options"]["schedule"] == "constant"
