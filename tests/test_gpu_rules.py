"""The static GPU table against one small Keras model per rule (LiteRT's ML Drift rules).

Each model is converted once (a module fixture) by TensorFlow Lite's converter at a static batch
of 1 unless the rule is about the dynamic batch; the op versions the delegate caps are crafted
into a converted file where the converter does not write them.
"""

from __future__ import annotations

import numpy as np
import pytest

from tfcompress.runtime.gpu_rules import LITERT_COMMIT, MAX_VERSION
from tfcompress.runtime.gpu_support import gpu_support


def _models():
    import keras
    import tensorflow as tf

    layers = keras.layers

    def model(shape, body, *, dtype="float32", batch=1):
        x = layers.Input(shape, batch_size=batch, dtype=dtype)
        return keras.Model(x, body(x))

    def fn(f):
        return layers.Lambda(f)

    return {
        "layer_norm": model((16, 32), layers.LayerNormalization()),
        "wide_layer_norm": model((4, 512), layers.LayerNormalization()),
        "depthwise_x2": model((8, 8, 3), layers.DepthwiseConv2D(3, depth_multiplier=2)),
        "reflect": model(
            (8, 8, 3), fn(lambda v: tf.pad(v, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="REFLECT"))
        ),
        "symmetric": model(
            (8, 8, 3), fn(lambda v: tf.pad(v, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="SYMMETRIC"))
        ),
        "where_bool": model((8,), fn(lambda v: tf.where(v > 0, v, v * 2.0))),
        "where_int32": model((8,), fn(lambda v: tf.where(v > 3, v, v + 1)), dtype="int32"),
        "slices": model(
            (10,),
            fn(
                lambda v: (
                    tf.reshape(tf.slice(tf.reshape(v, [-1]), [2], [5]), [1, 5])
                    + tf.slice(v, [0, 1], [1, 5])
                )
            ),
        ),
        "round_reverse_unpack": model(
            (3, 8), fn(lambda v: tf.unstack(tf.reverse(tf.round(v), [2]), axis=1)[0])
        ),
        "argmax_int64": model((10,), fn(lambda v: tf.argmax(v, axis=-1))),
        "argmax_int32": model((10,), fn(lambda v: tf.argmax(v, axis=-1, output_type=tf.int32))),
        "dynamic_flatten": model(
            (4, 4, 3), lambda x: layers.Dense(2)(layers.Flatten()(x)), batch=None
        ),
        "embedding_2d": model(
            (6,), lambda x: layers.Dense(2)(layers.Embedding(50, 8)(x)), dtype="int32"
        ),
        "conv3d": model((4, 8, 8, 2), lambda x: layers.Dense(2)(layers.Conv3D(4, 3)(x))),
        "dense": model((8,), layers.Dense(4)),
        "transpose_conv": model((8, 8, 3), layers.Conv2DTranspose(4, 3, strides=2)),
    }


@pytest.fixture(scope="module")
def files():
    import tensorflow as tf

    converted = {}
    for name, keras_model in _models().items():
        converter = tf.lite.TFLiteConverter.from_keras_model(keras_model)
        if name == "wide_layer_norm":  # float16 weights: the recipe the fp16 risk is about
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
            converter.target_spec.supported_types = [tf.float16]
        converted[name] = converter.convert()
        converted[f"{name}:layers"] = [layer.name for layer in keras_model.layers[1:]]
    return converted


def _ops(content: bytes) -> dict[str, int]:
    from tfcompress.models.tflite_file import read_tflite

    return {op.opcode: op.version for op in read_tflite(content).subgraphs[0].operators}


def _with_version(content: bytes, opcode: str, version: int) -> bytes:
    """The same file with ``opcode`` written at ``version`` (what other tools write)."""
    from tfcompress._compat.litert import flatbuffer_utils

    utils = flatbuffer_utils()
    model = utils.read_model_from_bytearray(bytearray(content))
    code = getattr(utils.schema_fb.BuiltinOperator, opcode)
    for operator_code in model.operatorCodes:
        if max(operator_code.builtinCode, operator_code.deprecatedBuiltinCode) == code:
            operator_code.version = version
    return bytes(utils.convert_object_to_bytearray(model))


