"""``tfcompress data`` / ``prepare_data``: split files from tiny generated images, clips, arrays."""

from __future__ import annotations

import dataclasses
import struct
import wave
import zlib
from pathlib import Path

import numpy as np
import pytest

from tfcompress.cli import main
from tfcompress.data.npfiles import read_npz
from tfcompress.data.prepare import prepare_data
from tfcompress.errors import InvalidDataError, OutputExistsError


def _png(path: Path, pixels: np.ndarray) -> None:
    """A grayscale 8-bit PNG, written without an imaging library."""
    height, width = pixels.shape
    raw = b"".join(b"\x00" + pixels[row].astype(np.uint8).tobytes() for row in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def _wav(path: Path, samples: np.ndarray, *, rate: int, width: int = 2) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as clip:
        clip.setnchannels(samples.shape[1])
        clip.setsampwidth(width)
        clip.setframerate(rate)
        if width == 1:
            clip.writeframes((samples * 127 + 128).astype(np.uint8).tobytes())
        else:
            clip.writeframes((samples * 32767).astype("<i2").tobytes())


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    """cat/ (9 images) and dog/ (6 images): bright cats, dark dogs, 10x12 grayscale."""
    root = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(0)
    for name, count, low in (("cat", 9, 128), ("dog", 6, 0)):
        for index in range(count):
            _png(root / name / f"{index}.png", rng.integers(low, low + 128, (10, 12)))
    return root


@pytest.fixture(scope="module")
def small_model(tmp_path_factory) -> Path:
    import keras

    inputs = keras.Input((6, 6, 3))
    hidden = keras.layers.Flatten()(inputs)
    path = tmp_path_factory.mktemp("model") / "m.keras"
    keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(hidden)).save(path)
    return path


def test_class_folders_make_a_stratified_seed_fixed_split_fitted_to_the_model(
    images, small_model, tmp_path, capsys
):
    out = tmp_path / "split"
    argv = ["data", str(images), "--model", str(small_model), "--out-dir", str(out)]
    assert main([*argv, "--calib-samples", "4"]) == 0
    summary = capsys.readouterr().out
    assert "0=cat, 1=dog" in summary and "cat 7/2, dog 4/2" in summary
    test, train, calib = (read_npz(out / n) for n in ("test.npz", "train.npz", "calib.npz"))
    assert test["x"].shape == (4, 6, 6, 3) and train["x"].shape == (11, 6, 6, 3)
    assert test["x"].dtype == np.float32 and 0.0 <= train["x"].min() <= train["x"].max() <= 1.0
    assert sorted(test["y"].tolist()) == [0, 0, 1, 1] and set(calib) == {"x"}
    assert len(calib["x"]) == 4
    # bright cats are label 0: the labels follow the folders
    assert train["x"][train["y"] == 0].mean() > train["x"][train["y"] == 1].mean()
    again = prepare_data(images, model=small_model, out_dir=tmp_path / "again", calib_samples=4)
    assert (read_npz(again.written[1])["y"] == test["y"]).all()  # the same seed, the same split
    other = prepare_data(images, out_dir=tmp_path / "other", seed=5)
    assert other.sample_shape == (10, 12, 1)  # without a model: the images' own shape
    with pytest.raises(dataclasses.FrozenInstanceError):
        other.seed = 1  # type: ignore[misc]


def test_existing_files_are_refused_before_anything_is_written(images, tmp_path, capsys):
    (tmp_path / "train.npz").write_bytes(b"mine")
    assert main(["data", str(images), "--out-dir", str(tmp_path)]) == 2
    assert "already exists; pass --force" in capsys.readouterr().err
    assert (
        not (tmp_path / "calib.npz").exists() and (tmp_path / "train.npz").read_bytes() == b"mine"
    )
    assert main(["data", str(images), "--out-dir", str(tmp_path), "--force", "--json"]) == 0
    assert '"classes": ["cat", "dog"]' in capsys.readouterr().out


