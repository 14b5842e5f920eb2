"""The signature decides how a model is fed: batch dimensions, scalars, static batches."""

from __future__ import annotations

import numpy as np
import pytest

from tfcompress.bench.inputs import parse_input_shape, random_inputs
from tfcompress.data import Dataset, load_data, validate_for_signature
from tfcompress.errors import InvalidDataError, InvalidInputError
from tfcompress.models.feeding import feed_layout, parse_batch_dim, parse_input_value
from tfcompress.models.signature import ModelSignature, TensorSpec


def _signature(*inputs: tuple[str, tuple], outputs: tuple = ()) -> ModelSignature:
    return ModelSignature(
        tuple(TensorSpec(shape, name=name) for name, shape in inputs),
        tuple(TensorSpec(shape, name=name) for name, shape in outputs),
    )


VAD = _signature(
    ("input", (None, None)),
    ("sr", ()),
    ("h", (2, None, 64)),
    outputs=(("output", (None, 1)), ("hn", (2, None, 64))),
)


@pytest.mark.parametrize(
    ("inputs", "declared", "axes", "static"),
    [
        # batch first and free: the plain case
        ((("x", (None, 28, 28, 1)),), {}, {"x": 0}, None),
        # a state whose batch is its middle dimension, next to a free batch; a scalar
        ((("input", (None, None)), ("sr", ()), ("h", (2, None, 64))), {}, {"h": 1}, None),
        # an RNN exported at batch 1; its state (2, 1, 64) carries the batch at dimension 1
        ((("frames", (1, 10, 8)), ("h", (2, 1, 64))), {}, {"frames": 0, "h": 1}, 1),
        # the user says where the batch is when the signature cannot
        ((("x", (None, 16)), ("h", (2, 8, 64))), {"h": 1}, {"h": 1}, 8),
    ],
)
def test_the_rules(inputs, declared, axes, static):
    layout = feed_layout(_signature(*inputs), batch_dims=declared)
    assert {t.name: t.batch_axis for t in layout.inputs if t.name in axes} == axes
    assert layout.static_batch == static
    assert all(t.batch_axis is None for t in layout.inputs if t.name == "sr")


def test_outputs_follow_the_same_rules_and_describe_their_batch():
    layout = feed_layout(VAD)
    assert layout.output("hn").batch_axis == 1 and layout.output("output").batch_axis == 0
    assert layout.input("h").describe() == "(2, N, 64) float32"
    assert layout.input("sr").describe() == "() float32 scalar"
    assert layout.to_dict()["inputs"] == {"input": 0, "sr": None, "h": 1}
    assert "input h (2, N, 64): batch at dimension 1" in layout.explain()
    # An output a converter wrote as (1, C) next to a free batch carries the batch (LiteRT
    # Quantizer's files); any other fixed output is one value per call.
    free = feed_layout(
        ModelSignature(
            (TensorSpec((None, 4), name="x"),),
            (TensorSpec((1, 3), name="scores"), TensorSpec((2, 3), name="table")),
        )
    )
    assert free.output("scores").batch_axis == 0 and free.output("table").batch_axis is None


def test_arrays_move_between_the_models_layout_and_batch_first():
    layout = feed_layout(VAD)
    state = np.arange(2 * 3 * 64, dtype=np.float32).reshape(2, 3, 64)
    first = layout.input("h").to_samples(state)
    assert first.shape == (3, 2, 64) and np.array_equal(layout.input("h").to_model(first), state)
    rate = layout.input("sr").to_model(np.broadcast_to(np.float32(16000), (3,)))
    assert rate.shape == () and rate == 16000
    with pytest.raises(InvalidDataError, match="takes one value per call"):
        layout.input("sr").to_model(np.array([8000.0, 16000.0]))


@pytest.mark.parametrize(
    ("batch_dims", "message"),
    [
        ({"c": 0}, "has no such input"),
        ({"sr": 0}, "a scalar .* has no dimension to batch"),
        ({"h": 3}, r"has 3 dimension\(s\) \(2, \?, 64\); give one from 0 to 2"),
    ],
)
def test_declared_batch_dimensions_are_checked(batch_dims, message):
    with pytest.raises(InvalidInputError, match=message):
        feed_layout(VAD, batch_dims=batch_dims)


def test_inputs_that_fix_different_batches_are_refused_with_the_flag():
    with pytest.raises(InvalidInputError, match=r"fix different batch sizes.*--batch-dim"):
        feed_layout(_signature(("a", (1, 4)), ("b", (2, 4))), batch_dims={"b": 0})


def test_the_flags_parse_or_say_what_to_write():
    assert parse_batch_dim("h=1") == ("h", 1)
    assert parse_input_value("sr=16000") == ("sr", 16000.0)
    assert parse_input_shape("input=Nx512") == ("input", (None, 512))
    for parse, text in ((parse_batch_dim, "h=x"), (parse_input_value, "sr=nan")):
        with pytest.raises(InvalidInputError, match=r"write e\.g\."):
            parse(text)


def test_data_in_the_models_layout_is_validated_and_moved_batch_first(tmp_path):
    path = tmp_path / "vad.npz"
    audio, state = np.zeros((5, 32), np.float32), np.zeros((2, 5, 64), np.float32)
    np.savez(path, input=audio, sr=np.float32(16000), h=state)
    raw = load_data(path)  # 0-d sr and a (2, N, 64) state are read as they are
    checked = validate_for_signature(raw, VAD)
    assert len(checked) == 5 and checked.x["h"].shape == (5, 2, 64)
    assert checked.x["sr"].shape == (5,) and checked.x["sr"].strides == (0,)
    given = validate_for_signature(
        Dataset({"input": audio, "h": state}, aligned=False), VAD, values={"sr": 8000}
    )
    assert float(given.x["sr"][0]) == 8000.0
    with pytest.raises(InvalidInputError, match=r"both an array .* and a value"):
        validate_for_signature(raw, VAD, values={"sr": 8000})


def test_random_inputs_follow_the_layout_and_the_values():
    feed = random_inputs(
        VAD, input_shapes={"input": (None, 512)}, batch_sizes=(1, 8), values={"h": 0.0}
    )
    assert feed.x["input"].shape[1:] == (512,) and feed.x["h"].shape[1:] == (2, 64)
    assert not feed.x["h"].any() and feed.x["sr"].strides == (0,)
    with pytest.raises(InvalidDataError, match=r"--input-shape input=Nx\?"):
        random_inputs(VAD)


def test_a_dict_of_single_values_alone_is_not_data():
    with pytest.raises(InvalidDataError, match="only single values"):
        Dataset({"sr": np.array(16000, np.float32)})
    assert len(Dataset({"x": np.zeros((3, 2)), "sr": np.array(1.0)})) == 3
