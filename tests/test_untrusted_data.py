"""Hostile data files and bad arguments: each is one typed, one-line error; nothing hangs.

Every case here was found by fuzzing: FIFOs that blocked forever, headers declaring
terabytes, zip bombs, pickles, 0-d arrays, and float64 values that overflowed float32 on
the cast and segfaulted the TFLite converter.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import struct
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.lib import format as npy_format

import tfcompress
from tfcompress.cli import main
from tfcompress.data import Dataset, load_data, validate_for_model
from tfcompress.errors import (
    InvalidArgumentTypeError,
    InvalidDataError,
    InvalidInputError,
    TFCompressError,
)
from tfcompress.models.signature import TensorSpec

SPEC = TensorSpec(shape=(None, 28, 28, 1), dtype="float32")
X = np.random.default_rng(0).random((4, 28, 28, 1), dtype=np.float32)
Y = np.array([0, 1, 2, 3])
# A hang detector, not a speed check: a blocked read never returns, so a generous limit costs
# nothing when the call is right and keeps a loaded machine (seen: 5 s at load 14) from failing it.
TIMEOUT_S = 60.0


# ---------------------------------------------------------------- helpers


def one_line(error: BaseException) -> str:
    """The message as the CLI prints it: whitespace collapsed."""
    return " ".join(str(error).split())


def returns_within(function: Callable[[], Any], *, unblock: Path | None = None) -> Any:
    """Run ``function`` in a thread; fail the test if it has not returned within TIMEOUT_S.

    Returns what it returned, or the exception it raised (as a value, for pytest.raises-like
    checks). ``unblock`` is a FIFO to open for writing if the call hung, so the thread ends.
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = function()
        except BaseException as error:  # handed back to the test thread, never lost
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(TIMEOUT_S)
    if thread.is_alive():
        if unblock is not None:
            # ENXIO here means no reader waits on the FIFO: the thread is busy elsewhere.
            with contextlib.suppress(OSError):
                os.close(os.open(unblock, os.O_WRONLY | os.O_NONBLOCK))  # release the reader
        pytest.fail(f"the call blocked for more than {TIMEOUT_S}s")
    return outcome.get("error", outcome.get("value"))


def npy_bytes(shape: tuple[int, ...], descr: str = "<f4", payload: bytes = b"\0" * 16) -> bytes:
    """A .npy header declaring ``shape``, followed by ``payload`` (not necessarily enough)."""
    buffer = io.BytesIO()
    header = {"descr": descr, "fortran_order": False, "shape": shape}
    npy_format.write_array_header_1_0(buffer, header)
    return buffer.getvalue() + payload


def zip_with(path: Path, members: dict[str, bytes], method: int = zipfile.ZIP_STORED) -> Path:
    with zipfile.ZipFile(path, "w", compression=method) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return path


def patch_central_directory(path: Path, field_offset: int, value: int) -> None:
    """Overwrite a 4-byte field of the first central directory entry (what zipfile trusts)."""
    content = bytearray(path.read_bytes())
    entry = content.index(b"PK\x01\x02")
    content[entry + field_offset : entry + field_offset + 4] = struct.pack("<I", value)
    path.write_bytes(bytes(content))


CRC_FIELD, UNCOMPRESSED_SIZE_FIELD = 16, 24


def data_error(source: Any, match: str) -> InvalidDataError:
    with pytest.raises(InvalidDataError, match=match) as caught:
        load_data(source)
    assert len(one_line(caught.value)) < 400
    return caught.value


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    """An untrained Keras 3 model (28x28x1 -> 10) and its .keras file: enough for input errors."""
    import keras

    model = keras.Sequential(
        [keras.Input((28, 28, 1)), keras.layers.Flatten(), keras.layers.Dense(10)]
    )
    path = tmp_path_factory.mktemp("tiny") / "tiny.keras"
    model.save(path)
    return model, path


# ---------------------------------------------------------------- special files


