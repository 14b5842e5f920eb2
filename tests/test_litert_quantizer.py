"""LiteRT Quantizer as the second engine: shipped .tflite files, rules, per-tensor errors.

The third-party model is a MediaPipe-shaped landmarker (one image in; landmarks, presence
and classes out) trained once on the bundled digits, written as vendors write files: no
signature, op codes in the old 8-bit field, float16 weights behind DEQUANTIZE.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import tfcompress
from tfcompress.cli import main
from tfcompress.errors import (
    InvalidInputError,
    MissingDependencyError,
    UnsupportedModelError,
)
from tfcompress.models.tflite_file import read_tflite
from tfcompress.quantization.float_ops import FLOAT_DTYPES
from tfcompress.quantization.recipes import Recipe
from tfcompress.samples.landmarker import VARIANTS, landmark_model, shipped_variants

pytest.importorskip("litert_quantizer")

OUTPUTS = {"classes", "landmarks", "presence"}


def tensors_are_float(parsed, name: str) -> bool:
    """Every tensor of the op writing ``name`` (inputs, weights, outputs) is float."""
    graph = parsed.subgraphs[0]
    for op in graph.operators:
        if name in [graph.tensors[i].name for i in op.outputs]:
            indices = [i for i in (*op.inputs, *op.outputs) if 0 <= i < len(graph.tensors)]
            return all(graph.tensors[i].dtype in FLOAT_DTYPES for i in indices)
    return False


@pytest.fixture(scope="module")
def landmarker(tmp_path_factory):
    model, (train, test) = landmark_model(epochs=6)
    root = tmp_path_factory.mktemp("landmarker")
    files = {}
    for variant, content in shipped_variants(model).items():
        files[variant] = root / f"landmarker_{variant}.tflite"
        files[variant].write_bytes(content)
    files["calib"] = root / "calib.npz"
    files["test"] = root / "test.npz"
    np.savez(files["calib"], x=train.x[:100])
    np.savez(files["test"], x=test.x, **{f"y_{k}": v for k, v in test.y.items()})
    results = {
        v: tfcompress.quantize(files[v], recipe="int8", representative_data=train.x[:100])
        for v in VARIANTS
    }
    return {"model": model, "train": train, "test": test, "files": files, "int8": results}


def test_every_shipped_variant_quantizes_to_the_same_model(landmarker) -> None:
    results, test = landmarker["int8"], landmarker["test"]
    assert {r.engine for r in results.values()} == {"litert-quantizer"}
    notes = {v: " ".join(r.notes) for v, r in results.items()}
    assert "added signature serving_default" in notes["no_signature"]
    assert "deprecated_builtin_code" in notes["old_opcodes"]
    assert "widened 18 float16 weight(s)" in notes["float16"]
    assert all(k in notes["mediapipe"] for k in ("signature", "deprecated", "float16"))
    assert "float32 input and output" in notes["float"]
    # Read naively, every op of the old-op-code file is ADD; the reader says where it looked.
    codes = read_tflite(landmarker["files"]["old_opcodes"].read_bytes()).operator_codes
    assert any(c.from_deprecated_field and c.name == "CONV_2D" for c in codes)
    reference = results["float"].model.content
    for variant, result in results.items():
        parsed = read_tflite(result.model_content)
        assert {t.dtype for t in parsed.subgraphs[0].tensors} >= {"int8"}, variant
        assert result.size_ratio < 0.4, variant  # int8 weights: about a third of float32
        scores = tfcompress.evaluate(
            {"float": result.reference, "int8": result.model}, test.x[:200]
        )
        assert scores.samples == 200
        if variant in ("float", "old_opcodes"):  # same float32 weights: the same bytes
            assert result.model_content == reference


def test_label_free_gate_reports_every_output(landmarker) -> None:
    result = landmarker["int8"]["float"]
    report = tfcompress.check_gate(result.reference, result.model, landmarker["test"].x)
    assert {v.output for v in report.verdicts} == OUTPUTS
    by_output = {v.output: v for v in report.verdicts}
    assert by_output["classes"].metric == "agreement" and by_output["classes"].value > 0.9
    assert by_output["landmarks"].metric == "snr" and by_output["landmarks"].value > 5


def test_float_rule_is_honoured_in_the_file_by_both_engines(landmarker) -> None:
    rule = {"pattern": "neck", "mode": "float"}
    tflite = tfcompress.quantize(
        landmarker["files"]["float"],
        recipe=Recipe("int8", rules=(rule,)),
        representative_data=landmarker["train"].x[:100],
    )
    keras = tfcompress.quantize(
        landmarker["model"],
        recipe="int8",
        rules=[rule],
        representative_data=landmarker["train"].x[:100],
    )
    assert keras.engine == "converter" and keras.float_nodes
    for result in (tflite, keras):
        parsed = read_tflite(result.model_content)
        graph = parsed.subgraphs[0]
        neck = [t.name for t in graph.tensors if "neck" in t.name and "MatMul" in t.name]
        written = [n for n in neck if any(n in graph.tensors[i].name for op in graph.operators
                                          for i in op.outputs)]  # fmt: skip
        assert written and any(tensors_are_float(parsed, n) for n in written)
        assert result.float_ops == ("FULLY_CONNECTED",)  # only the neck stayed float
        assert Recipe.from_json(result.recipe.to_json()) == result.recipe
    # Replaying the recorded recipe gives the same bytes.
    again = tfcompress.quantize(
        landmarker["files"]["float"],
        recipe=Recipe.from_json(tflite.recipe.to_json()),
        representative_data=landmarker["train"].x[:100],
    )
    assert again.model_content == tflite.model_content


def test_int16_rule_int4_weights_and_their_notes(landmarker) -> None:
    files, calib = landmarker["files"], landmarker["train"].x[:100]
    wide = tfcompress.quantize(
        files["float"],
        recipe="int8",
        rules=[{"pattern": "presence", "op_type": "FULLY_CONNECTED", "mode": "int16"}],
        representative_data=calib,
        layer_errors=True,
    )
    graph = read_tflite(wide.model_content).subgraphs[0]
    produced = {graph.tensors[i].name: op.opcode for op in graph.operators for i in op.outputs}
    presence = [n for n, op in produced.items() if "presence" in n and op == "FULLY_CONNECTED"]
    assert presence and all(t.dtype == "int16" for t in graph.tensors if t.name in presence)
    assert any("int16 activations" in n and "XNNPACK" in n for n in wide.notes)
    errors = wide.layer_errors
    assert errors is not None and errors.samples == 64 and errors.tensors
    snrs = [t.snr_db for t in errors.tensors]
    assert snrs == sorted(snrs)  # worst first
    assert {t.mode for t in errors.tensors} == {"int8", "int16"}
    int4 = tfcompress.quantize(files["float"], recipe="int4-dynamic", block_size=32)
    assert int4.calibration_samples == 0 and int4.float_ops is None
    assert int4.size_ratio < wide.size_ratio  # 4-bit weights beat 8-bit ones
    with pytest.raises(InvalidInputError, match="blockwise"):
        Recipe("int4-weights", block_size=32)


def test_refusals_are_one_line(landmarker, monkeypatch) -> None:
    files, calib = landmarker["files"], landmarker["train"].x[:50]
    with pytest.raises(InvalidInputError, match="converter quantizes a Keras model"):
        tfcompress.quantize(files["float"], engine="converter", representative_data=calib)
    already = landmarker["int8"]["float"].model_content
    with pytest.raises(UnsupportedModelError, match="already quantized"):
        tfcompress.quantize(already, representative_data=calib)
    with pytest.raises(InvalidInputError, match="matches no op"):
        tfcompress.quantize(files["float"], rules=[{"pattern": "nope", "mode": "float"}],
                            representative_data=calib)  # fmt: skip
    with pytest.raises(InvalidInputError, match="made by litert-quantizer"):
        tfcompress.quantize(landmarker["model"], recipe="int4-weights", engine="converter")
    with pytest.raises(InvalidInputError, match="can only keep ops float"):
        tfcompress.quantize(landmarker["model"], rules=[{"pattern": "neck", "mode": "int16"}],
                            engine="converter", representative_data=calib)  # fmt: skip
    with pytest.raises(InvalidInputError, match="uint8"):
        tfcompress.quantize(files["float"], input_type="uint8", representative_data=calib)
    monkeypatch.setitem(sys.modules, "litert_quantizer.quantizer", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'tfcompress\[litert"):
        tfcompress.quantize(files["float"], representative_data=calib)


def test_cli_quantizes_a_tflite_with_rules_and_layer_errors(landmarker, tmp_path, capsys) -> None:
    files, out = landmarker["files"], tmp_path / "q.tflite"
    code = main([
        "quantize", str(files["mediapipe"]), "--data", str(files["calib"]), "--out", str(out),
        "--rules", "FULLY_CONNECTED:presence=int16", "--layer-errors", "--json",
    ])  # fmt: skip
    assert code == 0 and out.is_file()
    payload = json.loads(capsys.readouterr().out)
    assert payload["engine"] == "litert-quantizer"
    assert payload["recipe"]["rules"][0]["op_type"] == "FULLY_CONNECTED"
    assert any("deprecated_builtin_code" in n for n in payload["notes"])
    worst = payload["layer_errors"]["tensors"][0]
    assert set(worst) == {"tensor", "op_type", "mode", "snr_db", "cosine", "rmse", "max_abs"}
    assert main(["quantize", "--list-recipes"]) == 0
    listing = capsys.readouterr().out
    assert "int4-weights  litert-quantizer" in listing
    assert "int8          converter, litert-quantizer" in listing
    code = main(["quantize", str(files["float"]), "--engine", "converter", "--out",
                 str(tmp_path / "c.tflite")])  # fmt: skip
    assert code == 2 and not (tmp_path / "c.tflite").exists()


def test_a_tflite_quantizes_without_tensorflow(landmarker, tmp_path) -> None:
    out = tmp_path / "q.tflite"
    script = (
        "import sys, tfcompress\n"
        f"r = tfcompress.quantize({str(landmarker['files']['mediapipe'])!r}, recipe='int8',\n"
        f"    representative_data={str(landmarker['files']['calib'])!r})\n"
        f"r.save({str(out)!r})\n"
        "print('tensorflow' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "False"
    assert read_tflite(out.read_bytes()).subgraphs


def test_compress_takes_a_tflite_end_to_end(landmarker, tmp_path, capsys) -> None:
    files, out = landmarker["files"], tmp_path / "best.tflite"
    code = main([
        "compress", str(files["float"]), "--data", str(files["calib"]), "--eval",
        str(files["test"]), "--max-drop", "0.01", "--out", str(out), "--json",
    ])  # fmt: skip
    payload = json.loads(capsys.readouterr().out)
    names = [a["name"] for a in payload["attempts"]]
    assert names[0] == "int8" and code == 0 and out.is_file()
    assert all(a["recipe"].get("engine") == "litert-quantizer" for a in payload["attempts"])
    assert payload["chosen"]["status"] == "passed"


def test_keras_and_its_exported_tflite_quantize_alike(trained_cnn, mnist_split, tmp_path) -> None:
    exported = tmp_path / "cnn.tflite"
    trained_cnn.export(str(exported), format="litert", verbose=False)
    calib, test = mnist_split.train.x[:200], mnist_split.test
    from_keras = tfcompress.quantize(trained_cnn, engine="litert-quantizer",
                                     representative_data=calib, layer_errors=True)  # fmt: skip
    from_file = tfcompress.quantize(exported, representative_data=calib)
    converter = tfcompress.quantize(trained_cnn, representative_data=calib, layer_errors=True)
    int4 = tfcompress.quantize(exported, recipe="int4-weights")
    scores = tfcompress.evaluate(
        {
            "float": trained_cnn,
            "keras": from_keras.model,
            "file": from_file.model,
            "converter": converter.model,
            "int4": int4.model,
        },
        test,
    )
    assert abs(scores["keras"].score - scores["file"].score) <= 0.005
    assert abs(scores["keras"].score - scores["converter"].score) <= 0.01
    assert from_keras.size_bytes <= converter.size_bytes * 1.01
    assert int4.size_ratio <= 0.16
    assert scores.drop("int4") < 0.05  # measured in benchmarks/engines_compared.py too
    for result in (from_keras, converter):  # either engine's file, measured the same way
        errors = result.layer_errors
        assert errors is not None and len(errors.tensors) >= 4
        assert errors.tensors[0].snr_db == min(t.snr_db for t in errors.tensors)
        assert all(-1.0 <= t.cosine <= 1.0 + 1e-9 for t in errors.tensors)


def test_with_eval_data_both_calibrations_are_scored_and_the_better_kept(landmarker) -> None:
    files, calib, test = landmarker["files"], landmarker["train"].x[:100], landmarker["test"]
    result = tfcompress.quantize(files["float"], representative_data=calib, eval_data=test.x[:200])
    choice = result.calibration
    assert {c.method for c in choice.candidates} == {"min-max", "moving-average"}
    assert choice.measured_on == 200
    best = max(choice.candidates, key=lambda c: c.worst_snr_db)
    assert choice.kept == best.method  # no gate: the best worst-output SNR
    kept = next(c for c in choice.candidates if c.method == choice.kept)
    assert kept.size_bytes == result.size_bytes
    # The kept file is the one scored: its worst output matches what the gate measures.
    report = tfcompress.check_gate(result.reference, result.model, test.x[:200], metrics="snr")
    assert min(v.value for v in report.verdicts) == pytest.approx(kept.worst_snr_db, abs=0.01)
    payload = result.to_dict()["calibration"]
    assert payload["kept"] == choice.kept and len(payload["candidates"]) == 2
    assert f"kept {choice.kept}" in str(result)
    # What made the file is recorded: the replay makes it again, comparing nothing.
    assert result.recipe.calibration == choice.kept == result.config.recipe.calibration
    again = tfcompress.quantize(files["float"], config=result.config, representative_data=calib)
    assert again.model_content == result.model_content and not again.calibration.candidates
    with pytest.raises(InvalidInputError, match="converter calibrates with min/max only"):
        tfcompress.quantize(landmarker["model"], engine="converter", representative_data=calib,
                            recipe=Recipe("int8", calibration="moving-average"))  # fmt: skip
    # Without eval data: the documented default, nothing measured, and it says so.
    plain = landmarker["int8"]["float"]
    assert plain.calibration.kept == "min-max" and not plain.calibration.candidates
    assert "without eval data" in str(plain)


def test_calibration_keep_rule_gate_first_then_margin_then_default() -> None:
    from tfcompress.quantization.engines.calibration import CalibrationCandidate, keep_calibration
    from tfcompress.quantization.methods.report import GateMargin, OutputFidelity

    def cand(method, snrs, gated=False):
        fidelity = tuple(OutputFidelity(f"y{i}", s, None) for i, s in enumerate(snrs))
        gate = tuple(GateMargin(f"y{i}", "snr", "min_snr", s, 20.0, s >= 20, s - 20, s - 20,
                                f"{s - 20:+.2f} dB") for i, s in enumerate(snrs))  # fmt: skip
        return CalibrationCandidate(method, fidelity, gate if gated else (), 1000)

    # Better worst SNR without a gate; with one, only the other passes: the passing one.
    a, b = cand("min-max", (19.0, 60.0), True), cand("moving-average", (21.0, 22.0), True)
    assert keep_calibration((a, b), gated=True)[0] == 1
    # Both pass: the larger worst-output margin, not the larger mean.
    a, b = cand("min-max", (25.0, 60.0), True), cand("moving-average", (27.0, 28.0), True)
    assert keep_calibration((a, b), gated=True)[0] == 1
    # No gate, a tie: the default (min-max), named as such in the reason.
    a, b = cand("min-max", (30.0,)), cand("moving-average", (30.0,))
    index, reason = keep_calibration((b, a))
    assert index == 1 and "min-max" in reason and "plain int8" not in reason


def test_cli_says_which_calibration_it_kept(landmarker, tmp_path, capsys) -> None:
    files, out = landmarker["files"], tmp_path / "q.tflite"
    code = main(["quantize", str(files["float"]), "--data", str(files["calib"]), "--eval",
                 str(files["test"]), "--out", str(out)])  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0 and out.is_file()
    line = next(line for line in text.splitlines() if line.startswith("calibration: kept"))
    assert "min-max" in line and "moving-average" in line and " dB" in line
    # With a gate, the calibration is judged by it, and the JSON says how each one fared.
    code = main(["quantize", str(files["float"]), "--data", str(files["calib"]), "--eval",
                 str(files["test"]), "--min-snr", "10", "--out", str(out), "--force",
                 "--json"])  # fmt: skip
    payload = json.loads(capsys.readouterr().out)["calibration"]
    kept = next(c for c in payload["candidates"] if c["method"] == payload["kept"])
    assert code == 0 and kept["passes"]
    assert {g["threshold_name"] for g in kept["gate"]} == {"min_snr"}


def _conv_zero_point_one(content: bytes) -> bytes:
    """The int8 file with its first CONV_2D's weight zero points set to 1: structurally valid,
    and what LiteRT Quantizer itself writes for some real files; LiteRT refuses to prepare it."""
    from ai_edge_litert.tools import flatbuffer_utils
    from litert_quantizer.utils import tfl_flatbuffer_utils

    model = tfl_flatbuffer_utils.read_model(bytearray(content))
    graph = model.subgraphs[0]
    for op in graph.operators:
        code = model.operatorCodes[op.opcodeIndex]
        if max(code.builtinCode, code.deprecatedBuiltinCode) == 3:  # CONV_2D
            weights = graph.tensors[op.inputs[1]].quantization
            weights.zeroPoint = np.ones_like(weights.zeroPoint)
            break
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def test_an_unrunnable_quantizer_output_names_the_op_and_a_rule_that_works(
    landmarker, tmp_path, monkeypatch, capsys
) -> None:
    import re

    import tfcompress._child as child
    from tfcompress.errors import ConversionError, ModelLoadError
    from tfcompress.models import load_model

    files = landmarker["files"]
    broken = _conv_zero_point_one(landmarker["int8"]["float"].model_content)
    # A structurally valid file LiteRT cannot prepare: the op and the cause, not "corrupt".
    (tmp_path / "broken.tflite").write_bytes(broken)
    with pytest.raises(ModelLoadError) as loaded:
        load_model(tmp_path / "broken.tflite")
    assert "CONV_2D" in str(loaded.value) and "zero_point" in str(loaded.value)
    assert "broken.tflite: it is already quantized (int8" in str(loaded.value)  # said first
    assert "corrupt" not in str(loaded.value) and "re-export" not in str(loaded.value)
    # LiteRT Quantizer writing such a file: the op, LiteRT's reason and a --rules for it.
    real = child.call

    def writes_broken(target, *args, **kwargs):
        if target.endswith(":_run_here"):
            return {"min-max": broken}
        return real(target, *args, **kwargs)

    monkeypatch.setattr(child, "call", writes_broken)
    with pytest.raises(ConversionError) as raised:
        tfcompress.quantize(files["float"], representative_data=landmarker["train"].x[:50])
    message = str(raised.value)
    assert "LiteRT Quantizer produced an int8 model LiteRT cannot run (CONV_2D '" in message
    assert "zero_point" in message and "corrupt" not in message
    assert "--engine converter" not in message  # refused for a .tflite input
    rule = re.search(r"--rules '([^']+)'", message).group(1)
    monkeypatch.setattr(child, "call", real)
    # Followed, the advice works: that one CONV_2D stays float and the file runs.
    out = tmp_path / "fixed.tflite"
    code = main(["quantize", str(files["float"]), "--data", str(files["calib"]), "--rules", rule,
                 "--out", str(out), "--json"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["float_ops"] == ["CONV_2D"]


def test_gate_on_a_valid_file_litert_aborts_on_names_no_corruption(
    landmarker, tmp_path, monkeypatch, capsys
) -> None:
    # An int8 LSTM makes LiteRT abort (malloc_consolidate) on a valid file minutes after
    # tfcompress wrote it: stood in for by a probe child that aborts.
    from tfcompress.models import probe

    files = landmarker["files"]
    written = tmp_path / "int8.tflite"
    written.write_bytes(landmarker["int8"]["float"].model_content)
    probe.clear_cache()
    monkeypatch.setattr(probe, "CHILD_TARGET", "_child_fakes:abort")
    try:
        code = main(["gate", str(files["float"]), str(written), "--eval", str(files["test"])])
    finally:
        monkeypatch.undo()
        probe.clear_cache()
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and "cannot run it (crashed in" in error and "SIGABRT" in error
    assert "corrupt" not in error and "re-export" not in error


def _computed_weights_tflite() -> bytes:
    """Two CONV_2D whose weights are computed in the graph (scaled by the input's mean): a
    real class LiteRT Quantizer quantizes into a file LiteRT cannot prepare (it takes such
    weights for an activation: a non-zero weight zero point), as on MediaPipe-style face
    detectors."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    w1 = tf.constant(rng.standard_normal((3, 3, 3, 8)).astype(np.float32))
    w2 = tf.constant(rng.standard_normal((3, 3, 8, 8)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([1, 16, 16, 3], tf.float32)])
    def detect(x):
        scale = tf.sigmoid(tf.reduce_mean(x))
        h = tf.nn.relu(tf.nn.conv2d(x, w1 * scale, 1, "SAME"))
        return {"scores": tf.nn.conv2d(h, w2 * scale, 1, "SAME")}

    concrete = detect.get_concrete_function()
    return tf.lite.TFLiteConverter.from_concrete_functions([concrete], detect).convert()


def test_every_op_litert_cannot_run_is_named_at_once_and_the_printed_rule_works(
    tmp_path, capsys
) -> None:
    import shlex

    model, calib = tmp_path / "computed_weights.tflite", tmp_path / "calib.npz"
    model.write_bytes(_computed_weights_tflite())
    np.savez(calib, x=np.random.default_rng(1).random((16, 16, 16, 3), dtype=np.float32))
    out = tmp_path / "int8.tflite"
    argv = ["quantize", str(model), "--data", str(calib), "--out", str(out), "--force"]
    code = main(argv)
    error = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists() and len(error.splitlines()) == 1, error
    # Both CONV_2D at once (LiteRT names only the first), checked by quantizing again.
    assert error.count("CONV_2D '") == 2 and "zero_point" in error
    assert "with these 2 ops float the file runs (quantized again and run to check)" in error
    flags = shlex.split(error.split("add ", 1)[1].rsplit(" to quantize", 1)[0])
    assert flags[::2] == ["--rules"]  # one rule keeps both
    # Pasted back into the same command, exactly as printed: it runs.
    code = main([*argv, *flags, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert json.loads(captured.out)["float_ops"] == ["CONV_2D", "CONV_2D"]
    assert out.exists()
