"""Selective quantization: rank layers with TFLite's debugger, keep the worst one float.

The model is built to be sensitive to int8 in one known layer: ``sensitive`` has, in every
output channel, a weight of 1000 on an input feature that is always 0. The float model never
sees it, but int8 gives each channel one weight scale (1000/127), so every real weight of that
layer rounds to 0 and the model falls to chance. Keeping that one layer float restores it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import tfcompress
from tfcompress.errors import InvalidInputError
from tfcompress.models.tflite_file import read_tflite
from tfcompress.quantization.recipes import Recipe
from tfcompress.quantization.selective import LayerSensitivity, rank_layers
from tfcompress.quantization.selective_names import layer_of
from tfcompress.samples.sensitive import sensitive_model


@pytest.fixture(scope="module")
def case():
    import keras

    model, (calib, test) = sensitive_model(keras)
    ranking = rank_layers(model, representative_data=calib, eval_data=test)
    selective = Recipe("int8", float_nodes=(ranking[0].node,))
    return {
        "model": model,
        "calib": calib,
        "test": test,
        "ranking": ranking,
        "int8": tfcompress.quantize(model, recipe="int8", representative_data=calib),
        "selective": tfcompress.quantize(model, recipe=selective, representative_data=calib),
        "float16": tfcompress.quantize(model, recipe="float16"),
    }


def test_the_sensitive_layer_ranks_first(case) -> None:
    ranking = case["ranking"]
    assert all(isinstance(e, LayerSensitivity) for e in ranking)
    assert [e.layer for e in ranking[:2]] == ["sensitive", "wide"]
    top = ranking[0]
    assert top.op_type == "FULLY_CONNECTED"
    assert top.rmse_per_scale > 10  # rounding alone is ~0.29
    assert top.rmse_per_scale == pytest.approx(top.rmse / top.scale)
    assert all(e.rmse_per_scale < 1 for e in ranking[1:])
    assert top.to_dict()["node"] == top.node and "sensitive" in str(top)


def test_int8_fails_the_gate_and_keeping_one_layer_float_passes(case) -> None:
    model, test = case["model"], case["test"]
    assert not tfcompress.check_gate(model, case["int8"].model, test, max_drop=0.01).passed
    assert tfcompress.check_gate(model, case["selective"].model, test, max_drop=0.01).passed
    scores = tfcompress.evaluate({"float": model, "int8": case["int8"].model}, test)
    assert scores.drop("int8") > 0.3  # plain int8 is near chance


def test_selective_artifact_is_between_int8_and_float16(case) -> None:
    selective = case["selective"]
    assert case["int8"].size_bytes < selective.size_bytes < case["float16"].size_bytes
    assert selective.float_nodes == (case["ranking"][0].node,)
    assert selective.float_ops == ("FULLY_CONNECTED",)
    assert selective.to_dict()["float_nodes"] == [case["ranking"][0].node]
    assert list(selective.to_dict()["recipe"]["float_nodes"]) == [case["ranking"][0].node]
    assert "kept float on purpose" in str(selective)


def test_replaying_the_recipe_gives_the_same_bytes(case) -> None:
    recipe = Recipe.from_json(case["selective"].recipe.to_json())
    assert recipe == case["selective"].recipe
    again = tfcompress.quantize(case["model"], recipe=recipe, representative_data=case["calib"])
    assert again.model_content == case["selective"].model_content


def test_io_type_and_per_channel_are_honoured(case) -> None:
    node = case["ranking"][0].node

    def weight_scales(content: bytes) -> set[int]:
        graph = read_tflite(content).subgraphs[0]
        return {len(t.quantization.scales) for t in graph.tensors if t.dtype == "int8"}

    result = tfcompress.quantize(
        case["model"],
        recipe="int8",
        representative_data=case["calib"],
        float_nodes=[node],
        input_type="int8",
        per_channel=False,
    )
    graph = read_tflite(result.model_content).subgraphs[0]
    assert {graph.tensors[i].dtype for i in (*graph.inputs, *graph.outputs)} == {"int8"}
    assert result.float_ops == ("FULLY_CONNECTED",)
    assert weight_scales(result.model_content) == {1}  # per-tensor everywhere
    assert max(weight_scales(case["selective"].model_content)) > 1  # per-channel by default


def test_ranking_again_skips_the_nodes_kept_float(case) -> None:
    recipe = Recipe("int8", float_nodes=(case["ranking"][0].node,))
    again = rank_layers(case["model"], representative_data=case["calib"], recipe=recipe)
    assert case["ranking"][0].node not in {e.node for e in again}
    assert len(again) == len(case["ranking"]) - 1


def test_unknown_node_names_the_nearest_real_ones(case) -> None:
    with pytest.raises(InvalidInputError, match=r"nearest: .*sensitive") as error:
        tfcompress.quantize(
            case["model"],
            recipe="int8",
            representative_data=case["calib"],
            float_nodes=["functional/sensitive/MatMul"],
        )
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    "make",
    [
        lambda m: Recipe("dynamic", float_nodes=("a",)),
        lambda m: Recipe("float16", float_nodes=("a",)),
        lambda m: Recipe("int16x8", float_nodes=("a",)),
        lambda m: Recipe("int8", float_nodes="a"),
        lambda m: Recipe("int8", float_nodes=("a", "a")),
        lambda m: Recipe.from_dict({"name": "dynamic", "float_nodes": ["a"]}),
        lambda m: tfcompress.quantize(m, recipe="float16", float_nodes=["a"]),
        lambda m: tfcompress.quantize(m, format="onnx", float_nodes=["a"]),
    ],
)
def test_float_nodes_is_refused_where_it_cannot_apply(case, make) -> None:
    with pytest.raises(InvalidInputError, match="float_nodes"):
        make(case["model"])


def test_rank_layers_refuses_other_recipes(case) -> None:
    with pytest.raises(InvalidInputError, match="int8"):
        rank_layers(case["model"], representative_data=case["calib"], recipe="dynamic")


def test_tf_keras_and_saved_model(case, tmp_path) -> None:
    import tf_keras

    model, (calib, test) = sensitive_model(tf_keras)
    ranking = rank_layers(model, representative_data=calib)
    assert ranking[0].layer == "sensitive"
    result = tfcompress.quantize(
        model, recipe="int8", representative_data=calib, float_nodes=[ranking[0].node]
    )
    assert tfcompress.check_gate(model, result.model, test, max_drop=0.01).passed

    saved = tmp_path / "saved"
    case["model"].export(saved, format="tf_saved_model", verbose=False)
    ranking = rank_layers(saved, representative_data=calib)
    assert ranking[0].op_type == "FULLY_CONNECTED" and ranking[0].rmse_per_scale > 10
    result = tfcompress.quantize(
        saved, recipe="int8", representative_data=calib, float_nodes=[ranking[0].node]
    )
    assert result.float_ops == ("FULLY_CONNECTED",)
    assert tfcompress.check_gate(case["model"], result.model, test, max_drop=0.01).passed


def test_layer_names_are_read_through_the_trace_suffixes() -> None:
    names = {"conv2d", "conv2d_1", "dense", "dense_1"}
    assert (
        layer_of("small_cnn_1/conv2d_1/Relu;small_cnn_1/conv2d_1/BiasAdd", names, "small_cnn")
        == "conv2d"
    )
    assert layer_of("small_cnn_1/dense_1_2/MatMul", names, "small_cnn") == "dense_1"
    assert layer_of("small_cnn/dense_1/MatMul", names, "small_cnn") == "dense_1"
    assert layer_of("StatefulPartitionedCall_1:0", names, "small_cnn") is None
    assert layer_of("small_cnn/dense/MatMul", set(), "") is None


def test_two_inputs_are_fed_by_name() -> None:
    import keras

    rng = np.random.default_rng(1)
    a, b = keras.Input((4,), name="a"), keras.Input((3,), name="b")
    h = keras.layers.Dense(8, activation="relu", name="mix")(keras.layers.Concatenate()([a, b]))
    model = keras.Model([a, b], keras.layers.Dense(2, name="out")(h))
    data = {"b": rng.normal(size=(64, 3)).astype("float32"), "a": rng.normal(size=(64, 4))}
    data["a"] = data["a"].astype("float32")
    ranking = rank_layers(model, representative_data=data)
    mix = next(e for e in ranking if e.layer == "mix")
    assert all(e.rmse_per_scale < 1 for e in ranking)  # a plain model: rounding only
    result = tfcompress.quantize(
        model, recipe="int8", representative_data=data, float_nodes=[mix.node]
    )
    assert result.float_ops == ("FULLY_CONNECTED",)


def test_cli_float_node(case, tmp_path, capsys) -> None:
    from tfcompress.cli import main

    model_path, calib_path = tmp_path / "sensitive.keras", tmp_path / "calib.npz"
    case["model"].save(model_path)
    np.savez(calib_path, x=case["calib"])
    node = case["ranking"][0].node
    argv = ["quantize", str(model_path), "--data", str(calib_path), "--json"]
    out = tmp_path / "selective.tflite"
    code = main([*argv, "--float-nodes", node, "--out", str(out)])
    assert code == 0 and out.is_file()
    assert json.loads(capsys.readouterr().out)["float_nodes"] == [node]
    bad = main([*argv, "--float-nodes", "no/such/node", "--out", str(tmp_path / "bad.tflite")])
    assert bad == 2 and not (tmp_path / "bad.tflite").exists()
