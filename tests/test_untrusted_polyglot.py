"""A file valid as two model formats runs no code: one decision from the bytes, loaded as checked.

Each polyglot pairs a Keras payload whose Lambda layer writes a marker file with a benign
cover of another format, arranged so that both readers accept the same bytes (an HDF5 user
block puts the superblock at 512 or later, ZIP readers look for their directory at the end,
ONNX ignores what a doc string holds). Under every extension: without ``--unsafe`` the file
is refused naming both formats and the marker never appears; with ``--unsafe`` it is loaded
as what its extension names, so the payload runs under the payload's extension (it is real)
and the cover loads under the cover's (the loader read the format that was decided).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from fuzzing.mutations_formats import onnx_holding, pad_to_power_of_two
from tfcompress._compat.keras import KerasFlavour, keras_module
from tfcompress.cli import main
from tfcompress.errors import ModelLoadError
from tfcompress.models import OnnxModel, TFLiteModel, load_model
from tfcompress.models.format_detection import detect_formats
from tfcompress.models.formats import ModelFormat

EXTENSIONS = (".h5", ".keras", ".tflite", ".onnx")
FORMAT_OF = {
    ".h5": ModelFormat.H5,
    ".keras": ModelFormat.KERAS,
    ".tflite": ModelFormat.TFLITE,
    ".onnx": ModelFormat.ONNX,
}


@dataclass(frozen=True)
class Parts:
    """The bytes polyglots are built from, and the marker their payloads write."""

    marker: Path
    lambda_h5: bytes  # tf-keras .h5 whose Lambda writes the marker
    lambda_keras: bytes  # Keras 3 .keras archive with the same Lambda
    benign_h5: bytes
    benign_keras: bytes
    tflite: bytes
    onnx: bytes


def _payload(keras, marker: Path):
    # The marker's path is a constant inside the marshalled bytecode, as in a real attack;
    # eval only builds this test's own payload.
    write = eval(f"lambda t: (__import__('pathlib').Path({str(marker)!r}).write_text('ran'), t)[1]")
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(3)(inputs)
    return keras.Model(inputs, keras.layers.Lambda(write, name="lam")(hidden), name="payload")


def _benign(keras):
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)], name="benign")


def _onnx_relu() -> bytes:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> Parts:
    import tfcompress

    root = tmp_path_factory.mktemp("polyglot_parts")
    marker = root / "CODE_RAN"
    tf_keras = keras_module(KerasFlavour.TF_KERAS)
    keras3 = keras_module(KerasFlavour.KERAS3)
    files = {
        "lambda_h5": (_payload(tf_keras, marker), root / "lambda.h5"),
        "lambda_keras": (_payload(keras3, marker), root / "lambda.keras"),
        "benign_h5": (_benign(tf_keras), root / "benign.h5"),
        "benign_keras": (_benign(keras3), root / "benign.keras"),
    }
    for model, path in files.values():
        model.save(path)
    tflite = tfcompress.quantize(_benign(keras3), recipe="float32").model_content
    marker.unlink(missing_ok=True)  # building the payloads ran their Lambda: start clean
    return Parts(
        marker=marker,
        tflite=tflite,
        onnx=_onnx_relu(),
        **{name: path.read_bytes() for name, (_, path) in files.items()},
    )


# name -> (builder, format of the payload, format of the cover)
POLYGLOTS: dict[str, tuple[Callable[[Parts], bytes], ModelFormat, ModelFormat]] = {
    # The reported attack: ZIP magic first, the HDF5 model at 512, a benign .keras at the end.
    "zip_stub+h5_lambda+keras": (
        lambda p: pad_to_power_of_two(b"PK\x03\x04") + p.lambda_h5 + p.benign_keras,
        ModelFormat.H5,
        ModelFormat.KERAS,
    ),
    "zip_stub+h5+keras_lambda": (
        lambda p: pad_to_power_of_two(b"PK\x03\x04") + p.benign_h5 + p.lambda_keras,
        ModelFormat.KERAS,
        ModelFormat.H5,
    ),
    "h5_lambda+keras": (lambda p: p.lambda_h5 + p.benign_keras, ModelFormat.H5, ModelFormat.KERAS),
    "h5+keras_lambda": (lambda p: p.benign_h5 + p.lambda_keras, ModelFormat.KERAS, ModelFormat.H5),
    "tflite+h5_lambda": (
        lambda p: pad_to_power_of_two(p.tflite) + p.lambda_h5,
        ModelFormat.H5,
        ModelFormat.TFLITE,
    ),
    "tflite+keras_lambda": (
        lambda p: p.tflite + p.lambda_keras,
        ModelFormat.KERAS,
        ModelFormat.TFLITE,
    ),
    "onnx+h5_lambda": (
        lambda p: onnx_holding(p.onnx, p.lambda_h5, align=True),
        ModelFormat.H5,
        ModelFormat.ONNX,
    ),
    "onnx+keras_lambda": (
        lambda p: onnx_holding(p.onnx, p.lambda_keras, align=False),
        ModelFormat.KERAS,
        ModelFormat.ONNX,
    ),
}


def _write(parts: Parts, folder: Path, name: str, extension: str) -> Path:
    path = folder / f"model{extension}"
    path.write_bytes(POLYGLOTS[name][0](parts))
    return path


@pytest.mark.parametrize("name", list(POLYGLOTS))
def test_each_polyglot_is_really_valid_as_both_formats(parts, name):
    build, payload, cover = POLYGLOTS[name]
    assert set(detect_formats(build(parts))) == {payload, cover}


@pytest.mark.parametrize("extension", EXTENSIONS)
@pytest.mark.parametrize("name", list(POLYGLOTS))
def test_polyglot_is_refused_naming_both_formats_and_runs_nothing(parts, tmp_path, name, extension):
    _, payload, cover = POLYGLOTS[name]
    path = _write(parts, tmp_path, name, extension)
    with pytest.raises(ModelLoadError, match="polyglot") as caught:
        load_model(path)
    message = str(caught.value)
    assert payload.description in message and cover.description in message
    assert "\n" not in message
    assert not parts.marker.exists()


@pytest.mark.parametrize("extension", EXTENSIONS)
@pytest.mark.parametrize("name", list(POLYGLOTS))
def test_with_unsafe_a_polyglot_loads_as_its_extension_says(parts, tmp_path, name, extension):
    _, payload, cover = POLYGLOTS[name]
    path = _write(parts, tmp_path, name, extension)
    claimed = FORMAT_OF[extension]
    parts.marker.unlink(missing_ok=True)
    if claimed not in {payload, cover}:
        with pytest.raises(ModelLoadError, match="polyglot"):
            load_model(path, safe_mode=False)
        assert not parts.marker.exists()
        return
    model = load_model(path, safe_mode=False)
    if claimed is payload:
        assert parts.marker.exists(), "the payload is real: consented, it runs"
        parts.marker.unlink()
        return
    # The cover was loaded, and only the cover: the loader read the format decided.
    assert not parts.marker.exists()
    expected = {ModelFormat.TFLITE: TFLiteModel, ModelFormat.ONNX: OnnxModel}.get(claimed)
    if expected is not None:
        assert isinstance(model, expected)
    else:
        assert model.name == "benign"


def test_the_reported_attack_fails_in_one_line_through_the_cli(parts, tmp_path, capsys):
    path = _write(parts, tmp_path, "zip_stub+h5_lambda+keras", ".h5")
    data = tmp_path / "data.npz"
    import numpy as np

    np.savez(data, x=np.zeros((4, 4), np.float32))
    for argv in (
        ["inspect", str(path)],
        ["quantize", str(path), "--data", str(data), "--out", str(tmp_path / "out.tflite")],
    ):
        assert main(argv) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and "polyglot" in lines[0], lines
    assert not parts.marker.exists()
    assert not (tmp_path / "out.tflite").exists()
    done = subprocess.run(
        [sys.executable, "-m", "tfcompress", "inspect", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "polyglot" in done.stderr
    assert not parts.marker.exists()


@pytest.mark.parametrize(
    ("content", "extension", "says"),
    [
        ("benign_h5", ".keras", "HDF5"),
        ("benign_keras", ".h5", "zip"),
        ("tflite", ".onnx", "flatbuffer"),
        ("onnx", ".tflite", "ONNX"),
        ("benign_h5", ".tflite", "HDF5"),
    ],
)
def test_an_extension_that_disagrees_with_the_content_is_refused_naming_both(
    parts, tmp_path, content, extension, says
):
    path = tmp_path / f"model{extension}"
    path.write_bytes(getattr(parts, content))
    with pytest.raises(ModelLoadError, match=f"the name says .*{extension}.*{says}"):
        load_model(path)
    with pytest.raises(ModelLoadError, match="the name says"):
        load_model(path, safe_mode=False)  # no ambiguity to consent to: rename it


def test_a_folder_named_like_a_model_file_is_refused(tmp_path):
    keras = keras_module(KerasFlavour.KERAS3)
    folder = tmp_path / "model.h5"
    _benign(keras).export(folder, verbose=False)
    with pytest.raises(ModelLoadError, match=r"the name says .*SavedModel directory"):
        load_model(folder)


def test_the_file_is_loaded_as_checked_even_if_swapped_after_the_check(
    parts, tmp_path, monkeypatch
):
    """A file replaced between the check and the load: the loader reads the checked bytes."""
    import tfcompress.models.format_detection as detection

    path = tmp_path / "model.h5"
    path.write_bytes(parts.benign_h5)
    original = detection.detect_formats

    def swap_after_reading(content: bytes):
        path.write_bytes(parts.lambda_h5)  # the attacker wins the race to the path
        return original(content)

    monkeypatch.setattr(detection, "detect_formats", swap_after_reading)
    model = load_model(path)
    assert path.read_bytes() == parts.lambda_h5  # the race happened
    assert model.name == "benign" and not parts.marker.exists()


def test_a_saved_model_is_loaded_as_checked_even_if_swapped_after_the_check(
    parts, tmp_path, monkeypatch
):
    import tfcompress.models.saved_model as saved_model

    tf_keras = keras_module(KerasFlavour.TF_KERAS)
    benign, payload = tmp_path / "benign_sm", tmp_path / "payload_sm"
    _benign(tf_keras).save(benign, save_format="tf")
    _payload(tf_keras, parts.marker).save(payload, save_format="tf")
    parts.marker.unlink(missing_ok=True)
    original = saved_model._checked_fingerprint

    def swap_after_reading(path: Path):
        shutil.copyfile(payload / "keras_metadata.pb", benign / "keras_metadata.pb")
        return original(path)

    monkeypatch.setattr(saved_model, "_checked_fingerprint", swap_after_reading)
    model = load_model(benign)
    assert model.name == "benign" and not parts.marker.exists()
    with pytest.raises(ModelLoadError, match="Lambda"):  # the swapped folder, checked anew
        load_model(benign)