def test_fifo_npz_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "calib.npz"
    os.mkfifo(fifo)
    error = returns_within(lambda: load_data(fifo), unblock=fifo)
    assert isinstance(error, InvalidDataError)
    assert str(fifo) in str(error) and "named pipe (FIFO)" in str(error)


def test_fifo_npy_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "calib.npy"
    os.mkfifo(fifo)
    error = returns_within(lambda: load_data(fifo), unblock=fifo)
    assert isinstance(error, InvalidDataError) and "named pipe" in str(error)


def test_link_to_dev_zero_is_refused(tmp_path):
    link = tmp_path / "zeros.npy"
    link.symlink_to("/dev/zero")
    error = returns_within(lambda: load_data(link))
    assert isinstance(error, InvalidDataError) and "character device" in str(error)


def test_fifo_inside_an_image_folder_is_refused_without_blocking(tmp_path):
    import tensorflow  # noqa: F401  (imported here so the time limit measures only the read)

    (tmp_path / "cat").mkdir()
    fifo = tmp_path / "cat" / "0.png"
    os.mkfifo(fifo)
    error = returns_within(lambda: load_data(tmp_path), unblock=fifo)
    assert isinstance(error, InvalidDataError)
    assert str(fifo) in str(error) and "named pipe" in str(error)


def test_folder_named_like_an_image_is_refused(tmp_path):
    (tmp_path / "cat" / "0.png").mkdir(parents=True)
    data_error(tmp_path, r"0\.png: is a directory, not an image file")


# ---------------------------------------------------------------- .npy files


def test_zero_d_npy(tmp_path):
    np.save(tmp_path / "x.npy", np.float32(3))
    data_error(tmp_path / "x.npy", r"x\.npy: is a single value \(a 0-d array\), not a batch")


def test_npy_header_declaring_a_huge_shape_is_refused_before_allocating(tmp_path):
    path = tmp_path / "x.npy"
    path.write_bytes(npy_bytes((10**12, 28, 28)))
    data_error(path, r"declares shape \(1000000000000, 28, 28\) float32 \(3\.1 PB\)")


def test_truncated_npy(tmp_path):
    path = tmp_path / "x.npy"
    path.write_bytes(npy_bytes((4, 28, 28), payload=b"\0" * 100))
    data_error(path, "truncated or corrupt")


def test_pickled_object_npy_is_refused(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.array([1, None, "a"], dtype=object), allow_pickle=True)
    data_error(path, r"holds Python objects \(a pickled array\), which tfcompress refuses")


