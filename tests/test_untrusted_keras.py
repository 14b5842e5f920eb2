"""Untrusted Keras files and SavedModels: no code runs without consent, each bad file is one line.

Every payload tries to write a marker file when its code runs; the tests assert the marker is
absent after a refused load, and present after one trusted load (so the payload is real).
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import pytest

from tfcompress._compat.keras import KerasFlavour, keras_module
from tfcompress.cli import main
from tfcompress.errors import InvalidArgumentTypeError, ModelLoadError, TFCompressError
from tfcompress.models import SavedModelDir, load_model
from tfcompress.models.keras_safety import find_code
from tfcompress.models.signature import input_spec

TF_KERAS, KERAS3 = KerasFlavour.TF_KERAS, KerasFlavour.KERAS3
SPELLINGS: dict[str, Callable[[str], str]] = {
    "plain": lambda text: text,
    "escaped": lambda text: text.replace('"Lambda"', '"Lamb\\u0064a"'),
    "newline": lambda text: text.replace('"class_name": "Lambda"', '"class_name":\n"Lambda"'),
    "tab": lambda text: text.replace('"class_name": "Lambda"', '"class_name":\t"Lambda"'),
}
REFUSED = r"Lambda layer 'lam' \(in payload/inner\), which runs arbitrary Python code.*--unsafe"


# --- builders --------------------------------------------------------------------------------


def _payload_model(flavour: KerasFlavour, marker: Path) -> Any:
    """A Functional model around a nested Sequential whose Lambda writes ``marker``."""
    keras = keras_module(flavour)
    # The marker's path is a constant inside the marshalled bytecode, as in a real attack;
    # eval only builds this test's own payload.
    payload = eval(
        f"lambda t: (__import__('pathlib').Path({str(marker)!r}).write_text('ran'), t)[1]"
    )
    inner = keras.Sequential(
        [keras.Input((3,)), keras.layers.Lambda(payload, name="lam")], name="inner"
    )
    inputs = keras.Input((4,))
    return keras.Model(inputs, inner(keras.layers.Dense(3)(inputs)), name="payload")


def _save_payload(flavour: KerasFlavour, marker: Path, path: Path, **options: Any) -> Path:
    _payload_model(flavour, marker).save(path, **options)
    marker.unlink(missing_ok=True)  # building the model ran the Lambda: start clean
    return path


def _rewrite_h5_config(path: Path, rewrite: Callable[[str], str]) -> Path:
    with h5py.File(path, "r+") as handle:
        config = handle.attrs["model_config"]
        text = config.decode() if isinstance(config, bytes) else str(config)
        handle.attrs["model_config"] = rewrite(text).encode()
    return path


def _rewrite_zip_member(path: Path, member: str, rewrite: Callable[[bytes], bytes]) -> Path:
    edited = path.with_name(f"edited_{path.name}")
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(edited, "w") as target:
        for item in source.infolist():
            content = source.read(item.filename)
            target.writestr(item, rewrite(content) if item.filename == member else content)
    return edited


def _tiny_tf_keras_h5(path: Path) -> Path:
    keras = keras_module(TF_KERAS)
    keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)], name="tiny").save(path)
    return path


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "CODE_RAN"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain (non-Keras) SavedModel exported from Keras 3."""
    keras = keras_module(KERAS3)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    path = tmp_path_factory.mktemp("exported") / "saved_model"
    model.export(path, verbose=False)
    return path


def _copy(exported: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(exported, tmp_path / "saved_model"))


def _refused(path: Path, match: str, **options: Any) -> str:
    with pytest.raises(ModelLoadError, match=match) as caught:
        load_model(path, **options)
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    return message


# --- code payloads ---------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_tf_keras_h5_lambda_is_refused_however_spelled(tmp_path, marker, spelling):
    path = _save_payload(TF_KERAS, marker, tmp_path / "payload.h5")
    _rewrite_h5_config(path, SPELLINGS[spelling])
    with h5py.File(path, "r") as handle:  # the spelling really changed what the bytes say
        assert ('"class_name": "Lambda"' in handle.attrs["model_config"]) == (spelling == "plain")
    _refused(path, REFUSED)
    assert not marker.exists()


def test_trusted_h5_loads_and_runs_its_lambda(tmp_path, marker):
    path = _rewrite_h5_config(
        _save_payload(TF_KERAS, marker, tmp_path / "payload.h5"), SPELLINGS["escaped"]
    )
    assert load_model(path, safe_mode=False) is not None
    assert marker.read_text() == "ran"  # the payload is real: only consent lets it run


def test_tf_keras_saved_model_with_escaped_metadata_is_refused(tmp_path, marker):
    from tf_keras.protobuf import saved_metadata_pb2

    path = _save_payload(TF_KERAS, marker, tmp_path / "payload_savedmodel", save_format="tf")
    metadata_file = path / "keras_metadata.pb"
    metadata = saved_metadata_pb2.SavedMetadata()
    metadata.ParseFromString(metadata_file.read_bytes())
    for node in metadata.nodes:
        node.metadata = SPELLINGS["escaped"](node.metadata)
    metadata_file.write_bytes(metadata.SerializeToString())
    assert b'"Lambda"' not in metadata_file.read_bytes()

    _refused(path, REFUSED)
    assert not marker.exists()
    assert load_model(path, safe_mode=False) is not None
    assert marker.exists()


