"""A streaming, stateful ONNX model shaped like Silero's VAD exports, built node by node.

Inputs ``input (N, 512)`` (a frame of audio), ``sr ()`` (the sample rate, one scalar) and
``h (2, N, 128)`` (the recurrent state: layers, batch, units); outputs ``output (N, 1)``
(speech probability) and ``hn (2, N, 128)`` (the next state). Two recurrent layers
``h' = tanh(x W + h U + b)`` over a learned front end: the MatMuls hold about 120,000
weights, so quantizing it means something, and its state's batch is its *second* dimension,
as in the files users bring. Random weights, seeded: the structure is what matters (no
download). Needs the ``onnx`` package (``pip install tfcompress[onnx]``).
"""

from __future__ import annotations

import numpy as np

#: Recurrent layers and units of the state ``h (LAYERS, N, UNITS)``.
LAYERS = 2
UNITS = 128
#: Samples per frame (Silero takes 512 at 16 kHz).
FRAME = 512
FEATURES = 64
SAMPLE_RATE = 16000.0


def vad_onnx(*, seed: int = 0) -> bytes:
    """The model as ONNX bytes (opset 17), with symbolic batch ``N``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)

    def weight(name: str, rows: int, cols: int) -> onnx.TensorProto:
        value = rng.normal(0.0, 1.0 / np.sqrt(rows), (rows, cols)).astype(np.float32)
        return numpy_helper.from_array(value, name)

    def const(name: str, value: object) -> onnx.TensorProto:
        return numpy_helper.from_array(np.asarray(value), name)

    initializers = [
        weight("w_in", FRAME, FEATURES),
        const("b_in", rng.normal(0.0, 0.1, FEATURES).astype(np.float32)),
        const("rate", np.float32(SAMPLE_RATE)),
        const("axis0", np.array([0], np.int64)),
        weight("w_out", UNITS, 1),
        const("b_out", np.zeros(1, np.float32)),
    ]
    nodes = [
        helper.make_node("Div", ["sr", "rate"], ["scale"]),
        helper.make_node("Mul", ["input", "scale"], ["scaled"]),
        helper.make_node("MatMul", ["scaled", "w_in"], ["front"]),
        helper.make_node("Add", ["front", "b_in"], ["front_b"]),
        helper.make_node("Relu", ["front_b"], ["x0"]),
    ]
    x, width, states = "x0", FEATURES, []
    for layer in range(LAYERS):
        initializers += [
            weight(f"w{layer}", width, UNITS),
            weight(f"u{layer}", UNITS, UNITS),
            const(f"b{layer}", np.zeros(UNITS, np.float32)),
            const(f"index{layer}", np.int64(layer)),
        ]
        nodes += [
            helper.make_node("Gather", ["h", f"index{layer}"], [f"h{layer}"], axis=0),
            helper.make_node("MatMul", [x, f"w{layer}"], [f"xw{layer}"]),
            helper.make_node("MatMul", [f"h{layer}", f"u{layer}"], [f"hu{layer}"]),
            helper.make_node("Add", [f"xw{layer}", f"hu{layer}"], [f"sum{layer}"]),
            helper.make_node("Add", [f"sum{layer}", f"b{layer}"], [f"pre{layer}"]),
            helper.make_node("Tanh", [f"pre{layer}"], [f"hn{layer}"]),
            helper.make_node("Unsqueeze", [f"hn{layer}", "axis0"], [f"state{layer}"]),
        ]
        x, width = f"hn{layer}", UNITS
        states.append(f"state{layer}")
    nodes += [
        helper.make_node("Concat", states, ["hn"], axis=0),
        helper.make_node("MatMul", [x, "w_out"], ["logit0"]),
        helper.make_node("Add", ["logit0", "b_out"], ["logit"]),
        helper.make_node("Sigmoid", ["logit"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes,
        "stateful_vad",
        [
            helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", FRAME]),
            helper.make_tensor_value_info("sr", TensorProto.FLOAT, []),
            helper.make_tensor_value_info("h", TensorProto.FLOAT, [LAYERS, "N", UNITS]),
        ],
        [
            helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 1]),
            helper.make_tensor_value_info("hn", TensorProto.FLOAT, [LAYERS, "N", UNITS]),
        ],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def vad_data(samples: int, *, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs in the model's own layout: audio frames at several loudness levels, a state."""
    rng = np.random.default_rng(seed)
    loud = rng.uniform(0.05, 1.0, (samples, 1)).astype(np.float32)
    return {
        "input": (rng.normal(size=(samples, FRAME)) * loud).astype(np.float32),
        "sr": np.array(SAMPLE_RATE, np.float32),
        "h": rng.normal(0.0, 0.3, (LAYERS, samples, UNITS)).astype(np.float32),
    }