@pytest.mark.parametrize(
    ("array", "kind"),
    [
        (np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")]), "structured or void"),
        (np.zeros(3, dtype="V8"), "structured or void"),
        (np.zeros(3, dtype=np.complex64), "complex numbers"),
        (np.array(["a", "b"]), "text strings"),
        (np.array([b"a", b"b"]), "byte strings"),
        (np.array(["2024-01-01"], dtype="datetime64[D]"), "dates"),
    ],
)
def test_non_numeric_npy_dtypes_are_refused(tmp_path, array, kind):
    np.save(tmp_path / "x.npy", array)
    data_error(tmp_path / "x.npy", rf"has dtype .*\({kind}.*\); save plain numbers")


def test_garbage_npy(tmp_path):
    (tmp_path / "x.npy").write_bytes(b"not numpy at all")
    data_error(tmp_path / "x.npy", r"not a readable \.npy file .*; save it with np\.save")


def test_npz_named_npy(tmp_path):
    np.savez(tmp_path / "d.npz", x=X)
    (tmp_path / "d.npz").rename(tmp_path / "d.npy")
    data_error(tmp_path / "d.npy", r"is a \.npz archive, not a \.npy array; rename it to \.npz")


def test_fortran_and_big_endian_npy_still_read(tmp_path):
    np.save(tmp_path / "f.npy", np.asfortranarray(X.astype(">f4")))
    loaded = load_data(tmp_path / "f.npy").x
    np.testing.assert_array_equal(loaded, X)
    assert loaded.flags.writeable


# ---------------------------------------------------------------- .npz files


def test_npy_named_npz(tmp_path):
    np.save(tmp_path / "d.npy", X)
    (tmp_path / "d.npy").rename(tmp_path / "d.npz")
    data_error(tmp_path / "d.npz", r"is a \.npy array, not a \.npz archive; rename it to \.npy")


def test_npz_with_a_bad_crc(tmp_path):
    path = tmp_path / "d.npz"
    np.savez(path, x=X)
    patch_central_directory(path, CRC_FIELD, 0xDEADBEEF)
    data_error(path, r"not a readable \.npz file \(Bad CRC-32")


def test_npz_with_a_garbage_member(tmp_path):
    path = zip_with(tmp_path / "d.npz", {"x.npy": b"garbage, not an array"})
    data_error(path, r"not a readable \.npz file \(the magic string is not correct")


def test_npz_whose_x_is_zero_d(tmp_path):
    np.savez(tmp_path / "d.npz", x=np.float32(3), y=Y)
    data_error(tmp_path / "d.npz", r"array 'x': is a single value \(a 0-d array\)")


def test_npz_whose_y_is_zero_d(tmp_path):
    np.savez(tmp_path / "d.npz", x=X, y=np.int64(3))
    data_error(tmp_path / "d.npz", r"array 'y': is a single value .* shape \(N,\) class")


def test_npz_member_declaring_a_huge_shape(tmp_path):
    path = zip_with(tmp_path / "d.npz", {"x.npy": npy_bytes((10**12, 28, 28))})
    data_error(path, r"array 'x': the header declares shape \(1000000000000, 28, 28\)")


def test_npz_pickled_member_is_refused(tmp_path):
    content = io.BytesIO()
    np.save(content, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    path = zip_with(tmp_path / "d.npz", {"x.npy": content.getvalue()})
    data_error(path, "pickled array")


def test_npz_complex_member_is_refused(tmp_path):
    np.savez(tmp_path / "d.npz", x=X.astype(np.complex64))
    data_error(tmp_path / "d.npz", r"array 'x': has dtype complex64 \(complex numbers\)")


def test_deflate_zip_bomb_is_refused(tmp_path):
    path = tmp_path / "d.npz"
    np.savez_compressed(path, x=X)
    patch_central_directory(path, UNCOMPRESSED_SIZE_FIELD, 0xFFFFFFF0)
    data_error(path, r"claims 4\.3 GB uncompressed from .* more than deflate can produce")


def test_stored_member_lying_about_its_size_is_refused(tmp_path):
    path = tmp_path / "d.npz"
    np.savez(path, x=X)
    patch_central_directory(path, UNCOMPRESSED_SIZE_FIELD, 0xFFFFFFF0)
    data_error(path, r"array 'x' claims 4\.3 GB stored in .*; the archive is corrupt")


def test_compressed_npz_still_reads(tmp_path):
    np.savez_compressed(tmp_path / "d.npz", x=X, y=Y)
    dataset = load_data(tmp_path / "d.npz")
    np.testing.assert_array_equal(dataset.x, X)
    np.testing.assert_array_equal(dataset.y, Y)


# ---------------------------------------------------------------- load_data arguments


def test_load_data_of_an_int_is_a_type_error():
    with pytest.raises(InvalidArgumentTypeError, match="object of type int; pass arrays") as e:
        load_data(5)
    assert isinstance(e.value, TypeError) and isinstance(e.value, TFCompressError)


def test_load_data_of_a_zero_d_array():
    with pytest.raises(InvalidDataError, match=r"single value \(a 0-d array\)"):
        load_data(np.array(3.0))


def test_load_data_of_a_missing_csv():
    data_error("x.csv", r"x\.csv: no such data file or folder; check the path")


def test_load_data_of_an_existing_csv(tmp_path):
    (tmp_path / "x.csv").write_text("1,2,3\n")
    data_error(tmp_path / "x.csv", r"unsupported data file \(\.csv\); convert it to a \.npz")


def test_ragged_elements():
    with pytest.raises(InvalidDataError, match="cannot be made into one numeric array"):
        load_data(iter([{"x": [[1, 2], [3]]}]))


@pytest.mark.parametrize("count", [0, -1])
def test_load_data_max_samples_must_be_positive(count):
    with pytest.raises(InvalidInputError, match="max_samples must be at least 1"):
        load_data(iter([X[0]]), max_samples=count)


# ---------------------------------------------------------------- validation after the cast


def test_float64_beyond_float32_is_refused_after_the_cast():
    huge = Dataset(np.full((3, 28, 28, 1), 1e300))
    with pytest.raises(InvalidDataError, match=r"values beyond float32's range .* in 3 of 3"):
        validate_for_model(huge, SPEC)


def test_nan_is_still_named_nan():
    with pytest.raises(InvalidDataError, match="NaN or Inf values in 1 of 4 samples"):
        validate_for_model(
            Dataset(np.where(np.arange(4)[:, None, None, None] == 2, np.nan, X)), SPEC
        )


def test_integers_cast_to_a_narrower_int_must_not_wrap():
    spec = TensorSpec(shape=(None, 2), dtype="int8")
    with pytest.raises(InvalidDataError, match=r"ranges from 0 to 300, outside int8's"):
        validate_for_model(Dataset(np.array([[0, 300], [1, 2]])), spec)
    with pytest.raises(InvalidDataError, match="fractional values"):
        validate_for_model(Dataset(np.array([[0.5, 1.0]])), spec)
    ok = validate_for_model(Dataset(np.array([[-128, 127]], np.int64)), spec)
    assert ok.x.dtype == np.int8 and ok.x.tolist() == [[-128, 127]]


def test_int_data_overflowing_float16_is_refused():
    spec = TensorSpec(shape=(None, 2), dtype="float16")
    with pytest.raises(InvalidDataError, match="beyond float16's range"):
        validate_for_model(Dataset(np.array([[1, 70000]])), spec)


# ---------------------------------------------------------------- labels


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        (np.array([0.0, np.nan, 1.0, 2.0]), "labels hold 1 NaN or Inf values"),
        (np.array([0.0, 1e300, 1.0, 2.0]), r"labels go up to 1e\+300, too large"),
        (np.array([0, -1, 1, 2]), "labels include -1; class indices start at 0"),
        (np.array([0, 2**63 + 5, 1, 2], np.uint64), "too large for a class index"),
        (np.array([0.0, 0.5, 1.0, 2.0]), "must be whole class indices"),
        (np.array([0, 1]), r"has 4 samples but labels of shape \(2,\)"),
        (np.array(["a", "b", "c", "d"]), "labels have dtype <U1"),
    ],
)
def test_bad_labels(labels, message):
    with pytest.raises(InvalidDataError, match=message):
        validate_for_model(Dataset(X, labels), SPEC)