@pytest.mark.parametrize("flavour", [KERAS3, TF_KERAS])
@pytest.mark.parametrize("spelling", ["plain", "escaped"])
def test_keras_archive_lambda_is_refused(tmp_path, marker, flavour, spelling):
    path = _save_payload(flavour, marker, tmp_path / "payload.keras")
    edited = _rewrite_zip_member(
        path, "config.json", lambda content: SPELLINGS[spelling](content.decode()).encode()
    )
    _refused(edited, REFUSED)
    assert not marker.exists()
    assert load_model(edited, safe_mode=False) is not None


# --- what find_code flags, on hand-written configs ---------------------------------------------


def _layer(class_name: str, name: str | None = None, **config: Any) -> dict[str, Any]:
    return {"class_name": class_name, "config": {"name": name, **config} if name else config}


def _model(*layers: dict[str, Any]) -> dict[str, Any]:
    return _layer("Functional", "model", layers=list(layers))


def _found(config: Any, *, tf_keras_loader: bool = True) -> list[str]:
    return [str(ref) for ref in find_code(config, tf_keras_loader=tf_keras_loader)]


def test_wrappers_and_nested_models_are_searched():
    config = _model(
        _layer("TimeDistributed", "td", layer=_layer("Lambda", "in_td")),
        _layer(
            "Bidirectional",
            "bi",
            layer=_layer("LSTM", "lstm"),
            backward_layer=_layer("Lambda", "back"),
        ),
        _layer(
            "Sequential",
            "seq",
            layers=[_layer("Sequential", "deeper", layers=[_layer("Lambda", "deep")])],
        ),
    )
    assert _found(config) == [
        "model/td/in_td (Lambda)",
        "model/bi/back (Lambda)",
        "model/seq/deeper/deep (Lambda)",
    ]


def test_serialized_functions_are_reported_on_their_layer():
    keras3_activation = _layer(
        "Dense", "dense", activation={"class_name": "__lambda__", "config": {}}
    )
    tf_keras_wrapper = _layer("DropoutWrapper", "cell", dropout_fn_type="lambda", dropout_fn="4wE=")
    assert _found(_model(keras3_activation, tf_keras_wrapper)) == [
        "model/dense (Dense)",
        "model/cell (DropoutWrapper)",
    ]


def test_layers_keras_safe_mode_guards_are_flagged():
    config = _model(
        _layer("TFSMLayer", "tfsm", filepath="/elsewhere/model"),
        _layer("TorchModuleWrapper", "torch", module="gASV..."),
        _layer("StringLookup", "lookup", vocabulary="/etc/passwd"),
        _layer("StringLookup", "inline", vocabulary=["a", "b"]),
        _layer("TFOpLambda", "add", function="math.add"),  # a TF op by name: no bytecode
    )
    assert _found(config, tf_keras_loader=False) == [
        "model/tfsm (TFSMLayer)",
        "model/torch (TorchModuleWrapper)",
        "model/lookup (StringLookup)",
    ]


def test_module_imports_are_flagged_only_where_tf_keras_loads():
    def function(module: str, name: str) -> dict[str, Any]:
        return {"class_name": "function", "module": module, "config": name, "registered_name": name}

    config = _model(
        _layer("Dense", "os", activation=function("os", "system")),
        _layer("Dense", "exec", activation=function("builtins", "exec")),
        _layer("Dense", "fetch", activation=function("keras.utils", "get_file")),
        _layer("Dense", "fine", activation=function("builtins", "relu")),
        {**_layer("Dense", "dense"), "module": "keras.layers"},
    )
    assert _found(config) == ["model/os (Dense)", "model/exec (Dense)", "model/fetch (Dense)"]
    assert _found(config, tf_keras_loader=False) == []  # Keras 3 refuses these itself


def test_the_walk_is_iterative():
    deep: Any = _layer("Lambda", "bottom")
    for _ in range(200_000):
        deep = [deep]
    assert _found(deep) == ["bottom (Lambda)"]


def test_benign_models_load_in_every_format(tmp_path):
    for flavour in (KERAS3, TF_KERAS):
        keras = keras_module(flavour)
        layers = keras.layers
        inner = keras.Sequential(
            [layers.Dense(3, kernel_regularizer=keras.regularizers.L2(0.01))], name="inner"
        )
        inputs = keras.Input((5, 4))
        x = layers.TimeDistributed(layers.Dense(4))(inputs)
        x = layers.Bidirectional(layers.LSTM(2, return_sequences=True))(x)
        model = keras.Model(inputs, inner(layers.Flatten()(x)))
        model.compile(optimizer="adam", loss="mse", metrics=["mae"])
        for suffix in (".keras", ".h5"):
            path = tmp_path / f"{flavour}{suffix}"
            model.save(path)
            assert load_model(path) is not None
    tf_keras_dir = tmp_path / "tf_keras_savedmodel"
    model.save(tf_keras_dir, save_format="tf")
    assert load_model(tf_keras_dir) is not None


