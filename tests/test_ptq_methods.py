"""Post-training methods beyond min/max int8, on models where the converter is weak.

The models (tfcompress/samples/ptq_stress.py) are trained once per session on the scikit-learn
digits; every comparison is with the converter's plain int8 made in the same run.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import tfcompress
import tfcompress.edgetpu
from tfcompress._compat.keras import flavour_of
from tfcompress.cli import main
from tfcompress.data import Dataset
from tfcompress.errors import InvalidInputError
from tfcompress.models.tflite_file import read_tflite
from tfcompress.quantization import Recipe
from tfcompress.quantization.methods import AUTO_CANDIDATES, METHODS
from tfcompress.quantization.methods.rewrite import rewrite_model
from tfcompress.samples.ptq_stress import (
    box_targets,
    digits_split,
    spectral_features,
    trained_depthwise_classifier,
    trained_normalized_classifier,
    trained_two_head_regressor,
)

pytestmark = pytest.mark.slow  # trains the stress models and runs every method


@pytest.fixture(scope="session")
def digits():
    return digits_split()


@pytest.fixture(scope="session")
def depthwise(digits):
    return trained_depthwise_classifier(digits, epochs=12)


@pytest.fixture(scope="session")
def depthwise_files(tmp_path_factory, depthwise, digits):
    root = tmp_path_factory.mktemp("depthwise")
    depthwise.save(root / "dw.keras")
    np.savez(root / "calib.npz", x=digits.train.x)
    np.savez(root / "test.npz", x=digits.test.x, y=digits.test.y)
    return root


def _ops(content: bytes) -> list[str]:
    return [op.opcode for op in read_tflite(content).subgraphs[0].operators]


def _io(content: bytes) -> list[tuple[str, str]]:
    graph = read_tflite(content).subgraphs[0]
    return [
        (graph.tensors[i].name, graph.tensors[i].dtype) for i in (*graph.inputs, *graph.outputs)
    ]


def test_depthwise_classifier_through_the_cli(
    capfd, tmp_path, depthwise, depthwise_files, digits, monkeypatch
):
    """--methods auto with --eval: methods tried, one kept, replayable to the same bytes."""
    from tfcompress.quantization.methods import apply

    # what the methods can reach, every candidate made (auto's budget is tested apart)
    monkeypatch.setattr(apply, "AUTO_BUDGET", float("inf"))
    out = tmp_path / "dw_int8.tflite"
    code = main(
        [
            "quantize",
            str(depthwise_files / "dw.keras"),
            "--data",
            str(depthwise_files / "calib.npz"),
            "--eval",
            str(depthwise_files / "test.npz"),
            "--out",
            str(out),
            "--methods",
            "auto",
            "--json",
        ]
    )
    captured = capfd.readouterr()
    assert code == 0, captured.err
    payload = json.loads(captured.out)
    methods = payload["methods"]
    assert methods["searched"] and methods["measured_on"] == "eval samples"
    assert methods["samples"] == len(digits.test)
    (plain,) = methods["plain"]["fidelity"]
    assert plain["agreement"] < 0.97  # the converter loses agreement on the wide channels
    kept = next(c for c in methods["candidates"] if c["methods"] == methods["kept"])
    assert "equalize" in methods["kept"] and kept["fidelity"][0]["agreement"] >= 0.99
    assert kept["fidelity"][0]["snr_db"] >= plain["snr_db"] + 10
    assert payload["accuracy_drop"] <= 0.01
    assert payload["size_bytes"] == out.stat().st_size == kept["size_bytes"]
    rewrite = kept["rewrite"]
    assert {f["into"] for f in rewrite["folded"]} >= {"bottleneck", "expand"}
    pair = next(p for p in rewrite["equalized"] if p["source"] == "bottleneck")
    assert pair["targets"] == ["expand"] and pair["range_before"] > 20 > pair["range_after"]
    assert rewrite["float_max_difference"] <= 1e-4 * rewrite["float_output_peak"]
    # Replay: the recorded recipe makes the same bytes again (no eval data needed).
    recipe = Recipe("int8", methods=tuple(methods["kept"]))
    again = tfcompress.quantize(depthwise, recipe=recipe, representative_data=digits.train.x)
    assert again.model_content == out.read_bytes()
    assert again.methods is not None and not again.methods.searched
    # An ordinary full-int8 file: the converter's ops and I/O, and the Edge TPU linter agrees.
    plain_file = tfcompress.quantize(depthwise, recipe="int8", representative_data=digits.train.x)
    assert _ops(again.model_content) == _ops(plain_file.model_content)
    assert _io(again.model_content) == _io(plain_file.model_content)
    assert again.float_ops == () == plain_file.float_ops
    lint_methods = tfcompress.edgetpu.check(again.model_content)
    lint_plain = tfcompress.edgetpu.check(plain_file.model_content)
    assert [f.rule for f in lint_methods.findings] == [f.rule for f in lint_plain.findings]


@pytest.fixture(scope="session")
def depthwise_tf_keras(depthwise, digits):
    """The same trained model rebuilt in tf-keras (same weights, checked to 1e-5)."""
    from tfcompress._compat.bridge import to_tf_keras

    return to_tf_keras(depthwise, digits.test.x[:32])[0]


def _rounding_spread(model, x, ulps=4, draws=3):
    """Per sample, how far the outputs move when every weight moves by ``ulps`` float32 ulps."""
    original = model.get_weights()
    expected = np.asarray(model(x, training=False))
    rng = np.random.default_rng(0)
    spread = np.zeros((len(x), 1), np.float32)
    try:
        for _ in range(draws):
            model.set_weights(
                [
                    w * (1 + ulps * np.finfo(np.float32).eps * rng.choice([-1, 1], w.shape))
                    for w in original
                ]
            )
            moved = np.abs(np.asarray(model(x, training=False)) - expected)
            spread = np.maximum(spread, moved.reshape(len(x), -1).max(axis=1, keepdims=True))
    finally:
        model.set_weights(original)
    return spread


@pytest.mark.parametrize("flavour", ["keras3", "tf_keras"])
def test_equalized_float_model_equals_the_original(flavour, depthwise, depthwise_tf_keras, digits):
    """Folding and equalization keep the function on held-out data, in either Keras."""
    model = depthwise if flavour == "keras3" else depthwise_tf_keras
    copy, rewrite = rewrite_model(
        model, ["equalize"], Dataset(digits.train.x[:200]), per_channel=False
    )
    assert rewrite.equalized and len(rewrite.folded) == 6  # every BatchNorm of the model
    assert copy is not model and flavour_of(copy) == flavour_of(model)

    # Rescaled weights round differently in float32; how far that moves an output depends on
    # how much the model amplifies a weight's rounding for that sample (and on the CPU's
    # kernels). Each sample's tolerance is the original's own spread when its weights move by
    # a few ulps, as rescaling moves them.
    def within(x):
        expected = np.asarray(model(x, training=False))
        actual = np.asarray(copy(x, training=False))
        close = np.abs(actual - expected) <= 1e-5 + 8 * _rounding_spread(model, x)
        return close.all(axis=1), actual.argmax(axis=1) == expected.argmax(axis=1)

    # On the samples it was calibrated on, every ReLU6 stays below its clip: the same function.
    close, agree = within(digits.train.x[:200])
    assert close.all() and agree.all()
    # A held-out sample may drive a ReLU6 past its calibrated range, where equalization is not
    # exact by design (equalize.py: CLIP_MARGIN); such samples are rare and keep their class.
    close, agree = within(digits.test.x)
    assert close.mean() >= 0.99 and agree.all()
    widened = next(p for p in rewrite.equalized if p.source == "bottleneck")
    assert widened.scale_max > 5 * widened.scale_min  # the wide channels were shrunk
    # The caller's model is untouched.
    assert model.get_layer("bottleneck_bn").get_weights()[0].max() > 5


def test_tf_keras_model_with_a_recipe_that_names_methods(depthwise_tf_keras, digits):
    recipe = Recipe("int8", methods=("equalize", "bias-correction"))
    result = tfcompress.quantize(
        depthwise_tf_keras,
        recipe=recipe,
        representative_data=digits.train.x,
        eval_data=digits.test.x,
    )
    report = result.methods
    assert report is not None and not report.searched and report.kept == recipe.methods
    assert result.recipe == recipe
    (plain,) = report.plain.fidelity
    (mine,) = report.kept_candidate.fidelity
    assert mine.agreement >= 0.99 > 0.97 > plain.agreement
    assert "applied as given" in report.reason and "kept equalize+bias-correction" in str(result)
    assert result.to_dict()["methods"]["kept"] == ["equalize", "bias-correction"]


def _spread_onet(digits):
    """The O-Net stand-in with its fc channels spread 30x, the heads counter-scaled."""
    from tfcompress.samples.face_nets import onet, onet_data

    model = onet(seed=0)
    fc = model.get_layer("fc")
    kernel, bias = fc.get_weights()
    spread = np.geomspace(1.0, 30.0, kernel.shape[1]).astype(np.float32)
    np.random.default_rng(0).shuffle(spread)
    fc.set_weights([kernel * spread, bias * spread])
    for head in ("cls", "box", "landmarks"):
        weights, head_bias = model.get_layer(head).get_weights()
        model.get_layer(head).set_weights([weights / spread[:, None], head_bias])
    calibration = onet_data(Dataset(digits.train.x[:200], digits.train.y[:200])).x
    return model, calibration, onet_data(Dataset(digits.test.x, digits.test.y)).x


def test_equalization_looks_through_prelu(digits):
    """O-Net's conv and fc + PReLU blocks are equalized: PReLU(x / s) = PReLU(x) / s, s > 0.

    The real O-Net's fc + PReLU output (256 channels) spans 22x between its widest and
    narrowest channels; one int8 range then leaves its box head, a small signal that reads
    every channel, at 22 dB. The stand-in's fc channels are spread so here, the heads
    counter-scaled (the same function): equalization must narrow them and lift the box head.
    """
    model, calibration, test = _spread_onet(digits)
    _, rewrite = rewrite_model(model, ["equalize"], Dataset(calibration), per_channel=True)
    assert {p.source for p in rewrite.equalized} == {"conv1", "conv2", "conv3", "fc"}
    pair = next(p for p in rewrite.equalized if p.source == "fc")
    assert sorted(pair.targets) == ["box", "cls", "landmarks"]
    assert pair.range_before > 3 * pair.range_after
    assert rewrite.float_max_difference <= 1e-4 * rewrite.float_output_peak

    result = tfcompress.quantize(
        model, representative_data=calibration, eval_data=test, methods="equalize"
    )
    report = result.methods
    assert report is not None and report.kept == ("equalize",)
    plain = {f.output: f.snr_db for f in report.plain.fidelity}
    kept = {f.output: f.snr_db for f in report.kept_candidate.fidelity}
    assert kept["box"] >= plain["box"] + 3, (plain, kept)


def test_ops_kept_float_per_op_build_on_equalization_when_it_is_better(digits, monkeypatch):
    """The per-op climb (quantize --methods per-op, compress's per-op rung) tries equalization
    at its first step and builds on it: the PRELU ops float for speed, equalized for the box
    head. The recipe records both and replays to the same bytes."""
    from tfcompress.compression import api
    from tfcompress.quantization.methods import per_op, slow_ops

    def timed(content, *, backend, threads, name, where=None):
        # The subject is equalization, not this CPU's int8 speed (on an AVX2-only CPU a
        # step's float convs decide whether it runs slower than float32): plain int8 3x
        # float32's time, every step half of it.
        return {"float32": 1.0, "int8": 3.0}.get(name, 0.5)

    monkeypatch.setattr(slow_ops, "measure_latency", timed)
    monkeypatch.setattr(per_op, "measure_latency", timed)
    model, calibration, test = _spread_onet(digits)
    test = test[:300]
    result = tfcompress.quantize(
        model, representative_data=calibration, eval_data=test, methods="per-op"
    )
    (kept,) = result.methods.kept
    assert re.fullmatch(r"int8 \(\d+ PRELU(, \d+ [A-Z_0-9]+)* float\) \+ equalize", kept), kept
    gain = re.search(r"([\d.]+) dB with equalize, ([\d.]+) dB without", result.methods.reason)
    assert gain is not None and float(gain[1]) >= float(gain[2]) + 3, result.methods.reason
    assert result.recipe.methods == ("equalize",) and result.float_ops.count("PRELU") >= 4
    again = tfcompress.quantize(model, recipe=result.recipe, representative_data=calibration)
    assert again.model_content == result.model_content
    # compress: plain int8 is too slow, so the rungs that run its graph are skipped, and the
    # per-op rung's first step is equalized too (its ops timed here: maybe other convs).
    ladder, rungs = api.plan_ladder, ("int8", "int8-methods", "per-op")
    monkeypatch.setattr(api, "plan_ladder", lambda **o: [r for r in ladder(**o) if r.name in rungs])
    compressed = tfcompress.compress(
        model, representative_data=calibration, eval_data=test, min_snr=20.0
    )
    int8, chosen = compressed.attempts
    assert int8.name == "int8" and chosen is compressed.chosen, str(compressed)
    assert chosen.name.endswith(" float) + equalize") and chosen.gate["candidate"] == chosen.name
    assert tuple(chosen.recipe["recipe"]["methods"]) == ("equalize",)
    assert "int8-methods runs plain int8's graph, and int8 " in compressed.stop_reason


def test_small_regression_head_gains_6_db(digits, monkeypatch):
    from tfcompress.quantization.methods import apply

    # what the methods can reach, every candidate made (auto's budget is tested apart)
    monkeypatch.setattr(apply, "AUTO_BUDGET", float("inf"))
    model = trained_two_head_regressor(digits, epochs=15)
    result = tfcompress.quantize(
        model, representative_data=digits.train.x, eval_data=digits.test.x, methods="auto"
    )
    report = result.methods
    assert report is not None and report.kept  # auto asked for: a method kept
    plain = {f.output: f for f in report.plain.fidelity}
    kept = {f.output: f for f in report.kept_candidate.fidelity}
    assert kept["box"].snr_db >= plain["box"].snr_db + 6
    # kept for its weakest output (the box), not for being better on every output
    assert report.kept_candidate.worst_snr >= report.plain.worst_snr
    # the outputs really are small: a box head scaled like anchor deltas
    assert np.abs(box_targets(digits.test.x)).max() < 0.1
    # never worse on any output of any candidate that was kept: every candidate is listed
    assert len(report.candidates) == len(AUTO_CANDIDATES)
    assert all(c.fidelity for c in report.candidates) and report.skipped == ()


def test_normalization_front_end_is_never_worse(digits):
    model = trained_normalized_classifier(digits, epochs=10)
    features = spectral_features(digits.train.x)
    result = tfcompress.quantize(
        model,
        representative_data=features,
        eval_data=spectral_features(digits.test.x),
        methods="auto",
    )
    report = result.methods
    assert report is not None
    kept, plain = report.kept_candidate, report.plain
    assert kept.worst_snr >= plain.worst_snr  # never a weaker weakest output
    # A candidate worse than plain int8 is reported, never returned.
    for candidate in report.candidates:
        if candidate.methods != report.kept:
            assert candidate.methods not in (result.recipe.methods,)


def test_range_search_reaches_the_quantizer(depthwise, digits):
    recipe = Recipe("int8", methods=("percentile-ranges",), range_percentile=99.0)
    result = tfcompress.quantize(depthwise, recipe=recipe, representative_data=digits.train.x)
    ranges = result.methods.kept_candidate.ranges
    assert ranges  # every activation tensor's range, within its calibrated one (and 0)
    for r in ranges:
        assert min(r.calibrated[0], 0.0) <= r.chosen[0] <= 0.0 <= r.chosen[1]
        assert r.chosen[1] <= max(r.calibrated[1], 0.0)
    shrunk = [r for r in ranges if r.shrink < 0.9]
    assert shrunk  # 1% of the values clipped: some ranges are much narrower
    # applied as given, even when worse than plain int8; then the result says so
    worse = (
        result.methods.kept_candidate.fidelity[0].snr_db < result.methods.plain.fidelity[0].snr_db
    )
    assert worse == any("worse than plain int8" in w for w in result.warnings)
    graph = read_tflite(result.model_content).subgraphs[0]
    scales = {
        t.name: t.quantization.scales[0]
        for t in graph.tensors
        if t.quantization and t.quantization.scales
    }
    edited = next(r for r in shrunk if r.tensor in scales)
    width = edited.chosen[1] - edited.chosen[0]
    assert scales[edited.tensor] == pytest.approx(width / 255, rel=0.02)


def test_adaround_lowers_each_layers_error(depthwise, digits):
    copy, rewrite = rewrite_model(
        depthwise, ["adaround"], Dataset(digits.train.x[:200]), per_channel=True
    )
    assert len(rewrite.rounded) == 7  # every conv, depthwise and dense layer
    assert all(r.error_learned <= r.error_nearest for r in rewrite.rounded)
    assert any(r.error_learned < 0.8 * r.error_nearest and r.flipped > 0 for r in rewrite.rounded)
    # The rounded weights are on the converter's grid: max |w| / 127 per channel, integers.
    kernel = copy.get_layer("expand").get_weights()[0].reshape(-1, 48).astype(np.float64)
    steps = np.abs(kernel).max(axis=0) / 127
    np.testing.assert_allclose(kernel / steps, np.round(kernel / steps), atol=1e-3)


FLOAT_DENSE = {"pattern": ".*", "op_type": "FULLY_CONNECTED", "mode": "float"}


def test_ops_kept_float_stay_float_with_methods(depthwise, digits):
    """A float rule (or float_nodes) holds in plain int8 and in every candidate made."""
    result = tfcompress.quantize(
        depthwise,
        recipe=Recipe("int8", rules=(FLOAT_DENSE,)),
        methods="equalize",
        representative_data=digits.train.x,
    )
    assert result.methods is not None and result.methods.kept == ("equalize",)
    assert result.float_ops == ("FULLY_CONNECTED",)
    # recorded as the nodes the rule named, as without methods: a replay makes the same file
    assert result.recipe.rules == () and len(result.recipe.float_nodes) == 1
    again = tfcompress.quantize(depthwise, recipe=result.recipe, representative_data=digits.train.x)
    assert again.model_content == result.model_content


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"recipe": Recipe("int8", methods=("equalize",)), "methods": "auto"}, "not both"),
        ({"methods": "bias-correction,sharpen"}, "unknown method 'sharpen'"),
        ({"methods": ["percentile-ranges", "mse-ranges"]}, "one activation range method"),
        ({"recipe": "float16", "methods": ["equalize"]}, "apply to recipe 'int8' only"),
        ({"recipe": "dynamic", "eval_data": np.zeros((2, 8, 8, 1), np.float32)}, "eval_data"),
        ({"format": "onnx", "methods": "auto"}, "apply to .tflite only"),
        (
            {"recipe": Recipe("int8", rules=(FLOAT_DENSE,)), "methods": "per-op"},
            "drop --rules \\(rules\\), or drop --methods per-op",
        ),
    ],
)
def test_refusals(depthwise, options, message):
    with pytest.raises(InvalidInputError, match=message):
        tfcompress.quantize(
            depthwise, representative_data=np.zeros((4, 8, 8, 1), np.float32), **options
        )


def test_recipe_json_round_trip_and_cli_refusals(capfd, tmp_path, depthwise_files):
    recipe = Recipe("int8", methods=("mse-ranges", "equalize"))
    assert recipe.methods == ("equalize", "mse-ranges")  # stored in the order they run
    assert Recipe.from_json(recipe.to_json()) == recipe
    with pytest.raises(InvalidInputError, match="percentile-ranges"):
        Recipe("int8", range_percentile=99.0)
    help_text = capture_help(capfd)
    assert all(name in help_text for name in METHODS)  # the CLI's help lists every method
    model, calib = depthwise_files / "dw.keras", depthwise_files / "calib.npz"
    for extra, text in (
        (["--recipe", "dynamic", "--methods", "equalize"], "apply to recipe 'int8' only"),
        (["--methods", "equalize,auto"], "pass auto, none"),
    ):
        out = tmp_path / "refused.tflite"
        code = main(["quantize", str(model), "--data", str(calib), *extra, "--out", str(out)])
        captured = capfd.readouterr()
        assert code == 2 and text in captured.err and not out.exists()
        assert len(captured.err.strip().splitlines()) == 1


def capture_help(capfd) -> str:
    """``tfcompress quantize --help``, as printed, unwrapped (argparse wraps at hyphens too)."""
    assert main(["quantize", "--help"]) == 0
    return " ".join(capfd.readouterr().out.split()).replace("- ", "-")
