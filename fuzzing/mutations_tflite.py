"""Mutations of a `.tflite`: structural edits through LiteRT's schema object API."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from fuzzing.mutations import STRATEGIES, Mutant, Strategy
from fuzzing.seeds import Seeds

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
