"""The data adapter (every source) and validation against a model's input."""

import numpy as np
import pytest

from tfcompress.data import Dataset, load_data, validate_for_model, validate_for_signature
from tfcompress.errors import InvalidDataError
from tfcompress.models.signature import ModelSignature, TensorSpec

SPEC = TensorSpec(shape=(None, 28, 28, 1), dtype="float32")
RNG = np.random.default_rng(0)
X = RNG.random((6, 28, 28, 1), dtype=np.float32)
Y = np.array([0, 1, 2, 3, 4, 5])


def _same(dataset: Dataset, labels=True):
    np.testing.assert_array_equal(dataset.x, X)
    if labels:
        np.testing.assert_array_equal(dataset.y, Y)
    else:
        assert dataset.y is None


def test_arrays_and_tuples():
    _same(load_data(X), labels=False)
    _same(load_data((X, Y)))


def test_npz_and_npy_files(tmp_path):
    np.savez(tmp_path / "d.npz", x=X, y=Y)
    np.save(tmp_path / "d.npy", X)
    _same(load_data(tmp_path / "d.npz"))
    _same(load_data(str(tmp_path / "d.npy")), labels=False)


def test_npz_with_other_names_is_matched_to_inputs_by_name(tmp_path):
    np.savez(tmp_path / "d.npz", images=X)
    dataset = load_data(tmp_path / "d.npz")
    assert dataset.input_names == ("images",)
    spec = TensorSpec(shape=(None, *X.shape[1:]), name="image")
    with pytest.raises(InvalidDataError, match=r"arrays 'images' but the model's inputs are image"):
        validate_for_model(dataset, spec)
    renamed = validate_for_model(dataset, TensorSpec(shape=(None, *X.shape[1:]), name="images"))
    np.testing.assert_array_equal(renamed.x, X)


def test_npz_with_only_labels_names_the_keys(tmp_path):
    np.savez(tmp_path / "d.npz", y=Y)
    with pytest.raises(InvalidDataError, match=r"no samples \(found only \['y'\]\)"):
        load_data(tmp_path / "d.npz")


def test_corrupt_npz_is_a_data_error(tmp_path):
    (tmp_path / "d.npz").write_bytes(b"garbage")
    with pytest.raises(InvalidDataError, match=r"not a readable \.npz"):
        load_data(tmp_path / "d.npz")


def test_tf_data_batched_and_unbatched():
    import tensorflow as tf

    unbatched = tf.data.Dataset.from_tensor_slices((X, Y))
    _same(load_data(unbatched, sample_rank=3))
    _same(load_data(unbatched.batch(4), sample_rank=3))


def test_generator_function_and_iterables():
    def generator():
        for i in range(len(X)):
            yield [X[i : i + 1]]  # the TFLite representative_dataset convention

    _same(load_data(generator, sample_rank=3), labels=False)
    _same(load_data(list(zip(X, Y, strict=True)), sample_rank=3))
    _same(load_data(({"x": x, "y": y} for x, y in zip(X, Y, strict=True)), sample_rank=3))


def test_endless_generator_stops_at_max_samples():
    def endless():
        while True:
            yield X[0]

    assert len(load_data(endless, sample_rank=3, max_samples=5)) == 5


def test_image_folder(tmp_path):
    import tensorflow as tf

    for label in ("cat", "dog"):
        (tmp_path / label).mkdir()
        for i in range(2):
            pixels = tf.constant(RNG.integers(0, 255, (10, 12, 3), dtype=np.uint8))
            (tmp_path / label / f"{i}.png").write_bytes(tf.io.encode_png(pixels).numpy())
    dataset = load_data(tmp_path, image_size=(8, 8))
    assert dataset.x.shape == (4, 8, 8, 3)
    assert dataset.x.max() <= 1.0
    np.testing.assert_array_equal(dataset.y, [0, 0, 1, 1])


def test_empty_folder_is_rejected(tmp_path):
    with pytest.raises(InvalidDataError, match="no images found"):
        load_data(tmp_path)


def test_validation_accepts_and_normalises():
    ints = Dataset((X * 255).astype(np.uint8), np.eye(6)[Y])  # one-hot labels
    checked = validate_for_model(ints, SPEC, require_labels=True)
    assert checked.x.dtype == np.float32
    np.testing.assert_array_equal(checked.y, Y)
    squeezed = validate_for_model(Dataset(X[..., 0]), SPEC)  # (N, 28, 28) gains its channel
    assert squeezed.x.shape == (6, 28, 28, 1)


