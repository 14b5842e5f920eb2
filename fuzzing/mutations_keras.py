"""Mutations of Keras files and SavedModels: code payloads and hostile configs."""

from __future__ import annotations

import json
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from fuzzing.mutations import Mutant, strategy
from fuzzing.seeds import Seeds

# --- Keras files: code payloads and hostile configs ----------------------------------------


def _rewrite_h5_config(source: Path, out: Path, rewrite: Callable[[str], str]) -> Path:
    import h5py

    shutil.copyfile(source, out)
    with h5py.File(out, "r+") as handle:
        config = handle.attrs["model_config"]
        text = config.decode() if isinstance(config, bytes) else str(config)
        handle.attrs["model_config"] = rewrite(text).encode()
    return out


_LAMBDA_SPELLINGS: dict[str, Callable[[str], str]] = {
    "plain": lambda text: text,
    "escaped": lambda text: text.replace('"Lambda"', '"Lamb\\u0064a"'),
    "newline": lambda text: text.replace('"class_name": "Lambda"', '"class_name":\n"Lambda"'),
    "tab": lambda text: text.replace('"class_name": "Lambda"', '"class_name":\t"Lambda"'),
}


@strategy("payload.h5_lambda")
def _h5_lambda(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    spelling = list(_LAMBDA_SPELLINGS)[int(rng.integers(0, len(_LAMBDA_SPELLINGS)))]
    out = _rewrite_h5_config(seeds.lambda_h5, folder / "payload.h5", _LAMBDA_SPELLINGS[spelling])
    return Mutant(out, "model", must_fail=True)


@strategy("payload.saved_model_lambda")
def _saved_model_lambda(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    out = folder / "payload_savedmodel"
    shutil.copytree(seeds.lambda_saved_model, out)
    metadata = out / "keras_metadata.pb"
    spelling = ["escaped", "plain"][int(rng.integers(0, 2))]
    metadata.write_bytes(_escape_in_protobuf(metadata.read_bytes(), spelling))
    return Mutant(out, "model", must_fail=True)


def _escape_in_protobuf(content: bytes, spelling: str) -> bytes:
    from tfcompress._compat.keras import saved_metadata_message

    message = saved_metadata_message()
    message.ParseFromString(content)
    for node in message.nodes:
        node.metadata = _LAMBDA_SPELLINGS[spelling](node.metadata)
    return message.SerializeToString()


@strategy("payload.keras3_lambda")
def _keras3_lambda(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    out = folder / "payload.keras"
    shutil.copyfile(seeds.lambda_keras, out)
    return Mutant(out, "model", must_fail=True)


@strategy("h5.config_garbage")
def _h5_garbage(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    junk = ['{"class_name": 5}', "[]", "{", '{"config": {"layers": "x"}}', "null", '"Lambda"']
    choice = junk[int(rng.integers(0, len(junk)))]
    return Mutant(_rewrite_h5_config(seeds.h5, folder / "g.h5", lambda _: choice), "model", True)


@strategy("h5.deep_nesting")
def _h5_deep(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    depth = int(rng.integers(5_000, 200_000))
    nested = '{"config": ' * depth + "1" + "}" * depth
    return Mutant(_rewrite_h5_config(seeds.h5, folder / "d.h5", lambda _: nested), "model", True)


@strategy("h5.huge_units")
def _h5_huge_units(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    def rewrite(text: str) -> str:
        config = json.loads(text)
        for layer in config["config"]["layers"]:
            if layer["class_name"] == "Dense":
                layer["config"]["units"] = int(10 ** int(rng.integers(10, 16)))
        return json.dumps(config)

    return Mutant(_rewrite_h5_config(seeds.h5, folder / "u.h5", rewrite), "model", True)


def _rewrite_keras_member(seeds: Seeds, folder: Path, member: str, content: bytes | None) -> Path:
    out = folder / "edited.keras"
    with zipfile.ZipFile(seeds.keras) as source, zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            if item.filename == member:
                if content is not None:
                    target.writestr(item, content)
                continue
            target.writestr(item, source.read(item.filename))
    return out


@strategy("keras.metadata_list")
def _keras_metadata(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    return Mutant(_rewrite_keras_member(seeds, folder, "metadata.json", b"[1, 2]"), "model", True)


@strategy("keras.config_garbage")
def _keras_config(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    junk = [b"{", b"[]", b'{"class_name": "Sequential", "config": 7}', b"\xff\xfe", None]
    choice = junk[int(rng.integers(0, len(junk)))]
    return Mutant(_rewrite_keras_member(seeds, folder, "config.json", choice), "model", True)


@strategy("keras.deep_nesting")
def _keras_deep(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    depth = int(rng.integers(5_000, 200_000))
    nested = ("[" * depth + "]" * depth).encode()
    return Mutant(_rewrite_keras_member(seeds, folder, "config.json", nested), "model", True)


# --- SavedModel directories --------------------------------------------------------------


@strategy("saved_model.pb")
def _saved_model_pb(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    out = folder / "savedmodel"
    shutil.copytree(seeds.saved_model, out)
    pb = out / "saved_model.pb"
    content = pb.read_bytes()
    choices = [b"", rng.bytes(256), content[: int(rng.integers(1, len(content)))]]
    pb.write_bytes(choices[int(rng.integers(0, len(choices)))])
    return Mutant(out, "model", must_fail=True)


@strategy("saved_model.variables")
def _saved_model_variables(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    out = folder / "savedmodel"
    shutil.copytree(seeds.saved_model, out)
    files = sorted((out / "variables").iterdir())
    target = files[int(rng.integers(0, len(files)))]
    content = target.read_bytes()
    target.write_bytes(content[: int(rng.integers(0, max(1, len(content) // 2)))])
    return Mutant(out, "model", must_fail=True)
