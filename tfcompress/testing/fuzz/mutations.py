"""Named mutation strategies: each turns a seed into a broken, hostile or odd input file.

A strategy is ``fn(rng, seeds, folder) -> Mutant``. It says which kind of input it made
(model or data), and whether every sane tool must refuse it (``must_fail``) or whether it
may legitimately still work (a bit flipped inside a weight is still a valid model).
Strategies register themselves with :func:`strategy`, next to their definition.
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tfcompress.testing.fuzz.seeds import Seeds


@dataclass(frozen=True)
class Mutant:
    """One generated input.

    Attributes:
        path: The file or folder made.
        role: ``"model"``, ``"tflite"`` (a model that is a ``.tflite``), ``"data"`` or
            ``"labels"`` (a data file whose labels are broken: only label readers care).
        must_fail: True when any correct tool must reject it (exit 2).
    """

    path: Path
    role: str
    must_fail: bool


Strategy = Callable[[np.random.Generator, Seeds, Path], Mutant]
STRATEGIES: dict[str, Strategy] = {}


def strategy(name: str) -> Callable[[Strategy], Strategy]:
    """Register a mutation strategy under ``name`` (``family.what``)."""

    def register(fn: Strategy) -> Strategy:
        STRATEGIES[name] = fn
        return fn

    return register


# --- bytes, any format -------------------------------------------------------------------


def _bytes_mutant(rng: np.random.Generator, seed: Path, how: str) -> bytes:
    data = bytearray(seed.read_bytes())
    if how == "truncate":
        return bytes(data[: int(rng.integers(0, len(data)))])
    if how == "bitflip":
        for _ in range(int(rng.integers(1, 9))):
            position = int(rng.integers(0, len(data)))
            data[position] ^= 1 << int(rng.integers(0, 8))
        return bytes(data)
    start = int(rng.integers(0, len(data)))
    span = int(rng.integers(4, 65))
    data[start : start + span] = rng.integers(0, 256, span, dtype=np.uint8).tobytes()
    return bytes(data)


def _register_bytes(family: str, role: str, seed_of: Callable[[Seeds], Path]) -> None:
    for how in ("truncate", "bitflip", "splat"):

        def make(rng: np.random.Generator, seeds: Seeds, folder: Path, how: str = how) -> Mutant:
            seed = seed_of(seeds)
            out = folder / f"mutant{seed.suffix}"
            out.write_bytes(_bytes_mutant(rng, seed, how))
            return Mutant(out, role, must_fail=how == "truncate" and role != "data")

        STRATEGIES[f"{family}.{how}"] = make


_register_bytes("tflite", "tflite", lambda s: s.tflite_int8)
_register_bytes("keras", "model", lambda s: s.keras)
_register_bytes("h5", "model", lambda s: s.h5)
_register_bytes("npz", "data", lambda s: s.data_npz)


@strategy("tflite.random_body")
def _tflite_random_body(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    body = rng.integers(0, 256, int(rng.integers(8, 4096)), dtype=np.uint8).tobytes()
    out = folder / "random.tflite"
    out.write_bytes(body[:4] + b"TFL3" + body[8:])
    return Mutant(out, "tflite", must_fail=True)


# --- .tflite structure, through LiteRT's schema object API ---------------------------------


def _edit_tflite(seeds: Seeds, folder: Path, edit: Callable[[object], None]) -> Path:
    from tfcompress._compat.litert import flatbuffer_utils

    utils = flatbuffer_utils()
    model = utils.read_model_from_bytearray(bytearray(seeds.tflite_int8.read_bytes()))
    edit(model)
    out = folder / "edited.tflite"
    out.write_bytes(bytes(utils.convert_object_to_bytearray(model)))
    return out


def _quantized_tensors(model: object) -> list[object]:
    tensors = model.subgraphs[0].tensors  # type: ignore[attr-defined]
    return [t for t in tensors if t.quantization is not None and t.quantization.scale is not None]


def _tflite_structural(name: str, must_fail: bool = True) -> Callable[[Callable], Strategy]:
    def register(edit_of: Callable[[np.random.Generator], Callable[[object], None]]) -> Strategy:
        def make(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
            return Mutant(_edit_tflite(seeds, folder, edit_of(rng)), "tflite", must_fail)

        STRATEGIES[f"tflite.{name}"] = make
        return make

    return register


def _set_scale(value: float) -> Callable[[np.random.Generator], Callable[[object], None]]:
    def edit_of(rng: np.random.Generator) -> Callable[[object], None]:
        def edit(model: object) -> None:
            tensors = _quantized_tensors(model)
            target = tensors[int(rng.integers(0, len(tensors)))]
            target.quantization.scale = np.full_like(target.quantization.scale, value)

        return edit

    return edit_of


for _name, _value in (("nan_scale", np.nan), ("inf_scale", np.inf), ("zero_scale", 0.0)):
    _tflite_structural(_name)(_set_scale(_value))
_tflite_structural("negative_scale")(_set_scale(-0.5))


@_tflite_structural("zero_point_range")
def _zero_point(rng: np.random.Generator) -> Callable[[object], None]:
    def edit(model: object) -> None:
        tensors = [t for t in _quantized_tensors(model) if t.type == 9]  # INT8
        target = tensors[int(rng.integers(0, len(tensors)))]
        target.quantization.zeroPoint = np.full_like(target.quantization.zeroPoint, 1000)

    return edit


@_tflite_structural("tensor_index")
def _tensor_index(rng: np.random.Generator) -> Callable[[object], None]:
    def edit(model: object) -> None:
        graph = model.subgraphs[0]  # type: ignore[attr-defined]
        op = graph.operators[int(rng.integers(0, len(graph.operators)))]
        op.inputs[0] = len(graph.tensors) + int(rng.integers(0, 10**6))

    return edit


@_tflite_structural("buffer_index")
def _buffer_index(rng: np.random.Generator) -> Callable[[object], None]:
    def edit(model: object) -> None:
        tensors = model.subgraphs[0].tensors  # type: ignore[attr-defined]
        tensors[int(rng.integers(0, len(tensors)))].buffer = 10**6

    return edit


@_tflite_structural("opcode_index")
def _opcode_index(rng: np.random.Generator) -> Callable[[object], None]:
    def edit(model: object) -> None:
        operators = model.subgraphs[0].operators  # type: ignore[attr-defined]
        operators[int(rng.integers(0, len(operators)))].opcodeIndex = 200

    return edit


@_tflite_structural("negative_shape")
def _negative_shape(rng: np.random.Generator) -> Callable[[object], None]:
    def edit(model: object) -> None:
        tensors = model.subgraphs[0].tensors  # type: ignore[attr-defined]
        shaped = [t for t in tensors if t.shape is not None and len(t.shape)]
        target = shaped[int(rng.integers(0, len(shaped)))]
        target.shape[int(rng.integers(0, len(target.shape)))] = -7

    return edit


@_tflite_structural("non_utf8_name", must_fail=False)
def _non_utf8_name(rng: np.random.Generator) -> Callable[[object], None]:
    def edit(model: object) -> None:
        tensors = model.subgraphs[0].tensors  # type: ignore[attr-defined]
        tensors[int(rng.integers(0, len(tensors)))].name = b"\xff\xfe\xc3(bad"

    return edit


@_tflite_structural("huge_shape", must_fail=False)
def _huge_shape(rng: np.random.Generator) -> Callable[[object], None]:
    def edit(model: object) -> None:
        graph = model.subgraphs[0]  # type: ignore[attr-defined]
        graph.tensors[graph.inputs[0]].shape = np.array([1, 2**30, 2**30, 1], np.int32)

    return edit


@_tflite_structural("rank0_input", must_fail=False)
def _rank0_input(rng: np.random.Generator) -> Callable[[object], None]:
    def edit(model: object) -> None:
        graph = model.subgraphs[0]  # type: ignore[attr-defined]
        tensor = graph.tensors[graph.inputs[0]]
        tensor.shape = np.array([], np.int32)
        tensor.shapeSignature = None

    return edit


@_tflite_structural("op_version", must_fail=False)
def _op_version(rng: np.random.Generator) -> Callable[[object], None]:
    def edit(model: object) -> None:
        codes = model.operatorCodes  # type: ignore[attr-defined]
        codes[int(rng.integers(0, len(codes)))].version = 99

    return edit


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


# --- data files ---------------------------------------------------------------------------


def _npz(folder: Path, **arrays: np.ndarray) -> Path:
    out = folder / "data.npz"
    np.savez(out, **arrays)
    return out


def _data_strategy(name: str, role: str = "data") -> Callable[[Callable], Strategy]:
    def register(build: Callable[[np.random.Generator, Path], Path]) -> Strategy:
        def make(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
            return Mutant(build(rng, folder), role, must_fail=True)

        STRATEGIES[f"data.{name}"] = make
        return make

    return register


def _x(rng: np.random.Generator, count: int = 6) -> np.ndarray:
    return rng.random((count, 8, 8, 1), dtype=np.float32)


_data_strategy("nan")(lambda rng, f: _npz(f, x=np.where(_x(rng) > 0.9, np.nan, _x(rng))))
_data_strategy("inf")(lambda rng, f: _npz(f, x=np.full((4, 8, 8, 1), np.inf, np.float32)))
_data_strategy("float64_overflow")(lambda rng, f: _npz(f, x=_x(rng).astype(np.float64) * 1e300))
_data_strategy("wrong_shape")(lambda rng, f: _npz(f, x=rng.random((5, 3, 7), dtype=np.float32)))
_data_strategy("complex")(lambda rng, f: _npz(f, x=_x(rng).astype(np.complex64)))
_data_strategy("strings")(lambda rng, f: _npz(f, x=np.array(["a", "b"])))
_data_strategy("empty")(lambda rng, f: _npz(f, x=np.zeros((0, 8, 8, 1), np.float32)))
_data_strategy("no_x")(lambda rng, f: _npz(f, samples=_x(rng)))
_data_strategy("zero_d")(lambda rng, f: _npz(f, x=np.float32(3.0)))
_data_strategy("labels_out_of_range", "labels")(
    lambda rng, f: _npz(f, x=_x(rng), y=np.full(6, 10**9, np.int64))
)
_data_strategy("labels_nan", "labels")(lambda rng, f: _npz(f, x=_x(rng), y=np.full(6, np.nan)))
_data_strategy("labels_length", "labels")(
    lambda rng, f: _npz(f, x=_x(rng), y=np.zeros(2, np.int64))
)


@_data_strategy("object_pickle")
def _object(rng: np.random.Generator, folder: Path) -> Path:
    out = folder / "data.npz"
    np.savez(out, x=np.array([{"a": 1}, None], dtype=object))
    return out


@_data_strategy("npy_named_npz")
def _npy_named(rng: np.random.Generator, folder: Path) -> Path:
    out = folder / "data.npz"
    with out.open("wb") as handle:
        np.save(handle, _x(rng))
    return out


@_data_strategy("npy_huge_shape")
def _npy_huge(rng: np.random.Generator, folder: Path) -> Path:
    # A valid header that declares ~250 GB over a file of a few hundred bytes.
    out = folder / "data.npy"
    header = {"descr": "<f4", "fortran_order": False, "shape": (10**12 // 64, 8, 8, 1)}
    with out.open("wb") as handle:
        np.lib.format.write_array_header_1_0(handle, header)
        handle.write(rng.bytes(256))
    return out


@_data_strategy("npz_bad_crc")
def _bad_crc(rng: np.random.Generator, folder: Path) -> Path:
    out = _npz(folder, x=_x(rng, 64))
    content = bytearray(out.read_bytes())
    start = content.find(b"x.npy") + 200  # inside the stored (uncompressed) member data
    content[start] ^= 0xFF
    out.write_bytes(bytes(content))
    return out


@_data_strategy("npz_garbage_member")
def _garbage_member(rng: np.random.Generator, folder: Path) -> Path:
    out = folder / "data.npz"
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("x.npy", rng.bytes(300))
    return out


# --- special files ------------------------------------------------------------------------


@strategy("special.fifo_model")
def _fifo_model(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    out = folder / ["m.tflite", "m.keras", "m.h5"][int(rng.integers(0, 3))]
    os.mkfifo(out)
    return Mutant(out, "model", must_fail=True)


@strategy("special.fifo_data")
def _fifo_data(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    out = folder / ["d.npz", "d.npy"][int(rng.integers(0, 2))]
    os.mkfifo(out)
    return Mutant(out, "data", must_fail=True)


@strategy("special.device_model")
def _device_model(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    out = folder / "zero.tflite"
    out.symlink_to("/dev/zero")
    return Mutant(out, "model", must_fail=True)


@strategy("special.empty_dir_model")
def _empty_dir(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    out = folder / "empty_model"
    out.mkdir()
    return Mutant(out, "model", must_fail=True)


@strategy("special.fifo_in_saved_model")
def _fifo_in_saved_model(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    out = folder / "savedmodel"
    shutil.copytree(seeds.saved_model, out)
    target = out / "variables" / "variables.index"
    target.unlink()
    os.mkfifo(target)
    return Mutant(out, "model", must_fail=True)