@pytest.mark.parametrize(
    ("dataset", "message"),
    [
        (Dataset(np.zeros((0, 28, 28, 1), np.float32)), "is empty"),
        (
            Dataset(np.zeros((2, 32, 32, 3), np.float32)),
            r"shape \(2, 32, 32, 3\) but the model "
            r"expects \(N, 28, 28, 1\) float32",
        ),
        (Dataset(np.array([["a"]] * 2)), "dtype <U1"),
        (Dataset(np.where(X > 0.5, np.nan, X)), "NaN or Inf"),
        (Dataset(X, Y[:3]), "labels of shape"),
        (Dataset(X, -Y), "class indices start at 0"),
    ],
)
def test_validation_errors_say_what_is_wrong(dataset, message):
    with pytest.raises(InvalidDataError, match=message):
        validate_for_model(dataset, SPEC)


def test_missing_labels_when_required():
    with pytest.raises(InvalidDataError, match="has no labels"):
        validate_for_model(Dataset(X), SPEC, require_labels=True, what="--eval data")


def test_labels_beyond_the_model_outputs():
    with pytest.raises(InvalidDataError, match="model has 3 outputs"):
        validate_for_model(Dataset(X, Y), SPEC, num_classes=3)


def test_bundled_mnist_is_stratified_and_real(mnist_split):
    assert len(mnist_split.test) == 1250
    assert np.bincount(mnist_split.test.y).tolist() == [125] * 10
    assert mnist_split.train.x.shape[1:] == (28, 28, 1)
    assert mnist_split.train.x.min() >= 0.0 and mnist_split.train.x.max() == 1.0


TWO = ModelSignature(
    (TensorSpec((None, 4, 4, 1), name="image"), TensorSpec((None, 1), name="gain")),
    (TensorSpec((None, 10), name="cls"), TensorSpec((None, 4), name="box")),
)
IMAGES, GAINS = np.ones((5, 4, 4, 1), np.float32), np.ones((5, 1), np.float32)


def test_several_inputs_by_name_or_position(tmp_path):
    by_name = tmp_path / "named.npz"
    np.savez(by_name, gain=GAINS, image=IMAGES, y_cls=np.arange(5), y_box=np.zeros((5, 4)))
    checked = validate_for_signature(load_data(by_name), TWO)
    assert list(checked.x) == ["image", "gain"] and list(checked.y) == ["cls", "box"]
    positional = load_data({"x0": IMAGES, "x1": GAINS})  # a dict, in the model's input order
    assert validate_for_signature(positional, TWO).x["gain"].shape == (5, 1)
    unlabelled = validate_for_signature(Dataset({"image": IMAGES, "gain": GAINS}), TWO)
    assert unlabelled.y is None


@pytest.mark.parametrize(
    ("dataset", "message"),
    [
        (Dataset(IMAGES), r"one array but the model has 2 inputs \(image \(N, 4, 4, 1\)"),
        (Dataset({"image": IMAGES}), r"missing 'gain'"),
        (Dataset({"image": IMAGES, "gain": GAINS, "extra": GAINS}), r"no input is called 'extra'"),
        (
            Dataset({"image": IMAGES, "gain": np.ones((5, 2))}),
            r"for input 'gain' has shape \(5, 2\)",
        ),
        (Dataset({"image": IMAGES, "gain": GAINS}, np.arange(5)), r"save labels per output as y_"),
        (Dataset({"image": IMAGES, "gain": GAINS}, {"mask": GAINS}), r"does not output"),
        (Dataset({"image": IMAGES, "gain": GAINS}, {"cls": np.arange(3)}), r"for output 'cls'"),
    ],
)
def test_several_inputs_errors_name_the_tensor(dataset, message):
    with pytest.raises(InvalidDataError, match=message):
        validate_for_signature(dataset, TWO)


def test_npz_with_both_y_and_per_output_labels_is_refused(tmp_path):
    path = tmp_path / "both.npz"
    np.savez(path, image=IMAGES, y=np.arange(5), y_cls=np.arange(5))
    with pytest.raises(InvalidDataError, match=r"both 'y' and per-output labels \(y_cls\)"):
        load_data(path)


def test_inputs_with_different_sample_counts_are_refused():
    with pytest.raises(InvalidDataError, match=r"'image': 5, 'gain': 3"):
        Dataset({"image": IMAGES, "gain": GAINS[:3]})