def test_huge_class_index_against_the_model_outputs():
    with pytest.raises(InvalidDataError, match="labels go up to 10000000 but the model has 10"):
        validate_for_model(Dataset(X, np.array([0, 1, 2, 10**7])), SPEC, num_classes=10)


# ---------------------------------------------------------------- API arguments


@pytest.mark.parametrize("model", [None, 123])
def test_quantize_of_a_wrong_type_is_a_typed_type_error(model):
    with pytest.raises(InvalidArgumentTypeError, match="expected a Keras model") as caught:
        tfcompress.quantize(model)
    assert isinstance(caught.value, TypeError) and caught.value.exit_code == 2


def test_quantize_1e300_calibration_data_is_an_error_not_a_segfault(tiny_model):
    model, _ = tiny_model
    with pytest.raises(InvalidDataError, match="beyond float32's range"):
        tfcompress.quantize(
            model, recipe="int8", representative_data=np.full((4, 28, 28, 1), 1e300)
        )


def test_quantize_with_empty_calibration_data(tiny_model):
    model, _ = tiny_model
    with pytest.raises(InvalidDataError, match="calibration data is empty"):
        tfcompress.quantize(
            model, recipe="int8", representative_data=np.zeros((0, 28, 28, 1), np.float32)
        )


@pytest.mark.parametrize("count", [0, -1])
def test_quantize_calibration_samples_must_be_positive(tiny_model, count):
    with pytest.raises(InvalidInputError, match="calibration_samples must be at least 1"):
        tfcompress.quantize(tiny_model[0], representative_data=X, calibration_samples=count)


