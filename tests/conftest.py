"""Shared fixtures: real MNIST data and small CNNs trained once per test session."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from tfcompress.data import Dataset
from tfcompress.samples.datasets import Split, mnist


@pytest.fixture(scope="session")
def mnist_split() -> Split:
    """5,000 real MNIST digits: 3,750 train / 1,250 test, stratified."""
    return mnist(test_fraction=0.25, seed=0)


@pytest.fixture(scope="session")
def trained_cnn(mnist_split: Split):
    """A Keras 3 small CNN trained 3 epochs on the MNIST subset (~96% test accuracy)."""
    from tfcompress.samples.cnn import small_cnn, train_classifier

    return train_classifier(small_cnn(flavour="keras3"), mnist_split.train, epochs=3)


@pytest.fixture(scope="session")
def trained_tf_keras_cnn(mnist_split: Split):
    """The same CNN built and trained with tf-keras."""
    from tfcompress.samples.cnn import small_cnn, train_classifier

    return train_classifier(small_cnn(flavour="tf_keras"), mnist_split.train, epochs=3)


@pytest.fixture(scope="session")
def model_files(
    tmp_path_factory: pytest.TempPathFactory, trained_cnn, trained_tf_keras_cnn, mnist_split: Split
) -> dict[str, Path]:
    """The trained models saved to disk, plus calibration and test .npz files."""
    root = tmp_path_factory.mktemp("models")
    files = {
        "keras3": root / "cnn.keras",
        "tf_keras": root / "cnn_tfk.keras",
        "calib": root / "calib.npz",
        "test": root / "test.npz",
    }
    trained_cnn.save(files["keras3"])
    trained_tf_keras_cnn.save(files["tf_keras"])
    np.savez(files["calib"], x=mnist_split.train.x[:300], y=mnist_split.train.y[:300])
    np.savez(files["test"], x=mnist_split.test.x, y=mnist_split.test.y)
    return files


@pytest.fixture(scope="session")
def int8_result(trained_cnn, mnist_split: Split):
    """The Keras 3 CNN quantized with the int8 recipe (float32 input/output)."""
    import tfcompress

    return tfcompress.quantize(trained_cnn, recipe="int8", representative_data=mnist_split.train)


@pytest.fixture(scope="session")
def gate_model_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The digits Dense net, its int8 and damaged variants and test data, saved once."""
    from tfcompress.samples.gate_models import build_gate_models

    return build_gate_models(tmp_path_factory.mktemp("gate_models"))


@pytest.fixture(scope="session")
def two_head_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The two-input, two-head detector-shaped model, its int8 file and frames, saved once."""
    from tfcompress.samples.gate_models import build_two_head_models

    return build_two_head_models(tmp_path_factory.mktemp("two_heads"))


@pytest.fixture
def tiny_dataset() -> Dataset:
    """Eight labelled 28x28x1 samples, for fast input-validation tests."""
    rng = np.random.default_rng(0)
    return Dataset(rng.random((8, 28, 28, 1), dtype=np.float32), rng.integers(0, 10, 8))