def _weight_only_int8(content: bytes, version: int) -> bytes:
    """A FULLY_CONNECTED file rewritten as weight-only int8: per-channel weights, DEQUANTIZE.

    What LiteRT Quantizer's weight-only recipes write (DEQUANTIZE v5 for per-channel int8).
    """
    from tfcompress._compat.litert import flatbuffer_utils

    utils = flatbuffer_utils()
    schema = utils.schema_fb
    model = utils.read_model_from_bytearray(bytearray(content))
    graph = model.subgraphs[0]
    fc = next(op for op in graph.operators if model.operatorCodes[op.opcodeIndex].builtinCode == 9)
    weights = graph.tensors[fc.inputs[1]]
    values = np.frombuffer(bytes(model.buffers[weights.buffer].data), np.float32)
    values = values.reshape(weights.shape)
    scales = np.maximum(np.abs(values).max(axis=1), 1e-6) / 127
    quantized = np.round(values / scales[:, None]).astype(np.int8)
    buffer = schema.BufferT()
    buffer.data = np.frombuffer(quantized.tobytes(), np.uint8)
    model.buffers.append(buffer)
    stored = schema.TensorT()
    stored.shape, stored.type, stored.name = list(weights.shape), schema.TensorType.INT8, b"w_int8"
    stored.buffer = len(model.buffers) - 1
    stored.quantization = schema.QuantizationParametersT()
    stored.quantization.scale = [float(s) for s in scales]
    stored.quantization.zeroPoint = [0] * len(scales)
    stored.quantization.quantizedDimension = 0
    graph.tensors.append(stored)
    empty = schema.BufferT()
    model.buffers.append(empty)
    weights.buffer = len(model.buffers) - 1  # now computed by the DEQUANTIZE
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.DEQUANTIZE
    code.version = version
    model.operatorCodes.append(code)
    dequantize = schema.OperatorT()
    dequantize.opcodeIndex = len(model.operatorCodes) - 1
    dequantize.inputs, dequantize.outputs = [len(graph.tensors) - 1], [fc.inputs[1]]
    graph.operators.insert(0, dequantize)
    return bytes(utils.convert_object_to_bytearray(model))


def test_the_table_records_the_litert_commit_and_the_version_caps():
    assert len(LITERT_COMMIT) == 40
    assert MAX_VERSION["DEQUANTIZE"] == 3 and MAX_VERSION["TRANSPOSE_CONV"] == 3
    assert MAX_VERSION["MUL"] == 8 and MAX_VERSION["ARG_MAX"] is None
    assert "SHAPE" not in MAX_VERSION and "CONV_3D" not in MAX_VERSION


def test_layer_normalization_runs_whole_with_both_inputs_of_a_mul_broadcasting(files):
    from tfcompress.models.tflite_file import read_tflite

    graph = read_tflite(files["layer_norm"]).subgraphs[0]
    muls = [
        [graph.tensors[i].shape for i in op.inputs] for op in graph.operators if op.opcode == "MUL"
    ]
    assert [(1, 16, 1), (1, 1, 32)] in muls  # the case the old table refused
    support = gpu_support(files["layer_norm"])
    assert support.verdict == "whole" and support.fix() is None
    assert support.fp16_risks == ()  # rows of 32: no float16 overflow risk


def test_a_float16_layer_norm_over_long_rows_is_flagged_for_float16_overflow(files):
    support = gpu_support(files["wide_layer_norm"])
    assert support.verdict == "whole" and support.precision == "float16"
    [risk] = support.fp16_risks
    assert (risk.op, risk.elements) == ("MEAN", 512)
    assert [risk.layer] == files["wide_layer_norm:layers"]  # the Keras layer's own name
    assert risk.file_float16 and risk.bound == pytest.approx((65504 / 512) ** 0.5)
    assert "keep this layer float32" in str(risk)