# --- hostile or broken Keras files -------------------------------------------------------------


def _deep_h5(tmp_path: Path) -> Path:
    nested = '{"config": ' * 100_000 + "1" + "}" * 100_000
    return _rewrite_h5_config(_tiny_tf_keras_h5(tmp_path / "deep.h5"), lambda _: nested)


def _deep_keras(tmp_path: Path) -> Path:
    keras = keras_module(KERAS3)
    path = tmp_path / "deep.keras"
    keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)]).save(path)
    return _rewrite_zip_member(path, "config.json", lambda _: b"[" * 100_000 + b"]" * 100_000)


def _metadata_list(tmp_path: Path) -> Path:
    keras = keras_module(KERAS3)
    path = tmp_path / "meta.keras"
    keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)]).save(path)
    return _rewrite_zip_member(path, "metadata.json", lambda _: b"[1, 2]")


def _huge_units(tmp_path: Path) -> Path:
    def rewrite(text: str) -> str:
        config = json.loads(text)
        config["config"]["layers"][-1]["config"]["units"] = 10**12
        return json.dumps(config)

    return _rewrite_h5_config(_tiny_tf_keras_h5(tmp_path / "huge.h5"), rewrite)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (_deep_h5, "nests deeper than any real model"),
        (_deep_keras, "nests deeper than any real model"),
        (_metadata_list, "metadata.json is a JSON list, not an object"),
        (_huge_units, "weights are too large to allocate.*hostile or corrupt"),
    ],
    ids=["deep_h5", "deep_keras", "metadata_list", "huge_units"],
)
def test_hostile_keras_files_fail_in_one_line(tmp_path, build, match):
    _refused(build(tmp_path), match)


@pytest.mark.parametrize(
    ("text", "match"),
    [("[]", "JSON list, not a model config"), ("{", "not valid JSON"), ("null", "JSON NoneType")],
)
def test_h5_config_that_is_not_an_object_is_refused(tmp_path, text, match):
    _refused(_rewrite_h5_config(_tiny_tf_keras_h5(tmp_path / "bad.h5"), lambda _: text), match)


# --- SavedModel directories ------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["garbage", "empty", "truncated"])
def test_broken_saved_model_pb_is_refused(tmp_path, exported, damage):
    path = _copy(exported, tmp_path)
    pb = path / "saved_model.pb"
    content = pb.read_bytes()
    pb.write_bytes(
        {"garbage": os.urandom(512), "empty": b"", "truncated": content[: len(content) // 2]}[
            damage
        ]
    )
    _refused(path, r"saved_model\.pb (is truncated or corrupt|holds no MetaGraph)")


@pytest.mark.parametrize("damage", ["index_garbage", "data_truncated"])
def test_broken_variables_are_refused_at_load_and_later(tmp_path, exported, damage):
    path = _copy(exported, tmp_path)
    variables = path / "variables"
    if damage == "index_garbage":
        (variables / "variables.index").write_bytes(os.urandom(300))
    else:
        data = next(variables.glob("variables.data-*"))
        data.write_bytes(data.read_bytes()[:5])
    _refused(path, "TensorFlow cannot read the SavedModel.*export the model again")
    with pytest.raises(ModelLoadError, match="cannot read the SavedModel"):
        input_spec(SavedModelDir(path))  # a hand-made SavedModelDir fails as clearly


def test_fifo_inside_a_saved_model_is_refused(tmp_path, exported):
    path = _copy(exported, tmp_path)
    os.mkfifo(path / "variables" / "variables.extra")
    _refused(path, r"named pipe \(FIFO\) inside the SavedModel")


def test_plain_saved_model_still_loads(tmp_path, exported):
    loaded = load_model(_copy(exported, tmp_path))
    assert isinstance(loaded, SavedModelDir)
    assert input_spec(loaded).shape == (None, 4)


def test_a_non_path_is_a_typed_type_error():
    with pytest.raises(InvalidArgumentTypeError, match="expected a model path") as caught:
        load_model(123)  # type: ignore[arg-type]
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, TFCompressError)


# --- the CLI: exit 2 and exactly one line --------------------------------------------------


def _escaped_h5(tmp_path: Path) -> Path:
    path = _save_payload(TF_KERAS, tmp_path / "CODE_RAN", tmp_path / "payload.h5")
    return _rewrite_h5_config(path, SPELLINGS["escaped"])


def _garbage_pb(tmp_path: Path) -> Path:
    path = tmp_path / "garbage_savedmodel"
    path.mkdir()
    (path / "saved_model.pb").write_bytes(os.urandom(256))
    return path


@pytest.mark.parametrize(
    "build",
    [_escaped_h5, _deep_h5, _metadata_list, _huge_units, _garbage_pb],
    ids=["lambda", "deep", "metadata_list", "huge_units", "garbage_pb"],
)
def test_cli_reports_one_error_line(tmp_path, capsys, build):
    path = build(tmp_path)
    capsys.readouterr()
    assert main(["inspect", str(path)]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("tfcompress inspect: error:")
    assert not (tmp_path / "CODE_RAN").exists()
