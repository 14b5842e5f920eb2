"""Shared fixtures: real MNIST data and small CNNs trained once per test run.

The models are trained once per run even when pytest-xdist runs the suite in several worker
processes (``make test``): the first worker builds their files, the others load them
(tests/_shared.py).
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest
from _shared import build_once

from tfcompress.data import Dataset
from tfcompress.samples.datasets import Split, mnist


@pytest.fixture(scope="session")
def mnist_split() -> Split:
    """5,000 real MNIST digits: 3,750 train / 1,250 test, stratified."""
    return mnist(test_fraction=0.25, seed=0)


@pytest.fixture(scope="session")
def trained_cnn(tmp_path_factory: pytest.TempPathFactory, mnist_split: Split):
    """A Keras 3 small CNN trained 3 epochs on the MNIST subset (~96% test accuracy)."""
    from tfcompress._compat.keras import KerasFlavour, keras_module

    # Every worker (the one that trained it too) uses the saved model: the same weights.
    path = _trained_cnn_path(tmp_path_factory, mnist_split)
    return keras_module(KerasFlavour.KERAS3).models.load_model(path)


@pytest.fixture(scope="session")
def trained_tf_keras_cnn(tmp_path_factory: pytest.TempPathFactory, mnist_split: Split):
    """The same CNN built with tf-keras, holding the Keras 3 CNN's trained weights.

    What the tests of tf-keras models exercise is loading, saving and converting that
    flavour; training it too cost a second 3-epoch fit per run. (tf-keras training is
    exercised where it is the subject: QAT, pruning and clustering of tf-keras models.)
    """
    from tfcompress._compat.keras import KerasFlavour, keras_module
    from tfcompress.samples.cnn import small_cnn

    keras3_path = _trained_cnn_path(tmp_path_factory, mnist_split)

    def build(folder: Path) -> dict[str, Path]:
        trained = keras_module(KerasFlavour.KERAS3).models.load_model(keras3_path)
        model = small_cnn(flavour="tf_keras")
        model.set_weights(trained.get_weights())
        path = folder / "cnn.keras"
        model.save(path)
        return {"model": path}

    path = build_once(tmp_path_factory, "cnn_tf_keras", build)["model"]
    return keras_module(KerasFlavour.TF_KERAS).models.load_model(path)


def _trained_cnn_path(factory: pytest.TempPathFactory, split: Split) -> Path:
    from tfcompress.samples.cnn import small_cnn, train_classifier

    def build(folder: Path) -> dict[str, Path]:
        path = folder / "cnn.keras"
        train_classifier(small_cnn(), split.train, epochs=3).save(path)
        return {"model": path}

    return build_once(factory, "cnn_keras3", build)["model"]


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
    from tfcompress.bench.accuracy import evaluate
    from tfcompress.samples.datasets import digits
    from tfcompress.samples.gate_models import build_gate_models

    paths = build_once(tmp_path_factory, "gate_models", build_gate_models)
    # Run a .tflite once so LiteRT is imported by this process, not first inside an
    # in-process pytester run (which would unload it again afterwards).
    evaluate(paths["int8"], digits(seed=0).test.take(8))
    return paths


@pytest.fixture(scope="session")
def two_head_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The two-input, two-head detector-shaped model, its int8 file and frames, saved once."""
    from tfcompress.samples.gate_models import build_two_head_models

    return build_once(tmp_path_factory, "two_heads", build_two_head_models)


@pytest.fixture
def tiny_dataset() -> Dataset:
    """Eight labelled 28x28x1 samples, for fast input-validation tests."""
    rng = np.random.default_rng(0)
    return Dataset(rng.random((8, 28, 28, 1), dtype=np.float32), rng.integers(0, 10, 8))


def pytest_configure(config: pytest.Config) -> None:
    """Keep the file order below under pytest-xdist.

    xdist's ``--dist loadfile`` re-sorts the files by their number of tests unless told
    ``--no-loadscope-reorder``: the minute-long files with a few tests (the fuzz campaign,
    the add-a-plugin recipes, the per-op searches) then started last and ran alone at the
    end, while files of a hundred one-second tests started first.
    """
    if getattr(config.option, "loadscopereorder", False):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files with the most ``slow`` tests first, each file's tests in their own order.

    ``make test`` hands whole files to two workers (pytest-xdist, ``--dist loadfile``) in
    this order (:func:`pytest_configure` keeps xdist from re-sorting it): the long files
    start early and the short ones fill in at the end, so both workers finish together
    instead of one running a long file alone. (A third worker was slower on the whole
    suite: 17 min 50 s against 16 min 50 s.)
    """
    slow: dict[Path, int] = {}
    for item in items:
        if item.get_closest_marker("slow") is not None:
            slow[item.path] = slow.get(item.path, 0) + 1
    items.sort(key=lambda item: -slow.get(item.path, 0))  # stable: file order kept within


@pytest.fixture(scope="module", autouse=True)
def _frozen_heap():
    """Keep the cycle collector off what the run holds anyway (tfcompress/_compat/heap.py).

    A full collection walks every tracked object, and the TFLite converter and Keras start
    one per conversion and per ``clear_session()``: with TensorFlow, Keras and the session's
    models alive, each took ~0.25 s, a sixth of test_cli_quantize.py's time. At each test
    file's start, what the previous file left is collected and what survives (imports,
    session fixtures) is frozen; what this file creates is collected as usual.
    """
    import gc

    import keras  # noqa: F401  (imported here, so its objects are frozen from the first file on)

    gc.collect()
    gc.freeze()
    yield
