"""The microcontroller target: TFLite Micro's verdict on real models, every call contained.

The MNIST CNN the suite trains once is quantized with ``--target mcu`` (full int8, int8 I/O)
and checked by TFLM on 100 real test digits; small models built here cover the ops TFLM
lacks, a float model, the crashes a too-small arena causes, budgets and their exit codes,
compress, the C array (compiled and run with the system's C++ compiler) and a missing
``tflite-micro``.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tfcompress.cli import main
from tfcompress.targets.mcu.arena import recommended

pytest.importorskip("tflite_micro", reason="tflite-micro is not installed (the mcu extra)")


@pytest.fixture(scope="module")
def mcu_result(trained_cnn, mnist_split):
    """The trained MNIST CNN quantized with target="mcu"."""
    import tfcompress

    return tfcompress.quantize(
        trained_cnn, representative_data=mnist_split.train.x[:300], target="mcu"
    )


@pytest.fixture(scope="module")
def cnn_int8(mcu_result, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mcu") / "mnist_int8.tflite"
    mcu_result.save(out)
    return out


@pytest.fixture(scope="module")
def small_keras(tmp_path_factory):
    """A tiny Keras classifier, saved, and its calibration data."""
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            keras.layers.Conv2D(4, 3, activation="relu"),
            keras.layers.Flatten(),
            keras.layers.Dense(3, activation="softmax"),
        ]
    )
    x = np.random.default_rng(0).random((32, 8, 8, 1), dtype=np.float32)
    folder = tmp_path_factory.mktemp("small")
    model.save(folder / "small.keras")
    np.savez(folder / "calib.npz", x=x)
    return model, x, folder


@pytest.fixture(scope="module")
def digits(mnist_split, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("digits") / "digits.npz"
    np.savez(path, x=mnist_split.test.x[:100])
    return path


@pytest.fixture(scope="module")
def lacking_model(tmp_path_factory) -> Path:
    """A float model with two ops TFLM has no kernel for: SIGN and ATAN2."""
    import tensorflow as tf

    def graph(x):
        return tf.math.atan2(tf.sign(x) + 1.0, x + 2.0) + 1.0

    function = tf.function(graph, input_signature=[tf.TensorSpec((1, 8), tf.float32)])
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function.get_concrete_function()])
    path = tmp_path_factory.mktemp("lacking") / "sign_atan2.tflite"
    path.write_bytes(converter.convert())
    return path


@pytest.fixture(scope="module")
def tiny_int8(tmp_path_factory) -> Path:
    """A one-op int8 model (RELU): an arena of about a kilobyte."""
    import tensorflow as tf

    def calibration():
        for value in np.linspace(-1, 1, 8, dtype=np.float32):
            yield [np.full((1, 4), value, np.float32)]

    function = tf.function(tf.nn.relu, input_signature=[tf.TensorSpec((1, 4), tf.float32)])
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function.get_concrete_function()])
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = calibration
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = converter.inference_output_type = tf.int8
    path = tmp_path_factory.mktemp("tiny") / "relu_int8.tflite"
    path.write_bytes(converter.convert())
    return path


def test_quantize_for_mcu_is_full_int8_and_carries_arena_and_flash(mcu_result, cnn_int8):
    from tfcompress.models.tflite_file import read_tflite

    recipe = mcu_result.recipe
    assert (recipe.name, recipe.input_type, recipe.output_type) == ("int8", "int8", "int8")
    assert recipe.integer_only
    graph = read_tflite(cnn_int8.read_bytes()).subgraphs[0]
    io = [graph.tensors[i].dtype for i in (*graph.inputs, *graph.outputs)]
    assert io == ["int8", "int8"]
    verdict = mcu_result.target_verdict
    assert verdict.compatible and verdict.full_int8
    filed = mcu_result.to_dict()["mcu"]
    assert filed["arena"]["smallest_bytes"] == verdict.arena.smallest > 0
    assert filed["flash_bytes"] == mcu_result.size_bytes + 19


def test_quantize_cli_target_mcu(small_keras, tmp_path, capsys):
    _, _, folder = small_keras
    out = tmp_path / "small_int8.tflite"
    argv = [str(folder / "small.keras"), "--data", str(folder / "calib.npz"), "--out", str(out)]
    assert main(["quantize", *argv, "--target", "mcu", "--json"]) == 0, capsys.readouterr().err
    payload = json.loads(capsys.readouterr().out)
    assert payload["mcu"]["compatible"] and payload["recipe"]["input_type"] == "int8"
    assert payload["mcu"]["arena"]["recommended_bytes"] % 16 == 0
    assert main(["quantize", *argv, "--target", "mcu", "--force", "--input-type", "uint8"]) == 2
    assert "takes int8 inputs and outputs" in capsys.readouterr().err
    # a static batch other than 1 is run as its batch by TFLM's check (it exited 3)
    assert main(["quantize", *argv, "--target", "mcu", "--force", "--static-batch", "2",
                 "--json"]) == 0, capsys.readouterr().err  # fmt: skip
    payload = json.loads(capsys.readouterr().out)
    assert payload["mcu"]["compatible"] and payload["mcu"]["exactness"]["bit_exact"]


def test_quantize_for_mcu_names_the_layer_that_stays_float_and_a_fix_for_the_target(
    tmp_path, capsys
):
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(8), keras.layers.LayerNormalization(name="norm"),
         keras.layers.Dense(3)]
    )  # fmt: skip
    model.save(tmp_path / "ln.keras")
    np.savez(tmp_path / "calib.npz", x=np.random.default_rng(0).random((16, 8), np.float32))
    argv = ["quantize", str(tmp_path / "ln.keras"), "--target", "mcu", "--data",
            str(tmp_path / "calib.npz"), "--out", str(tmp_path / "ln.tflite")]  # fmt: skip
    assert main(argv) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "made by layer 'norm'" in line and "--target mcu runs integer kernels only" in line
    assert "--integer-only" not in line  # a flag the user did not give, the target cannot drop


def test_the_mnist_cnn_runs_in_a_bisected_arena_as_litert_computes_it(cnn_int8, digits):
    import tfcompress.mcu

    report = tfcompress.mcu.check(cnn_int8, sample_data=digits)
    assert report.compatible and report.full_int8 and not report.unsupported
    arena = report.arena
    assert arena.failed == arena.smallest - 1
    assert arena.recommended == recommended(arena.smallest) >= arena.smallest * 1.1
    # TFLM's own record at a generous arena is within a few hundred bytes of the bisection.
    assert abs(arena.recorded.total - arena.smallest) < 1024
    assert arena.recorded.head + arena.recorded.tail == arena.recorded.total
    assert report.flash_bytes == cnn_int8.stat().st_size + 19
    exact = report.exactness
    assert exact.samples == 100 and exact.source == "sample data"
    assert exact.outputs[0].dtype == "int8"
    # Measured over trainings of this CNN: bit-exact, or apart from the first op that differs
    # on, a FULLY_CONNECTED one rounding step apart (the softmax after it can widen that).
    if not exact.within_one_unit:
        assert exact.ops and exact.ops[0].max_abs_difference <= 1, exact.to_dict()
        assert any(f.rule == "mismatch" and exact.ops[0].op in f.fix for f in report.findings)
    payload = json.loads(json.dumps(report.to_dict()))
    assert payload["arena"]["host_estimate"] and payload["arena"]["margin"] == 0.1


def test_the_tflm_backend_scores_what_litert_int8_scores(cnn_int8, mnist_split):
    import tfcompress

    test = mnist_split.test  # 1,250 real digits
    # TFLM requantizes int8 in integers, as LiteRT's built-in kernels do; XNNPACK's float
    # requantization may round a borderline digit the other way (1 of 1,250 flipped on one
    # clean CI run). Against the built-in kernels the scores are the same, digit for digit.
    result = tfcompress.benchmark(
        {"int8": str(cnn_int8)},
        data=(test.x, test.y),
        backends=["cpu", "tflm"],
        batch_sizes=[1],
        backend_options={"cpu": {"use_xnnpack": False}},
    )
    rows = {row.backend: row for row in result.rows}
    assert rows["tflm"].ok and rows["cpu"].ok, [r.status for r in result.rows]
    assert rows["tflm"].accuracy == rows["cpu"].accuracy > 0.9
    assert "not a device latency" in rows["tflm"].details["latency_is"]
    assert any("tflm rows: latency is host time" in note for note in result.notes)


def test_the_bisected_arena_allocates_and_one_byte_less_does_not(tiny_int8):
    from tfcompress.targets.mcu import check
    from tfcompress.targets.mcu.probe import in_child

    content = tiny_int8.read_bytes()
    smallest = check(content).arena.smallest
    assert in_child("load", content, smallest, what="at the smallest").value["allocated"]
    below = in_child("load", content, smallest - 1, what="one byte less")
    assert below.failure is None and not below.value["allocated"]


def test_a_too_small_arena_segfaults_the_child_not_the_caller(tiny_int8):
    from tfcompress.targets.mcu.arena import smallest_arena
    from tfcompress.targets.mcu.probe import in_child

    content = tiny_int8.read_bytes()
    crashed = in_child("load", content, 16, what="an arena of 16 bytes")
    assert crashed.failure.kind == "crash" and crashed.failure.signal == signal.SIGSEGV
    assert "Failed to allocate tail memory" in crashed.log  # TFLM's words survive the crash
    # A bisection whose probes crash counts each crash as too small and goes on in a new child
    # (sizes below ~400 B segfault TFLM on this model; 400 B itself fails cleanly).
    found = smallest_arena(content, 400, name="relu")
    assert found.crashes and all(s == signal.SIGSEGV for _, s in found.crashes)
    assert (found.low, found.high) == (399, 400)


def test_every_op_tflm_lacks_is_named_with_its_index(lacking_model):
    from tfcompress.targets.mcu import check

    report = check(lacking_model)
    assert not report.compatible and report.arena is None
    lacking = {f.op: f.index for f in report.unsupported}
    expected = {name: report.ops.index(name) for name in ("SIGN", "ATAN2")}
    assert lacking == expected, [f.to_dict() for f in report.findings]
    assert all(f.fix for f in report.unsupported)
    rules = {f.rule for f in report.findings}
    assert "float_model" in rules and report.precision == "float32"
    assert "microcontroller deployment needs full int8" in str(report)


def test_a_softmax_tflm_aborts_on_is_named_and_its_crash_contained(tmp_path, capsys):
    import keras

    import tfcompress
    from tfcompress.targets.mcu import check

    # Logits that never vary in calibration: the converter gives the softmax input a scale
    # near 1e-8, below what TFLM's int8 softmax takes (it aborts in prepare: SIGABRT).
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(3, kernel_initializer="zeros"),
         keras.layers.Softmax()]
    )  # fmt: skip
    x = np.random.default_rng(0).random((16, 4), dtype=np.float32)
    content = tfcompress.quantize(model, representative_data=x, target="mcu").model_content
    report = check(content)
    softmax = [f for f in report.unsupported if f.op == "SOFTMAX"]
    assert softmax and "too small for TFLM's int8 softmax" in softmax[0].message
    (crash,) = [f for f in report.findings if f.rule == "crash"]
    assert crash.signal == signal.SIGABRT and "SOFTMAX" in crash.fix
    assert not report.compatible
    model.save(tmp_path / "flat.keras")
    np.savez(tmp_path / "calib.npz", x=x)
    argv = [str(tmp_path / "flat.keras"), "--data", str(tmp_path / "calib.npz")]
    out = tmp_path / "flat_mcu.tflite"
    assert main(["quantize", *argv, "--target", "mcu", "--out", str(out)]) == 1
    assert "TFLite Micro cannot run the artifact" in capsys.readouterr().err and out.is_file()


def test_a_difference_is_located_at_the_op_where_tflm_and_litert_part(tiny_int8):
    from tfcompress.models.tflite_file import read_tflite
    from tfcompress.targets.mcu.exactness import against_litert, sample_inputs
    from tfcompress.targets.mcu.probe import in_child

    content = tiny_int8.read_bytes()
    samples, described = sample_inputs(content, "relu", None)
    ran = in_child("load", content, 4096, what="run", samples=samples, outputs=1)
    mine = [ran.value["outputs"][0].copy()]
    mine[0].flat[0] += 2  # two quantized units off, as a broken kernel would be
    from tfcompress.models.loading import TFLiteModel
    from tfcompress.models.signature import tflite_io_tensors

    _, outputs = tflite_io_tensors(TFLiteModel(content, verified=True))
    exactness, findings = against_litert(
        content, samples, described, outputs, mine, read_tflite(content), arena=4096,
        name="relu", timeout=None,
    )  # fmt: skip
    assert exactness.outputs[0].max_abs_difference == 2 and not exactness.within_one_unit
    assert exactness.ops == ()  # rerun whole, TFLM and LiteRT agree op by op
    assert [f.rule for f in findings] == ["mismatch"]


def test_a_crash_in_the_tflm_child_is_a_finding(tmp_path, capsys):
    from _tflite_craft import build, op, schema, tensor

    from tfcompress.targets.mcu import check

    # TFLM's int8 SOFTMAX really aborts in prepare on an input scale this small.
    options = schema().SoftmaxOptionsT()
    options.beta = 1.0
    tiny_scale = tmp_path / "softmax.tflite"
    tiny_scale.write_bytes(build(
        [tensor([1, 4], scale=1e-30), tensor([1, 4], scale=1 / 256, zero=-128)],
        [op("SOFTMAX", [0], [1], options)],
    ))  # fmt: skip
    report = check(tiny_scale)
    (crash,) = [f for f in report.findings if f.rule == "crash"]
    assert crash.signal == signal.SIGABRT and "SIGABRT" in crash.message
    assert not report.compatible
    assert main(["mcu", str(tiny_scale), "--require-compatible"]) == 1
    assert "SIGABRT" in capsys.readouterr().out


def test_a_hang_in_the_tflm_child_is_a_finding(tiny_int8):
    from tfcompress.targets.mcu import check

    report = check(tiny_int8, timeout_s=0.001)  # the whole check's limit: gone at once
    (hang,) = [f for f in report.findings if f.rule == "hang"]
    assert "0.001 s" in hang.message and not report.compatible


def test_budgets_exit_codes(cnn_int8, tmp_path, capsys, monkeypatch):
    path = str(cnn_int8)
    assert main(["mcu", path, "--max-arena", "64KB", "--max-flash", "256KB"]) == 0
    assert "within the budget" in capsys.readouterr().out
    assert main(["mcu", path, "--max-arena", "8KB", "--max-flash", "100KB", "--json"]) == 1
    captured = capsys.readouterr()
    payload = json.loads(captured.out)
    assert [b["met"] for b in payload["budgets"]] == [False, False]
    assert "over the budget of 8,000 B" in captured.err and "100,000 B" in captured.err
    corrupt = tmp_path / "cut.tflite"
    corrupt.write_bytes(cnn_int8.read_bytes()[:5000])
    assert main(["mcu", str(corrupt)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tfcompress mcu: error:") and len(err.splitlines()) == 1
    assert main(["mcu", path, "--max-arena", "lots"]) == 2


def test_missing_tflite_micro_is_one_line_naming_the_extra(tiny_int8, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tflite_micro", None)  # as if not installed
    assert main(["mcu", str(tiny_int8)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install 'tfcompress[mcu]'" in err
    assert main(["quantize", str(tiny_int8), "--target", "mcu", "--out", "x.tflite"]) == 2
    assert "pip install 'tfcompress[mcu]'" in capsys.readouterr().err


def test_compress_admits_what_tflm_runs_and_ranks_by_arena_and_flash(small_keras):
    import tfcompress
    from tfcompress.targets.base import get_target

    model, x, _ = small_keras
    result = tfcompress.compress(
        model, representative_data=x, eval_data=x, target="mcu", min_agreement=0.0,
        time_budget=3, measure_latency=False,
    )  # fmt: skip
    made = [a for a in result.attempts if a.size_bytes]
    assert made, [a.to_dict() for a in result.attempts]
    assert all(a.verdict_of == "mcu" for a in made)
    verdict = made[0].target_verdict
    assert verdict["compatible"] and verdict["full_int8"]
    assert verdict["arena_bytes"] > 0 and verdict["flash_bytes"] == made[0].size_bytes + 19
    assert result.chosen is not None and result.target == "mcu"
    small = type("A", (), {"target_verdict": {**verdict, "arena_recommended_bytes": 1024}})
    mcu_rank, mcu_refusal = get_target("mcu").rank, get_target("mcu").refusal
    assert mcu_rank(small()) < mcu_rank(made[0])  # a smaller arena ranks first
    assert "no kernel for SIGN" in mcu_refusal({"compatible": False,
                                               "unsupported_ops": ["SIGN"]}, ())  # fmt: skip


def test_select_budgets_measure_arena_and_flash(cnn_int8, lacking_model, capsys):
    import math

    from tfcompress.targets.base import get_target
    from tfcompress.targets.mcu import check

    arena, flash = get_target("mcu").budget_fields
    content = cnn_int8.read_bytes()
    report = check(content)
    assert arena.measure(content) == report.arena.recommended
    assert flash.measure(content) == len(content) + 19
    assert math.isinf(arena.measure(lacking_model.read_bytes()))  # never fits: never trained
    assert main(["select", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--max-arena SIZE" in text and "--max-flash SIZE" in text


def test_export_c_compiles_and_holds_the_model(cnn_int8, tmp_path, capsys):
    compiler = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    out = tmp_path / "model_data"
    assert main(["export-c", str(cnn_int8), "--out", str(out), "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    assert written["array"] == "mnist_int8_tflite" and written["length"] == "mnist_int8_tflite_len"
    assert main(["export-c", str(cnn_int8), "--out", str(out)]) == 2  # exists: --force
    assert main(["export-c", str(cnn_int8), "--out", str(out), "--name", "9x"]) == 2
    if compiler is None:
        pytest.skip("no C++ compiler (g++, c++ or clang++) on PATH to compile the C array")
    size = cnn_int8.stat().st_size
    (tmp_path / "main.cc").write_text(
        '#include <cstdint>\n#include <cstdio>\n#include <cstring>\n#include "model_data.h"\n'
        "int main() {\n"
        "  bool aligned = reinterpret_cast<std::uintptr_t>(mnist_int8_tflite) % 16 == 0;\n"
        '  bool tflite = std::memcmp(mnist_int8_tflite + 4, "TFL3", 4) == 0;\n'
        '  std::printf("%u %d %d\\n", mnist_int8_tflite_len, aligned, tflite);\n'
        "  return 0;\n}\n"
    )
    binary = tmp_path / "model_test"
    subprocess.run(
        [compiler, "-std=c++11", "-Wall", "-Werror", "-o", str(binary), str(tmp_path / "main.cc"),
         f"{out}.cc"], check=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    ran = subprocess.run([str(binary)], capture_output=True, text=True, check=True, timeout=30)
    assert ran.stdout.split() == [str(size), "1", "1"]
    compiled = subprocess.run(
        [compiler, "-std=c++11", "-c", "-o", str(tmp_path / "m.o"), f"{out}.cc"],
        check=True, timeout=120,
    )  # fmt: skip
    assert compiled.returncode == 0


def test_reading_tflms_words():
    from tfcompress.targets.mcu.arena import parse_allocations
    from tfcompress.targets.mcu.c_names import file_identifier
    from tfcompress.targets.mcu.ops import arena_too_small, missing_op, op_refusal

    log = (
        "[RecordingMicroAllocator] Arena allocation total 31744 bytes\n"
        "[RecordingMicroAllocator] Arena allocation head 27040 bytes\n"
        "[RecordingMicroAllocator] Arena allocation tail 4704 bytes\n"
        "[RecordingMicroAllocator] 'TfLiteEvalTensor data' used 552 bytes with alignment "
        "overhead (requested 552 bytes for 23 allocations)\n"
    )
    parsed = parse_allocations(log)
    assert (parsed.total, parsed.head, parsed.tail) == (31744, 27040, 4704)
    assert parsed.sections == (("TfLiteEvalTensor data", 552, 552, 23),)
    assert missing_op("Didn't find op for builtin opcode 'SIGN'\r\n") == "SIGN"
    assert op_refusal("Node RELU (number 0) failed to prepare with status 1") == (
        "RELU",
        0,
        "prepare",
    )
    assert arena_too_small("Failed to resize buffer. Requested: 192, available 136")
    assert file_identifier("my-model.v2.tflite")[0] == "my_model_v2_tflite"
