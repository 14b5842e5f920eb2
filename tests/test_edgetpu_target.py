"""``quantize(..., target="edgetpu")``: the compiler's recipe, the linter, and a compiler if any.

The compiler is never installed here: its runs are fake ``edgetpu_compiler`` scripts (from
test_edgetpu_compiler.py) printing genuine Coral logs, or a log in the same format whose
counts match the model, to see the linter and the compiler agree.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from test_edgetpu_compiler import _FAILING, _WORKING, LOG_21_SPLIT, _fake_compiler

import tfcompress
from tfcompress.cli import main
from tfcompress.errors import BackendUnavailableError, InvalidInputError
from tfcompress.quantization import PTQConfig, Recipe
from tfcompress.runtime.edgetpu import count_tpu_ops
from tfcompress.targets.edgetpu.target import NOT_INSTALLED, edgetpu_verdict

posix_only = pytest.mark.skipif(os.name != "posix", reason="fake compilers are scripts")

# A log in the format of LOG_14_ALL_MAPPED (compiler 14.1, every op mapped), written for the
# CNN below: its 10 ops, all mapped, so the compiler and the linter agree.
_AGREEING_LOG = """\
Edge TPU Compiler version 14.1.317412892
Model compiled successfully in 98 ms.
Input model: small_cnn.tflite
Input size: 227.30KiB
Output model: small_cnn_edgetpu.tflite
Output size: 300.12KiB
On-chip memory used for caching model parameters: 240.25KiB
On-chip memory remaining for caching model parameters: 7.75MiB
Off-chip memory used for streaming uncached model parameters: 0.00B
Number of Edge TPU subgraphs: 1
Total number of operations: 10
Operation log: small_cnn_edgetpu.log
Operator                       Count      Status
QUANTIZE                       2          Mapped to Edge TPU
CONV_2D                        2          Mapped to Edge TPU
MAX_POOL_2D                    2          Mapped to Edge TPU
RESHAPE                        1          Mapped to Edge TPU
FULLY_CONNECTED                2          Mapped to Edge TPU
SOFTMAX                        1          Mapped to Edge TPU
"""
_AGREEING = f"""
args = sys.argv[1:]
out = pathlib.Path(args[args.index("-o") + 1])
model = pathlib.Path(args[-1])
(out / (model.stem + "_edgetpu.tflite")).write_bytes(model.read_bytes() + b"EDGETPU")
sys.stdout.write({_AGREEING_LOG!r})
"""


@pytest.fixture(scope="module")
def cnn():
    from tfcompress.samples.cnn import small_cnn

    return small_cnn(flavour="keras3")


@pytest.fixture(scope="module")
def calibration() -> np.ndarray:
    return np.random.default_rng(0).random((16, 28, 28, 1), dtype=np.float32)


@pytest.fixture
def no_compiler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    return folder


@pytest.fixture(scope="module")
def edgetpu_result(cnn, calibration):
    old = os.environ["PATH"]
    os.environ["PATH"] = ""  # no compiler, whatever this machine has
    try:
        return tfcompress.quantize(cnn, representative_data=calibration, target="edgetpu")
    finally:
        os.environ["PATH"] = old


def _io_details(content: bytes) -> tuple[list[dict], list[dict]]:
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_content=content)
    return interpreter.get_input_details(), interpreter.get_output_details()


def test_edgetpu_recipe_is_uint8_at_batch_one(edgetpu_result) -> None:
    recipe = edgetpu_result.recipe
    assert (recipe.name, recipe.input_type, recipe.output_type, recipe.static_batch) == (
        "int8",
        "uint8",
        "uint8",
        1,
    )
    inputs, outputs = _io_details(edgetpu_result.model_content)
    for detail in (*inputs, *outputs):
        assert detail["dtype"] == np.uint8
        assert detail["shape_signature"][0] == 1  # static: no -1 batch left for the compiler
        assert -1 not in detail["shape_signature"]
    assert Recipe.from_json(recipe.to_json()) == recipe


def test_result_carries_the_linter_and_says_no_compiler(edgetpu_result) -> None:
    verdict = edgetpu_result.edgetpu
    assert verdict.linter.compatible and verdict.linter.segments_predicted == 1
    assert verdict.compiler is None and verdict.trusted == "linter"
    assert verdict.compiler_status == NOT_INSTALLED == "edgetpu_compiler not installed"
    data = json.loads(json.dumps(edgetpu_result.to_dict()))
    assert data["edgetpu"]["compiler_status"] == "edgetpu_compiler not installed"
    assert data["edgetpu"]["linter"]["compatible"] is True
    assert data["recipe"]["static_batch"] == 1
    assert PTQConfig.from_dict(data["config"]) == edgetpu_result.config  # replayable
    assert "edgetpu_compiler not installed" in str(edgetpu_result)
    with pytest.raises(InvalidInputError, match="no compiled model"):
        verdict.save_compiled("never.tflite")


def test_the_model_still_runs_and_agrees(edgetpu_result, calibration) -> None:
    with tfcompress.create_runner(edgetpu_result.model) as runner:
        quantized = runner.predict(calibration[:4])  # a batch of 1 at a time
    with tfcompress.create_runner(edgetpu_result.reference) as runner:
        reference = runner.predict(calibration[:4])
    assert quantized.shape == reference.shape == (4, 10)
    assert np.abs(quantized - reference).max() < 0.1


def test_int8_io_is_selectable(cnn, calibration, no_compiler: Path) -> None:
    result = tfcompress.quantize(
        cnn, representative_data=calibration, target="edgetpu", input_type="int8"
    )
    assert (result.recipe.input_type, result.recipe.output_type) == ("int8", "int8")
    inputs, _ = _io_details(result.model_content)
    assert inputs[0]["dtype"] == np.int8


def test_static_batch_for_tf_keras_and_saved_models(tmp_path: Path, calibration) -> None:
    from tfcompress.samples.cnn import small_cnn

    tf_keras_cnn = small_cnn(flavour="tf_keras")
    saved = tmp_path / "saved"
    small_cnn(flavour="keras3").export(str(saved), format="tf_saved_model", verbose=False)
    for model in (tf_keras_cnn, str(saved)):
        result = tfcompress.quantize(
            model, representative_data=calibration, recipe=Recipe("int8", static_batch=1)
        )
        inputs, outputs = _io_details(result.model_content)
        assert [list(d["shape_signature"]) for d in inputs] == [[1, 28, 28, 1]]
        assert [list(d["shape_signature"]) for d in outputs] == [[1, 10]]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"recipe": "dynamic"}, "full-integer models only"),
        ({"integer_only": False}, "float fallback leaves ops in float"),
        ({"input_type": "float32"}, "takes uint8 or int8 inputs"),
        ({"format": "onnx"}, "makes a .tflite"),
        ({"target": "tpu9"}, "unknown target 'tpu9'; choose one of cpu, edgetpu, gpu"),
        ({"recipe": Recipe("int8", static_batch=4)}, "static batch of 1, not static_batch=4"),
    ],
)
def test_refusals(cnn, calibration, options: dict, message: str) -> None:
    options = {"target": "edgetpu", **options}
    with pytest.raises(InvalidInputError, match=message):
        tfcompress.quantize(cnn, representative_data=calibration, **options)


def test_compiler_without_target_is_refused(cnn, calibration) -> None:
    with pytest.raises(InvalidInputError, match="applies to --target edgetpu only"):
        tfcompress.quantize(cnn, representative_data=calibration, compiler="edgetpu_compiler")


@pytest.mark.parametrize("static_batch", [0, -1, 1.5, True])
def test_bad_static_batch(static_batch: object) -> None:
    with pytest.raises(InvalidInputError, match="static_batch must be a positive integer"):
        Recipe("int8", static_batch=static_batch)  # type: ignore[arg-type]


@posix_only
def test_agreeing_compiler_is_parsed_into_the_verdict(edgetpu_result, no_compiler: Path) -> None:
    _fake_compiler(no_compiler, _AGREEING)
    verdict = edgetpu_verdict(edgetpu_result.model_content)
    assert verdict.compiler_status == "compiled" and verdict.trusted == "compiler"
    assert verdict.compiler.log.compiler_version == "14.1.317412892"
    assert (verdict.compiler.log.ops_mapped, verdict.compiler.log.ops_total) == (10, 10)
    assert verdict.disagreements == ()
    assert verdict.compatible
    assert verdict.compiler.compiled.endswith(b"EDGETPU")


@posix_only
def test_disagreement_shows_both_and_trusts_the_compiler(edgetpu_result, no_compiler) -> None:
    _fake_compiler(no_compiler, _WORKING)  # genuine log: 83 of 93 ops, 1 subgraph
    verdict = edgetpu_verdict(edgetpu_result.model_content)
    assert verdict.disagreements == (
        "ops mapped: linter 10 of 10, compiler 83 of 93",
        "compatible: linter yes, compiler not every op mapped",
    )
    assert not verdict.compatible  # the compiler's word, not the linter's
    text = str(verdict)
    assert "Edge TPU linter: 10 of 10 ops predicted" in text
    assert "trusting the compiler" in text
    assert verdict.to_dict()["trusted"] == "compiler"


@posix_only
def test_cli_writes_the_compiled_model_next_to_out(
    model_files: dict[str, Path], tmp_path: Path, no_compiler: Path, capsys
) -> None:
    _fake_compiler(no_compiler, _AGREEING)
    out = tmp_path / "cnn_int8.tflite"
    argv = ["quantize", str(model_files["keras3"]), "--target", "edgetpu"]
    code = main([*argv, "--data", str(model_files["calib"]), "--out", str(out), "--json"])
    assert code == 0
    payload = json.loads(capsys.readouterr().out)
    compiled = tmp_path / "cnn_int8_edgetpu.tflite"
    assert payload["compiled_output"] == str(compiled)
    assert compiled.read_bytes() == out.read_bytes() + b"EDGETPU"
    assert payload["edgetpu"]["compiler"]["ops_mapped"] == 10
    assert payload["recipe"]["input_type"] == "uint8"
    assert compiled.with_suffix(".log").read_text().startswith("Edge TPU Compiler version")


@posix_only
def test_cli_failing_compiler_exits_2_and_writes_nothing(
    model_files: dict[str, Path], tmp_path: Path, no_compiler: Path, capsys
) -> None:
    _fake_compiler(no_compiler, _FAILING)
    out = tmp_path / "cnn_int8.tflite"
    argv = ["quantize", str(model_files["keras3"]), "--target", "edgetpu"]
    code = main([*argv, "--data", str(model_files["calib"]), "--out", str(out)])
    assert code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "Didn't find op for builtin opcode 'QUANTIZE' version '3'" in error
    assert list(tmp_path.glob("*.tflite")) == []


def test_cli_bad_compiler_path_exits_2_before_work(
    model_files: dict[str, Path], tmp_path: Path, capsys
) -> None:
    out = tmp_path / "m.tflite"
    argv = ["quantize", str(model_files["keras3"]), "--target", "edgetpu", "--compiler"]
    code = main(
        [*argv, str(tmp_path / "nope"), "--data", str(model_files["calib"]), "--out", str(out)]
    )
    assert code == 2
    assert "not an executable edgetpu_compiler" in capsys.readouterr().err
    assert not out.exists()


def test_cli_compiler_without_target_exits_2(model_files: dict[str, Path], tmp_path: Path, capsys):
    argv = ["quantize", str(model_files["keras3"]), "--compiler", "edgetpu_compiler"]
    code = main([*argv, "--data", str(model_files["calib"]), "--out", str(tmp_path / "m.tflite")])
    assert code == 2
    assert "applies to --target edgetpu only" in capsys.readouterr().err


def test_bad_compiler_path_in_the_library(cnn, calibration, tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailableError, match="not an executable"):
        tfcompress.quantize(
            cnn, representative_data=calibration, target="edgetpu", compiler=tmp_path / "nope"
        )


# --- the edgetpu backend counts the ops inside the custom op, not the custom-op nodes -------

_COMPILED_GRAPH = ["QUANTIZE", "edgetpu-custom-op", "DEQUANTIZE"]


def test_uncompiled_graph_runs_no_tpu_op() -> None:
    count = count_tpu_ops(["QUANTIZE", "CONV_2D", "SOFTMAX"])
    assert (count.ops, count.segments) == (0, 0)


def test_compiled_graph_counts_the_ops_the_log_states(tmp_path: Path) -> None:
    log = tmp_path / "model2_edgetpu.log"
    log.write_text(LOG_21_SPLIT)  # genuine: 83 of 93 ops on the Edge TPU, one subgraph
    count = count_tpu_ops(_COMPILED_GRAPH, compiler_log=log)
    assert (count.ops, count.segments) == (83, 1)  # not 1, the custom-op node count
    assert str(log) in count.source


def test_log_beside_the_compiled_model_is_found(tmp_path: Path) -> None:
    model = tmp_path / "small_cnn_edgetpu.tflite"
    model.with_suffix(".log").write_text(
        _AGREEING_LOG.replace("Model compiled successfully in 98 ms.\n", "")
    )
    count = count_tpu_ops(_COMPILED_GRAPH, model_path=model)
    assert count.ops == 10  # summed from the operator table: no summary line to read
    assert "operator table" in count.source


def test_without_a_log_the_count_is_unknown_not_the_node_count() -> None:
    count = count_tpu_ops([*_COMPILED_GRAPH, "edgetpu-custom-op"])
    assert count.ops is None and count.segments == 2
    assert "compiler_log=PATH" in count.source


def test_a_log_without_counts_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("Edge TPU Compiler version 16.0.384591198\n")
    with pytest.raises(InvalidInputError, match="no operation count"):
        count_tpu_ops(_COMPILED_GRAPH, compiler_log=log)
