"""Mutations of an ONNX model: bytes, external data that leaves the folder, unfeedable graphs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from fuzzing.mutations import STRATEGIES, Mutant, _register_bytes
from fuzzing.seeds import SAMPLE_SHAPE, Seeds, onnx_model


def _save(model: Any, folder: Path, name: str = "model.onnx") -> Path:
    out = folder / name
    out.write_bytes(model.SerializeToString())
    return out


def _with_external(location: str) -> Any:
    """The seed plus ``y + w``, with ``w`` (one float) kept in the file at ``location``."""
    from onnx import TensorProto, helper, numpy_helper

    model = onnx_model()
    weights = numpy_helper.from_array(np.ones(SAMPLE_SHAPE[-1], np.float32), "w")
    weights.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "4")):
        entry = weights.external_data.add()
        entry.key, entry.value = key, value
    weights.ClearField("raw_data")
    graph = model.graph
    graph.initializer.append(weights)
    graph.node[0].output[0] = "relu"
    graph.node.append(helper.make_node("Add", ["relu", "w"], ["y"]))
    return model


def _external(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    """External data placed where tfcompress must refuse to read it (or, once, fine).

    The model sits in ``folder/model``; ``folder/outside.bin`` is outside its folder.
    """
    outside = folder / "outside.bin"
    outside.write_bytes(np.ones(1, np.float32).tobytes())
    folder = folder / "model"
    folder.mkdir()
    choice = int(rng.integers(0, 6))
    if choice == 0:
        location = f"../{outside.name}"
    elif choice == 1:
        location = str(outside)
    elif choice == 2:
        (folder / "link.bin").symlink_to(outside)
        location = "link.bin"
    elif choice == 3:
        (folder / "zero.bin").symlink_to("/dev/zero")
        location = "zero.bin"
    elif choice == 4:
        os.mkfifo(folder / "fifo.bin")
        location = "fifo.bin"
    else:
        (folder / "w.bin").write_bytes(np.ones(1, np.float32).tobytes())
        return Mutant(_save(_with_external("w.bin"), folder), "onnx", must_fail=False)
    return Mutant(_save(_with_external(location), folder), "onnx", must_fail=True)


def _huge_input(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    from onnx import TensorProto, helper

    side = int(10 ** int(rng.integers(7, 13)))
    shape = [1, side, side, 1]
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "huge",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return Mutant(_save(model, folder), "onnx", must_fail=True)


def _no_outputs(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    return Mutant(_save(onnx_model(outputs=False), folder), "onnx", must_fail=True)


def _opset_extreme(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    opset = [1, 6, 99, 10_000, 2**40][int(rng.integers(0, 5))]
    return Mutant(_save(onnx_model(opset=opset), folder), "onnx", must_fail=False)


def _resize_bomb(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    """A Resize to ~10^12 elements: loads, fails to run on any input (an error, not a bug)."""
    from onnx import TensorProto, helper, numpy_helper

    scale = float(10 ** int(rng.integers(5, 8)))
    scales = numpy_helper.from_array(np.array([1, scale, scale, 1], np.float32), "scales")
    graph = helper.make_graph(
        [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest")],
        "bomb",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *SAMPLE_SHAPE])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [scales],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return Mutant(_save(model, folder), "onnx", must_fail=False)


def _sequence_input(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Mutant:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("SequenceLength", ["x"], ["y"])],
        "sequence",
        [helper.make_tensor_sequence_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return Mutant(_save(model, folder), "onnx", must_fail=True)


def register() -> None:
    """Register the ONNX strategies (only where onnx and onnxruntime are installed)."""
    import importlib.util

    if not all(importlib.util.find_spec(m) for m in ("onnx", "onnxruntime")):
        return
    _register_bytes("onnx", "onnx", lambda s: s.onnx)
    STRATEGIES.update(
        {
            "onnx.external_data": _external,
            "onnx.huge_input": _huge_input,
            "onnx.no_outputs": _no_outputs,
            "onnx.opset_extreme": _opset_extreme,
            "onnx.resize_bomb": _resize_bomb,
            "onnx.sequence_input": _sequence_input,
        }
    )


register()
