"""Model formats: sniffing, loading both Keras flavours, corrupt files, atomic outputs."""

from pathlib import Path

import numpy as np
import pytest

from tfcompress.errors import ModelLoadError, OutputExistsError
from tfcompress.models import (
    ModelFormat,
    SavedModelDir,
    TFLiteModel,
    load_model,
    sniff_format,
    write_bytes_atomic,
)
from tfcompress.models.signature import input_spec


@pytest.fixture(scope="module")
def tiny_models():
    import keras
    import tf_keras

    k3 = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)], name="k3")
    tfk = tf_keras.Sequential([tf_keras.Input((4,)), tf_keras.layers.Dense(3)], name="tfk")
    return k3, tfk


def _outputs(model, x):
    return np.asarray(model(x, training=False))


@pytest.mark.parametrize("suffix", [".keras", ".h5"])
def test_keras3_files_round_trip(tmp_path, tiny_models, suffix):
    k3, _ = tiny_models
    path = tmp_path / f"m{suffix}"
    k3.save(path)
    loaded = load_model(path)
    x = np.ones((2, 4), np.float32)
    assert type(loaded).__module__.startswith("keras")
    np.testing.assert_allclose(_outputs(loaded, x), _outputs(k3, x), atol=1e-6)


@pytest.mark.parametrize("suffix", [".keras", ".h5", ""])
def test_tf_keras_files_load_as_tf_keras(tmp_path, tiny_models, suffix):
    _, tfk = tiny_models
    path = tmp_path / f"m{suffix}" if suffix else tmp_path / "saved_model_dir"
    tfk.save(path)
    loaded = load_model(path)
    assert type(loaded).__module__.startswith("tf_keras")
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(_outputs(loaded, x), _outputs(tfk, x), atol=1e-6)


def test_exported_saved_model_is_a_saved_model_dir(tmp_path, tiny_models):
    k3, _ = tiny_models
    k3.export(tmp_path / "exported", verbose=False)
    loaded = load_model(tmp_path / "exported")
    assert isinstance(loaded, SavedModelDir)
    assert input_spec(loaded).shape == (None, 4)


def test_lambda_layers_need_explicit_opt_out(tmp_path):
    import keras
    import tf_keras

    k3 = keras.Sequential([keras.Input((2,)), keras.layers.Lambda(lambda t: t * 2)])
    k3.save(tmp_path / "lambda.keras")
    tfk = tf_keras.Sequential([tf_keras.Input((2,)), tf_keras.layers.Lambda(lambda t: t * 2)])
    tfk.save(tmp_path / "lambda_tfk.h5")
    for name in ("lambda.keras", "lambda_tfk.h5"):
        with pytest.raises(ModelLoadError, match="Lambda"):
            load_model(tmp_path / name)
        assert load_model(tmp_path / name, safe_mode=False) is not None


def test_tflite_is_checked_for_its_identifier(tmp_path, int8_result):
    good = tmp_path / "m.tflite"
    good.write_bytes(int8_result.model_content)
    assert sniff_format(good) is ModelFormat.TFLITE
    assert isinstance(load_model(good), TFLiteModel)

    random_bytes = tmp_path / "random.tflite"
    random_bytes.write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(ModelLoadError, match="TFL3"):
        load_model(random_bytes)


def test_truncated_tflite_is_rejected(tmp_path, int8_result):
    truncated = tmp_path / "truncated.tflite"
    truncated.write_bytes(int8_result.model_content[: len(int8_result.model_content) // 2])
    with pytest.raises(ModelLoadError, match="truncated or corrupt"):
        load_model(truncated)


def test_text_file_named_keras_is_rejected(tmp_path):
    fake = tmp_path / "model.keras"
    fake.write_text("this is not a model\n")
    with pytest.raises(ModelLoadError, match=r"not a Keras \.keras file"):
        load_model(fake)


def test_missing_path_is_rejected(tmp_path):
    with pytest.raises(ModelLoadError, match="no such file"):
        load_model(tmp_path / "nope.keras")


def test_corrupt_keras_zip_is_rejected(tmp_path):
    broken = tmp_path / "broken.keras"
    broken.write_bytes(b"PK\x03\x04" + b"\x00" * 64)
    with pytest.raises(ModelLoadError, match="truncated or corrupt"):
        load_model(broken)


def test_atomic_write_refuses_to_overwrite(tmp_path: Path):
    target = tmp_path / "out.bin"
    write_bytes_atomic(target, b"one")
    with pytest.raises(OutputExistsError, match="--force"):
        write_bytes_atomic(target, b"two")
    assert target.read_bytes() == b"one"
    write_bytes_atomic(target, b"two", overwrite=True)
    assert target.read_bytes() == b"two"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]  # no temporary left behind


def test_atomic_write_never_overwrites_an_input(tmp_path: Path):
    source = tmp_path / "model.keras"
    source.write_bytes(b"original")
    with pytest.raises(OutputExistsError, match="overwrite an input"):
        write_bytes_atomic(source, b"x", overwrite=True, inputs=[source])
    assert source.read_bytes() == b"original"