def test_a_flat_folder_is_unlabelled_and_scale_options_hold(images, tmp_path):
    flat = tmp_path / "flat"
    for index, path in enumerate(sorted((images / "cat").glob("*.png"))[:5]):
        (flat / f"{index}.png").parent.mkdir(exist_ok=True)
        (flat / f"{index}.png").write_bytes(path.read_bytes())
    done = prepare_data(flat, out_dir=tmp_path / "a", scale="-1,1")
    assert done.classes == () and "y" not in read_npz(done.written[2])
    assert done.value_range[0] >= -1.0 and done.value_range[1] <= 1.0
    raw = prepare_data(flat, out_dir=tmp_path / "b", scale="none")
    assert raw.value_range[1] > 128  # pixels as decoded


def test_a_model_that_rescales_itself_gets_pixels(images, tmp_path):
    import keras

    inputs = keras.Input((10, 12, 1))
    scaled = keras.layers.Rescaling(1 / 255)(inputs)
    model = keras.Model(inputs, keras.layers.Dense(1)(keras.layers.Flatten()(scaled)))
    done = prepare_data(images, model=model, out_dir=tmp_path)
    assert done.value_range[1] > 128 and "Rescaling" in done.scaling


def test_wav_clips_are_mono_resampled_and_cut_or_padded_to_the_input(tmp_path):
    import keras

    rng = np.random.default_rng(1)
    for label in ("no", "yes"):
        for index in range(3):
            clip = rng.uniform(-0.5, 0.5, (4000 + 3000 * index, 2))  # stereo, 8 kHz
            _wav(tmp_path / "clips" / label / f"{index}.wav", clip, rate=8000)
    _wav(
        tmp_path / "clips" / "yes" / "8bit.wav",
        rng.uniform(-0.5, 0.5, (100, 1)),
        rate=8000,
        width=1,
    )
    inputs = keras.Input((16000, 1))
    model = keras.Model(inputs, keras.layers.Dense(2)(keras.layers.Flatten()(inputs)))
    done = prepare_data(
        tmp_path / "clips", model=model, out_dir=tmp_path / "out", sample_rate=16000
    )
    assert done.kind == "audio" and done.sample_shape == (16000, 1)
    assert (
        done.classes == ("no", "yes")
        and -1.0 <= done.value_range[0] < 0 < done.value_range[1] <= 1.0
    )
    x = read_npz(tmp_path / "out" / "train.npz")["x"]
    # 4,000 frames at 8 kHz are 8,000 at 16 kHz: the rest of the second is zeros
    shortest = min(x, key=lambda clip: np.count_nonzero(clip))
    assert np.count_nonzero(shortest) <= 8_100 and not shortest[-100:].any()
    (tmp_path / "clips" / "no" / "bad.wav").write_bytes(b"RIFF....WAVEfmt ")
    with pytest.raises(InvalidDataError, match="not a PCM WAV file"):
        prepare_data(tmp_path / "clips", out_dir=tmp_path / "bad")


def test_csv_and_npy_arrays(tmp_path, small_model):
    rows = ["a,b,label", *(f"{i},{i * 2},{'odd' if i % 2 else 'even'}" for i in range(12))]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    done = prepare_data(tmp_path / "t.csv", out_dir=tmp_path / "csv")
    assert done.classes == ("even", "odd") and done.sample_shape == (2,)
    assert dict(done.per_class) == {"even": (4, 2), "odd": (4, 2)}
    np.save(tmp_path / "a.npy", np.arange(10 * 108, dtype=np.float32).reshape(10, 108))
    fitted = prepare_data(tmp_path / "a.npy", model=small_model, out_dir=tmp_path / "npy")
    assert fitted.sample_shape == (6, 6, 3) and fitted.scaling == "as read"
    with pytest.raises(InvalidDataError, match=r"takes \(6, 6, 3\)"):
        prepare_data(tmp_path / "t.csv", model=small_model, out_dir=tmp_path / "no")
    with pytest.raises(OutputExistsError):
        prepare_data(tmp_path / "t.csv", out_dir=tmp_path / "csv")