def test_evaluate_names_the_model_of_a_wrong_type():
    with pytest.raises(InvalidArgumentTypeError, match="model 'a': expected a Keras model"):
        tfcompress.evaluate({"a": 5}, (X, Y))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"batch_size": -3}, "batch_size must be at least 1, got -3"),
        ({"batch_size": 0}, "batch_size must be at least 1, got 0"),
        ({"threads": 0}, "threads must be at least 1, got 0"),
    ],
)
def test_evaluate_refuses_counts_below_one(tiny_model, options, message):
    with pytest.raises(InvalidInputError, match=message):
        tfcompress.evaluate(tiny_model[0], (X, Y), **options)


def test_evaluate_refuses_a_float_batch_size(tiny_model):
    with pytest.raises(InvalidArgumentTypeError, match="batch_size must be a positive integer"):
        tfcompress.evaluate(tiny_model[0], (X, Y), batch_size=2.5)


# ---------------------------------------------------------------- the CLI contract


def _bad_files(root: Path) -> dict[str, Path]:
    files = {
        "fifo": root / "fifo.npz",
        "zero_d": root / "zero_d.npy",
        "huge_values": root / "huge_values.npz",
        "bad_crc": root / "bad_crc.npz",
        "huge_shape": root / "huge_shape.npy",
    }
    os.mkfifo(files["fifo"])
    np.save(files["zero_d"], np.float32(3))
    np.savez(files["huge_values"], x=np.full((4, 28, 28, 1), 1e300))
    np.savez(files["bad_crc"], x=X)
    patch_central_directory(files["bad_crc"], CRC_FIELD, 0)
    files["huge_shape"].write_bytes(npy_bytes((10**12, 28, 28, 1)))
    return files


@pytest.mark.parametrize("case", ["fifo", "zero_d", "huge_values", "bad_crc", "huge_shape"])
def test_cli_bad_data_exits_2_with_one_line_and_no_output(tiny_model, tmp_path, capfd, case):
    bad = _bad_files(tmp_path)[case]
    out = tmp_path / "out.tflite"
    argv = ["quantize", str(tiny_model[1]), "--data", str(bad), "--out", str(out)]
    code = returns_within(lambda: main(argv), unblock=bad if case == "fifo" else None)
    err = capfd.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tfcompress quantize: error:"), err
    assert str(bad) in lines[0]
    assert not out.exists()


# ---------------------------------------------------------------- headers numpy cannot parse


@pytest.mark.parametrize(
    "header",
    [
        b"{'descr': '<f4', 'fortran_order': False, 'shape': (3,",  # unclosed: TokenError
        b"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} '''",  # unclosed string
        b"(" * 300,  # deeper than the parser goes
        b"{'descr': '<f4', 'fortran_order': False, 'shape': (1e400,), }",
    ],
    ids=["unclosed-bracket", "unclosed-string", "deep", "huge-literal"],
)
def test_every_way_numpy_refuses_a_header_is_bad_data(tmp_path, capfd, tiny_model, header):
    padded = header + b" " * ((64 - (len(header) + 11) % 64) % 64) + b"\n"
    path = tmp_path / "bad.npy"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(padded).to_bytes(2, "little") + padded)
    data_error(path, "not a readable .npy file")
    out = tmp_path / "out.tflite"
    assert main(["quantize", str(tiny_model[1]), "--data", str(path), "--out", str(out)]) == 2
    assert len(capfd.readouterr().err.strip().splitlines()) == 1 and not out.exists()


