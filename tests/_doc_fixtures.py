"""The files the docs' commands read: what the demo wrote, and the few other models they name.

A command's files come from one *family*, chosen by the model the command names:

* ``demo``: what ``tfcompress demo --out-dir DIR`` writes (``model.keras``,
  ``model_float32.tflite``, ``calib.npz``, ``test.npz``, ``train.npz``: the files README.md's
  first command leaves). The demo runs once per test process, as the docs name it
  (``demo --quick``, the documented fast variant, with one epoch), and its folder is never
  touched: each doc's commands run in a fresh folder that gets copies of what they read.
* files the docs say come from elsewhere, each doc saying where in one line: the two-head
  detector (``two_head*``: ``tfcompress.samples.gate_models``), the keyword spotter
  (``kws.tflite``), the shipped-model stand-ins (``vad.*``, ``rnn.*``:
  tests/_shipped_models.py), the damaged digits classifier (``damaged.tflite``:
  ``tfcompress.samples.gate_models``) and a MediaPipe-shaped landmarker
  (``face_landmark.tflite``). So ``test.npz`` is the detector's frames next to
  ``two_head.keras`` and the demo's digits next to ``model.keras``, as in the docs.

To add a file a doc names: add its name to a family's table below (or a builder for a new
family), and say in the doc where a reader gets it. A name no family knows fails the docs
test with the doc line and this file's name.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tfcompress.demo import STARTER_FILES

# name in the docs -> name in the family's built folder
DEMO = {
    **{name: name for name in STARTER_FILES},
    "val.npz": "test.npz",  # docs/pruning.md and docs/qat.md: "cp test.npz val.npz"
}
DAMAGED = {  # tfcompress/samples/gate_models.py: build_gate_models(folder)
    "reference.keras": "reference.keras",
    "damaged.tflite": "damaged.tflite",
    "test.npz": "test.npz",
}
TWO_HEAD = {
    "two_head.keras": "two_head.keras",
    "two_head_int8.tflite": "two_head_int8.tflite",
    **dict.fromkeys(("frames.npz",), "two_head_frames.npz"),
    **dict.fromkeys(("test.npz", "train.npz", "calib.npz"), "two_head_test.npz"),
    "bad_gain.npz": "bad_gain.npz",
}
KWS = {"kws.tflite": "kws.tflite"}
LANDMARKER = {  # tfcompress/samples/landmarker.py: a MediaPipe-shaped float .tflite
    "face_landmark.tflite": "face_landmark.tflite",
    "faces/calib.npz": "calib.npz",
}
SHIPPED = {  # tests/_shipped_models.py: a streaming model with a state, a static-batch RNN
    name: name
    for name in (
        "vad.tflite",
        "vad.onnx",
        "vad_savedmodel",
        "vad.npz",
        "vad_unlabelled.npz",
        "rnn.tflite",
        "rnn_savedmodel",
        "rnn.npz",
    )
}

FAMILIES: dict[str, tuple[dict[str, str], Callable[[Path], None]]] = {}
_RUN: list[pytest.TempPathFactory] = []  # set by share_with_the_run()


def share_with_the_run(factory: pytest.TempPathFactory) -> None:
    """Build the models other test files also use once per run (tests/_shared.py)."""
    _RUN[:] = [factory]


def _shared(name: str, build: Callable[[Path], dict[str, Path]]) -> dict[str, Path]:
    from _shared import build_once

    if not _RUN:
        raise RuntimeError("call share_with_the_run(tmp_path_factory) first")
    return build_once(_RUN[0], name, build)


def _copied(paths: dict[str, Path], root: Path) -> dict[str, Path]:
    """Copy shared files into a family's folder (commands may write next to them)."""
    copies = {key: root / path.name for key, path in paths.items()}
    for key, path in paths.items():
        shutil.copyfile(path, copies[key])
    return copies


def family_of(tokens: list[str]) -> str:
    """The family of a command: the first model it names decides."""
    for token in tokens:
        name = Path(token).name
        if name.startswith("two_head") and name.endswith((".keras", ".tflite")):
            return "two_head"
        if name.startswith("kws."):
            return "kws"
        if name == "face_landmark.tflite":
            return "landmarker"
        if name.startswith(("vad", "rnn")) and name in SHIPPED:
            return "shipped"
        if name == "damaged.tflite":
            return "damaged"
    return "demo"


def fixture(name: str, family: str) -> Path | None:
    """The built file called ``name`` in the docs, from ``family``; None if none is known."""
    table, build = FAMILIES[family]
    if name not in table:
        return None
    return _built(family, build) / table[name]


@functools.cache
def _built(family: str, build: Callable[[Path], None]) -> Path:
    root = Path(tempfile.mkdtemp(prefix=f"tfcompress-doc-{family}-"))
    build(root)
    return root


def _demo(root: Path) -> None:
    from tfcompress.cli import main

    code = main(["demo", "--quick", "--epochs", "1", "--out-dir", str(root)])
    assert code == 0, f"tfcompress demo --quick exited {code}"
    assert sorted(p.name for p in root.iterdir()) == sorted(STARTER_FILES)


def _damaged(root: Path) -> None:
    from tfcompress.samples.gate_models import build_gate_models

    _copied(_shared("gate_models", build_gate_models), root)  # the run's one build of them


def _two_head(root: Path) -> None:
    from tfcompress.samples.gate_models import build_two_head_models

    paths = _copied(_shared("two_heads", build_two_head_models), root)
    with np.load(paths["two_head_frames"]) as frames:
        arrays = dict(frames)
    arrays["gain"] = np.repeat(arrays["gain"], 2, axis=1)  # (N, 2) for a (N, 1) input
    np.savez(root / "bad_gain.npz", **arrays)


def _kws(root: Path) -> None:
    import keras

    import tfcompress

    audio = keras.Input(shape=(None, 1), name="audio")  # any length: an unknown dimension
    hidden = keras.layers.Conv1D(4, 9, strides=4, activation="relu")(audio)
    scores = keras.layers.Dense(3, activation="softmax")(
        keras.layers.GlobalAveragePooling1D()(hidden)
    )
    model = keras.Model(audio, scores, name="kws")
    tfcompress.quantize(model, recipe="float32").save(root / "kws.tflite")


def _landmarker(root: Path) -> None:
    from tfcompress.samples.landmarker import landmark_model, shipped_tflite

    model, (train, _) = landmark_model(epochs=1)
    (root / "face_landmark.tflite").write_bytes(shipped_tflite(model, "mediapipe"))
    np.savez(root / "calib.npz", x=train.x[:64])  # one input: x, whatever its name


def _shipped(root: Path) -> None:
    from _shipped_models import build_rnn, build_vad

    build_vad(root)
    build_rnn(root)


FAMILIES.update(
    {
        "demo": (DEMO, _demo),
        "damaged": (DAMAGED, _damaged),
        "two_head": (TWO_HEAD, _two_head),
        "kws": (KWS, _kws),
        "landmarker": (LANDMARKER, _landmarker),
        "shipped": (SHIPPED, _shipped),
    }
)


def known(name: str, family: str) -> bool:
    """Whether ``family`` provides a file or folder the docs call ``name``."""
    return name in FAMILIES[family][0]


def place(name: str, family: str, folder: Path) -> bool:
    """Copy the fixture ``name`` into ``folder`` (replacing a fixture of another family)."""
    source = fixture(name, family)
    if source is None:
        return False
    target = folder / name
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_dir():
        shutil.rmtree(target)
    if source.is_dir():  # a SavedModel
        shutil.copytree(source, target)
    else:
        shutil.copyfile(source, target)
    return True