def test_depthwise_with_a_depth_multiplier_runs_whole(files):
    assert gpu_support(files["depthwise_x2"]).verdict == "whole"


def test_mirror_pad_reflect_runs_and_symmetric_falls_back(files):
    assert gpu_support(files["reflect"]).verdict == "whole"
    symmetric = gpu_support(files["symmetric"])
    assert symmetric.verdict == "falls back"
    [op] = symmetric.cpu_ops
    assert op.op == "MIRROR_PAD" and "SYMMETRIC" in op.reason and "REFLECT" in op.fix


@pytest.mark.parametrize(
    "name", ["where_bool", "where_int32", "slices", "round_reverse_unpack", "argmax_int32"]
)
def test_ops_and_tensor_types_the_accelerator_takes_run_whole(files, name):
    ops = _ops(files[name])
    expected = {
        "where_bool": {"GREATER", "SELECT"},
        "where_int32": {"GREATER", "SELECT", "ADD"},
        "slices": {"SLICE"},
        "round_reverse_unpack": {"ROUND", "REVERSE_V2", "UNPACK"},
        "argmax_int32": {"ARG_MAX"},
    }[name]
    assert expected <= set(ops), ops
    support = gpu_support(files[name])
    assert support.verdict == "whole", [str(op) for op in support.cpu_ops]


def test_an_int64_argmax_falls_back_with_the_int32_fix(files):
    [op] = gpu_support(files["argmax_int64"]).cpu_ops
    assert op.op == "ARG_MAX" and "int64" in op.reason
    assert "output_type=tf.int32" in op.fix and [op.layer] == files["argmax_int64:layers"]


def test_op_versions_above_the_delegates_caps_fall_back(files):
    assert _ops(files["transpose_conv"])["TRANSPOSE_CONV"] <= 3
    assert gpu_support(files["transpose_conv"]).verdict == "whole"
    [op] = gpu_support(_with_version(files["transpose_conv"], "TRANSPOSE_CONV", 4)).cpu_ops
    assert (op.op, op.version) == ("TRANSPOSE_CONV", 4) and "up to 3" in op.reason
    assert gpu_support(_weight_only_int8(files["dense"], 3)).verdict == "whole"
    for version in (5, 6):  # per-channel int8, int4: LiteRT Quantizer's weight-only recipes
        [op] = gpu_support(_weight_only_int8(files["dense"], version)).cpu_ops
        assert op.version == version and "up to 3" in op.reason
        assert "--target gpu" in op.fix and "keep this layer float" in op.fix


def test_a_dynamic_shape_reshape_refuses_the_whole_graph(files):
    support = gpu_support(files["dynamic_flatten"])
    assert support.verdict == "refused" and support.graph_refused and not support.compatible
    [tensor] = support.dynamic_tensors
    assert tensor.op == "RESHAPE" and tensor.from_dynamic_batch
    assert tensor.layer == files["dynamic_flatten:layers"][0]  # the Flatten
    assert "whole graph is refused" in support.cause() and "static-sized" in support.cause()
    assert "--static-batch 1" in support.fix() and "dynamic batch on" in support.cause()
    assert support.to_dict()["verdict"] == "refused"


def test_fixes_name_the_keras_layer_at_fault_not_the_ops_after_it(files):
    embedding = gpu_support(files["embedding_2d"])
    assert [op.op for op in embedding.causes] == ["GATHER"]  # LESS, ADD, SELECT_V2 run
    layer = files["embedding_2d:layers"][0]
    assert embedding.causes[0].layer == layer
    assert embedding.fix().startswith(f"layer {layer} (GATHER): look up 1-D ids")
    conv3d = gpu_support(files["conv3d"])
    [cause] = conv3d.causes
    assert cause.op == "CONV_3D" and cause.layer == files["conv3d:layers"][0]
    followers = [op for op in conv3d.cpu_ops if op.follows is not None]
    assert followers and all(op.follows == cause.index for op in followers)
    assert [what for what, _ in conv3d.layer_fixes()] == [f"layer {cause.layer} (CONV_3D)"]