# ---------------------------------------------------------------- decompression bombs


def test_npz_inflating_past_the_stated_limit_is_refused_and_the_limit_can_be_raised(
    tmp_path, monkeypatch
):
    path = tmp_path / "bomb.npz"
    np.savez_compressed(path, x=np.zeros((5, 1000, 1000), np.float32))  # 20 MB from ~20 KB
    assert path.stat().st_size < 100_000
    monkeypatch.setenv("TFCOMPRESS_MAX_INFLATED_BYTES", str(10**7))
    data_error(path, r"inflate to 20\.0 MB, over the limit of 10\.0 MB.*MAX_INFLATED_BYTES=")
    monkeypatch.setenv("TFCOMPRESS_MAX_INFLATED_BYTES", str(10**8))
    assert load_data(path).x.shape == (5, 1000, 1000)
    monkeypatch.setenv("TFCOMPRESS_MAX_INFLATED_BYTES", "lots")
    with pytest.raises(InvalidInputError, match="positive whole number"):
        load_data(path)


def _png(width: int, height: int) -> bytes:
    """A PNG whose header declares ``width`` x ``height`` RGBA; its data is a few bytes."""
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body)
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )


def _gif(frames: int, side: int = 100) -> bytes:
    """An animated GIF of ``frames`` frames of ``side`` x ``side``, each a few bytes."""
    frame = b"\x2c" + struct.pack("<HHHH", 0, 0, side, side) + b"\x00" + b"\x02\x02\x4c\x01\x00"
    screen = b"GIF89a" + struct.pack("<HH", side, side) + b"\x80\x00\x00" + b"\0" * 6
    return screen + frame * frames + b"\x3b"


@pytest.mark.parametrize(
    ("name", "content", "declared"),
    [
        ("bomb.png", _png(20000, 20000), "20000x20000 = 400000000 pixels"),
        ("frames.gif", _gif(20000), "100x100 x 20000 frames = 200000000 pixels"),
        ("webp.png", b"RIFF\x00\x00\x00\x00WEBPVP8 ", "not a PNG, JPEG, GIF or BMP"),
        ("cut.png", b"\x89PNG\r\n\x1a\n\x00", "cannot read the image's size"),
    ],
)
def test_an_image_declaring_too_many_pixels_is_refused_before_decoding(
    tmp_path, name, content, declared
):
    folder = tmp_path / "images" / "cat"
    folder.mkdir(parents=True)
    (folder / name).write_bytes(content)
    (folder / "ok.png").write_bytes(_png(2, 2))
    error = data_error(tmp_path / "images", re.escape(declared))
    if "pixels" in declared:
        assert "TFCOMPRESS_MAX_IMAGE_PIXELS" in str(error)


def test_the_pixel_limit_can_be_raised_and_a_real_image_still_decodes(tmp_path, monkeypatch):
    import tensorflow as tf

    folder = tmp_path / "images" / "cat"
    folder.mkdir(parents=True)
    image = tf.io.encode_png(tf.zeros((30, 40, 3), tf.uint8)).numpy()
    (folder / "a.png").write_bytes(image)
    monkeypatch.setenv("TFCOMPRESS_MAX_IMAGE_PIXELS", "1000")
    data_error(tmp_path / "images", "40x30 = 1200 pixels, over the limit of 1000")
    monkeypatch.setenv("TFCOMPRESS_MAX_IMAGE_PIXELS", "1200")
    assert load_data(tmp_path / "images").x.shape == (1, 30, 40, 3)
