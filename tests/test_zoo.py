"""The model zoo: registry, block strings, MixConv, MixNet sizes, int8 conversion, CLI.

Building at 224x224 counts parameters and MACs (cheap: :func:`tfcompress.zoo.macs.count_macs`
reads the layers); the ``slow`` tests convert one model of each kind of block to full int8 at
its minimum resolution, run it in the LiteRT interpreter, and hold the Keras MAC counter to the
harness's ``.tflite`` counter on the converted files.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from _shared import kernel_atol

from tfcompress.cli import main
from tfcompress.errors import InvalidInputError
from tfcompress.zoo import (
    BlockSpec,
    create_model,
    decode_arch,
    decode_block,
    list_models,
    model_info,
    round_filters,
    split_channels,
)
from tfcompress.zoo.mixnet import MIXNET_M_BLOCKS, MIXNET_S_BLOCKS

ALL = [
    "mixnet_l",
    "mixnet_m",
    "mixnet_s",
    "mobilenet_v1",
    "mobilenet_v2",
    "mobilenet_v3_large",
    "mobilenet_v3_large_minimalistic",
    "mobilenet_v3_small",
    "mobilenet_v3_small_minimalistic",
]
# MobileNetV3-Small holds every MobileNet kind of block: depthwise-separable (its first block
# has no expansion), inverted residuals with residual adds (V2's), squeeze-and-excitation and
# hard-swish; V1 and V2 are built of the same Keras layers (with ReLU / ReLU6), and
# MobileNetV2 is converted to int8 and run by every search of tests/test_selection.py.
# MixNet's blocks (mixed depthwise kernels, grouped 1x1
# convolutions) are converted, run and cross-checked by examples/zoo_mixnet.py's test
# (tests/test_examples.py). benchmarks/edgetpu_zoo.py converts all nine, once per run.
CONVERTED = ["mobilenet_v3_small"]
# MixNet paper (Tan & Le 2019), Table 2 / timm: parameters and MACs at 224x224x3, 1000 classes.
PAPER = {"mixnet_s": (4.1e6, 256e6), "mixnet_m": (5.0e6, 360e6), "mixnet_l": (7.3e6, 565e6)}


# --- registry -----------------------------------------------------------------------------


def test_registry_names_and_patterns():
    assert list_models() == ALL
    assert list_models("mixnet*") == ["mixnet_l", "mixnet_m", "mixnet_s"]
    assert list_models("mobilenet_v3_*_minimalistic") == [
        "mobilenet_v3_large_minimalistic",
        "mobilenet_v3_small_minimalistic",
    ]
    assert list_models("resnet*") == []


def test_unknown_name_lists_close_names():
    with pytest.raises(InvalidInputError, match="did you mean mixnet_s") as error:
        create_model("mixnet_x")
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"width_multiplier": 0}, "width_multiplier must be a number above 0"),
        ({"width_multiplier": -0.5}, "width_multiplier must be a number above 0"),
        ({"width_multiplier": float("nan")}, "width_multiplier must be a number above 0"),
        ({"num_classes": 0}, "num_classes must be an integer from 1"),
        ({"num_classes": 2.5}, "num_classes must be an integer from 1"),
        ({"input_shape": (32, 32)}, "input_shape must be"),
        ({"input_shape": (32, 32, 0)}, "input_shape must be"),
        ({"input_shape": "32x32x1"}, "input_shape must be"),
        ({"input_shape": (31, 64, 1)}, "at least 32x32"),
        ({"dropout": 0.1}, "does not take option"),
        ({"weights": 3}, "weights must be None"),
    ],
)
@pytest.mark.parametrize("name", ["mixnet_s", "mobilenet_v2"])
def test_bad_arguments_are_refused_in_one_line(name, options, message):
    with pytest.raises(InvalidInputError, match=message) as error:
        create_model(name, **options)
    assert "\n" not in str(error.value)


def test_mixnet_has_no_imagenet_weights():
    with pytest.raises(InvalidInputError, match="no ImageNet weights"):
        create_model("mixnet_m", weights="imagenet")


def test_importing_the_zoo_does_not_import_tensorflow():
    code = (
        "import sys, tfcompress.zoo as z; z.list_models(); "
        "print('tensorflow' in sys.modules, 'keras' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.split() == ["False", "False"], done.stderr[-2000:]


# --- block strings ------------------------------------------------------------------------


def test_block_string_tokens():
    spec = decode_block("r1_k3.5.7_a1.1_p1.1_s22_e6_i24_o40_se0.5_sw")
    assert spec == BlockSpec(
        repeats=1,
        kernel_sizes=(3, 5, 7),
        expand_groups=2,
        project_groups=2,
        stride=2,
        expand_ratio=6,
        input_filters=24,
        output_filters=40,
        se_ratio=0.5,
        swish=True,
        skip=True,
    )
    plain = decode_block("r3_k3_a1_p1_s11_e1_i16_o16_noskip")
    assert (plain.repeats, plain.stride, plain.se_ratio, plain.swish, plain.skip) == (
        3,
        1,
        0.0,
        False,
        False,
    )
    assert len(decode_arch(", ".join(MIXNET_S_BLOCKS))) == 11
    assert sum(s.repeats for s in decode_arch(MIXNET_M_BLOCKS)) == 19


@pytest.mark.parametrize(
    "text",
    ["r1_k3_a1_p1_s11_e1_i16", "r1_k3_a1_p1_s11_e1_i16_o16_x9", "r1_k3_k5_a1_p1_s11_e1_i1_o1"],
)
def test_bad_block_strings_are_refused(text):
    with pytest.raises(InvalidInputError, match="block string"):
        decode_block(text)


def test_channel_rounding_and_splits_follow_the_reference():
    assert [round_filters(f, 1.3) for f in (24, 32, 40, 80, 120, 200)] == [
        32,
        40,
        56,
        104,
        160,
        264,
    ]
    assert round_filters(16, 0.25) == 8  # never below the divisor
    assert round_filters(40, 1.0) == 40
    assert split_channels(10, 3) == [4, 3, 3]
    assert split_channels(144, 2) == [72, 72]
    assert split_channels(8, 5) == [4, 1, 1, 1, 1]


# --- MixConv and the grouped conv ---------------------------------------------------------


def test_mixconv_with_one_kernel_equals_depthwise_conv():
    import keras

    from tfcompress.zoo import MixConv

    x = np.random.default_rng(0).normal(size=(2, 9, 9, 6)).astype("float32")
    mix = MixConv((5,), strides=2, use_bias=True)
    depthwise = keras.layers.DepthwiseConv2D(5, strides=2, padding="same", use_bias=True)
    expected_shape = depthwise(x).shape
    mix(x)
    rng = np.random.default_rng(1)
    weights = [rng.normal(size=w.shape).astype("float32") for w in depthwise.get_weights()]
    depthwise.set_weights(weights)
    mix.set_weights(weights)
    got = np.asarray(mix(x))
    assert got.shape == expected_shape == (2, 5, 5, 6)
    expected = np.asarray(depthwise(x))  # one 5x5 window per output
    np.testing.assert_allclose(got, expected, atol=kernel_atol(expected, terms=5 * 5 + 1))


def test_mixconv_splits_channels_like_the_reference_and_round_trips():
    import keras

    from tfcompress.zoo import MixConv

    x = np.random.default_rng(0).normal(size=(1, 8, 8, 10)).astype("float32")
    mix = MixConv((3, 5, 7), name="mix")
    y = np.asarray(mix(x))
    assert [conv.kernel.shape for conv in mix.convs] == [(3, 3, 4, 1), (5, 5, 3, 1), (7, 7, 3, 1)]
    # each group is its own depthwise conv over its own channels, concatenated in order
    parts = [x[..., :4], x[..., 4:7], x[..., 7:]]
    expected = np.concatenate([np.asarray(c(p)) for c, p in zip(mix.convs, parts, strict=True)], -1)
    np.testing.assert_allclose(y, expected, atol=kernel_atol(expected, terms=7 * 7))
    config = mix.get_config()
    assert config["kernel_sizes"] == [3, 5, 7] and json.loads(json.dumps(config)) == config
    clone = keras.layers.deserialize(keras.layers.serialize(mix))
    clone(x)
    clone.set_weights(mix.get_weights())
    np.testing.assert_allclose(np.asarray(clone(x)), y, rtol=1e-6)


def test_grouped_conv_equals_one_conv_per_group():
    from tfcompress.zoo import GroupedConv2D

    x = np.random.default_rng(0).normal(size=(1, 4, 4, 7)).astype("float32")
    grouped = GroupedConv2D(5, groups=2)
    y = np.asarray(grouped(x))
    assert [c.kernel.shape for c in grouped.convs] == [(1, 1, 4, 3), (1, 1, 3, 2)]
    first, second = (np.asarray(c.kernel)[0, 0] for c in grouped.convs)
    expected = np.concatenate([x[..., :4] @ first, x[..., 4:] @ second], axis=-1)
    np.testing.assert_allclose(y, expected, atol=kernel_atol(expected, terms=4))  # numpy's matmul


def test_a_zoo_model_saves_and_loads(tmp_path):
    import keras

    model = create_model("mixnet_s", input_shape=(32, 32, 2), num_classes=3, width_multiplier=0.25)
    x = np.random.default_rng(0).uniform(size=(2, 32, 32, 2)).astype("float32")
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    assert any(type(layer).__name__ == "GroupedConv2D" for layer in loaded.layers)
    np.testing.assert_allclose(np.asarray(loaded(x)), np.asarray(model(x)), atol=1e-6)


# --- sizes --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["mixnet_s", "mixnet_m", "mixnet_l"])
def test_mixnet_parameters_and_macs_match_the_paper(name):
    from tfcompress.zoo.macs import count_macs

    model = create_model(name)  # 224x224x3, 1000 classes: building is cheap
    assert abs(model.count_params() / PAPER[name][0] - 1) < 0.05, model.count_params()
    # The paper counts a little more work than convolutions and dense layers (see docs/zoo.md).
    assert abs(count_macs(model) / PAPER[name][1] - 1) < 0.10, count_macs(model)


def test_width_and_classes_change_the_model():
    model = create_model("mixnet_s", input_shape=(32, 48, 1), num_classes=10, width_multiplier=0.5)
    assert model.input_shape == (None, 32, 48, 1) and model.output_shape == (None, 10)
    assert model.count_params() < 4.1e6 / 2
    v3 = create_model("mobilenet_v3_small", input_shape=(32, 32, 1), num_classes=10)
    assert not any("rescaling" in layer.name for layer in v3.layers)  # no preprocessing inside
    logits = create_model(
        "mobilenet_v2", input_shape=(32, 32, 3), num_classes=4, classifier_activation=None
    )
    assert logits.layers[-1].activation.__name__ == "linear"


@pytest.fixture(scope="module")
def conversions(mnist_split):
    """Every slow conversion of this file, two at a time in worker processes."""
    import _zoo_conversions as jobs

    from tfcompress.zoo.registry import get_entry

    def padded(name: str) -> np.ndarray:
        side = get_entry(name).min_resolution
        pad = (side - 28) // 2
        widths = ((0, 0), (pad, side - 28 - pad), (pad, side - 28 - pad), (0, 0))
        return np.pad(mnist_split.train.x[:64], widths)

    planned = [(f"int8:{name}", jobs.int8_run, (name, padded(name))) for name in CONVERTED]
    pool, futures = jobs.start(planned)
    yield futures
    pool.shutdown(cancel_futures=True)


def test_model_info_prints_its_counts():
    info = model_info("mixnet_s", count_macs=False)
    assert "mixnet_s" in str(info) and info.macs is None


@pytest.mark.slow
@pytest.mark.parametrize("name", CONVERTED)
def test_each_kind_of_block_converts_to_full_int8_and_runs_in_litert(name, conversions):
    from tfcompress.zoo.macs import count_macs

    run = conversions[f"int8:{name}"].result()
    assert run["precision"] == "int8"
    assert run["macs"] is not None and run["macs"] == run["float_macs"] > 0
    # The Keras counter model_info uses counts exactly what the .tflite counter counts.
    model = create_model(
        name, input_shape=run["input_shape"], num_classes=10, width_multiplier=0.35
    )
    assert count_macs(model) == run["float_macs"]
    probabilities = run["probabilities"]
    assert probabilities.shape == (8, 10)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=0.05)


# --- CLI ----------------------------------------------------------------------------------


def test_cli_lists_params_without_converting(capsys):
    from tfcompress.cli import main

    code = main(["zoo", "mixnet_s", "--input-shape", "32x32x1", "--num-classes", "10", "--no-macs"])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "zoo at 32x32x1, 10 classes, width 1"
    assert lines[1].split() == ["model", "family", "params", "MACs", "min", "res"]
    (row,) = (line.split() for line in lines[2:])
    params = create_model("mixnet_s", input_shape=(32, 32, 1), num_classes=10).count_params()
    assert row == ["mixnet_s", "mixnet", f"{params / 1e6:.2f}M", "-", "32"]


def test_cli_json_is_a_list_of_model_info(capsys):
    from tfcompress.cli import main

    args = ["zoo", "mobilenet_v1", "--input-shape", "32x32x1", "--width", "0.5", "--no-macs"]
    assert main([*args, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    expected = create_model("mobilenet_v1", input_shape=(32, 32, 1), width_multiplier=0.5)
    assert row == {
        "name": "mobilenet_v1",
        "family": "mobilenet_v1",
        "input_shape": [32, 32, 1],
        "num_classes": 1000,
        "width_multiplier": 0.5,
        "params": expected.count_params(),
        "macs": None,
        "min_resolution": 32,
    }


@pytest.mark.slow
def test_cli_counts_macs_with_the_harness_counter(capsys, conversions):
    from tfcompress.cli import main

    name = "mobilenet_v3_small"
    shape = ["--input-shape", "32x32x1", "--num-classes", "10", "--width", "0.35"]
    assert main(["zoo", name, *shape, "--json"]) == 0  # counted from the layers, no conversion
    (row,) = json.loads(capsys.readouterr().out)
    # the same count as the float file converted in a worker process
    assert row["macs"] == conversions[f"int8:{name}"].result()["float_macs"] > 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["zoo", "resnet*"], "no zoo model matches 'resnet*'"),
        (["zoo", "--input-shape", "16x16x1", "--no-macs"], "at least 32x32"),
        (["zoo", "--input-shape", "32x32"], "HEIGHTxWIDTHxCHANNELS"),
        (["zoo", "--width", "0"], "positive number"),
        (["zoo", "--num-classes", "0"], "at least 1"),
    ],
)
def test_cli_bad_input_is_exit_2_with_one_line(argv, message, capsys):
    from tfcompress.cli import main

    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err and len(captured.err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "extra",
    [
        ["--input-shape", "100000x100000x3"],
        ["--input-shape", "224x224x100000"],
        ["--num-classes", str(10**9)],
        ["--width", "1e6"],
    ],
)
def test_absurd_sizes_are_refused_before_building(capsys, extra):
    assert main(["zoo", "mobilenet_v2", "--no-macs", *extra]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and any(w in lines[0] for w in ("beyond", "from 1 to", "at most"))


def test_a_model_too_large_for_memory_is_one_line(capsys, monkeypatch):
    import dataclasses

    from tfcompress._compat.tf import tensorflow
    from tfcompress.zoo import registry

    def exhausted(**_):
        raise tensorflow().errors.ResourceExhaustedError(None, None, "OOM when allocating")

    entry = dataclasses.replace(registry.get_entry("mobilenet_v2"), builder=exhausted)
    monkeypatch.setitem(registry.MODELS, "mobilenet_v2", entry)
    assert main(["zoo", "mobilenet_v2", "--no-macs", "--input-shape", "64x64x3"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert "too large to build" in lines[-1] and lines[-1].startswith("tfcompress zoo: error:")
