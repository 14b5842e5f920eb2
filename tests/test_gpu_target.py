"""The gpu target: its rules, its static check, LiteRT's failures told apart, quantize's exit.

CI has no GPU: the static check and the message selection are tested on their own (LiteRT's
error texts fed in); the tests marked ``gpu`` compile on the GPU where LiteRT finds one and
check the static verdict where it finds none.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from _shared import kernel_atol

import tfcompress
from tfcompress.cli import main
from tfcompress.errors import BackendUnavailableError, InvalidInputError, UnsupportedModelError
from tfcompress.quantization import Recipe
from tfcompress.quantization.config import PTQConfig
from tfcompress.runtime.gpu_diagnosis import NativeLog, delegate_cpu_ops, diagnose, failure_kind
from tfcompress.runtime.gpu_support import gpu_support

SHAPE_OPS = {"SHAPE", "STRIDED_SLICE", "PACK"}  # what Keras makes of Flatten at a dynamic batch
REFUSED_SHAPE_OPS = {"SHAPE", "STRIDED_SLICE", "RESHAPE"}  # ML Drift takes an int32 PACK

# LiteRT 2.3.0 on a machine without a GPU (recorded on this project's CPU machines): the
# exception says nothing, the native log says why.
LITERT_ERROR = RuntimeError(
    "ERROR: [./litert/cc/litert_compiled_model.h:1961]\n"
    "└ ERROR: [litert/runtime/compiled_model.cc:1036]"
)
NO_DEVICE_LOG = """\
INFO: [gpu_registry.cc:138] Dynamically loaded GPU accelerator(libLiteRtWebGpuAccelerator.so) registered.
INFO: [delegate_webgpu.cc:342] Create WebGPU environment (use_low_power=0, enable_host_mapped_pointer=1)
ERROR: [delegate_webgpu.cc:359] Failed to initialize WebGPU environment: INTERNAL: No adapters found
E0000 00:00:1795803831.050664   17178 delegate_webgpu.cc:736] Failed to get or create delegate WebGPU environment: INTERNAL: Failed to initialize WebGPU environment
"""  # noqa: E501
# A GPU that refuses the model: the delegate's partition report (model_builder.cc's
# GetOpsToReplace) and LiteRT's "Failed to modify graph with delegate" (libLiteRt.so).
DELEGATE_FAILED_LOG = """\
ERROR: Following operations are not supported by GPU delegate:
SHAPE: Operation is not supported.
STRIDED_SLICE: STRIDED_SLICE supports for 3 or 4 dimensional tensors only.
7 operations will run on the GPU, and the remaining 4 operations will run on the CPU.
ERROR: Failed to modify graph with delegate
"""


@pytest.fixture(scope="module")
def cnn_files(trained_cnn):
    """The demo CNN at its dynamic batch (Keras' Flatten: SHAPE...) and at a static batch of 1."""
    return {
        "dynamic": tfcompress.quantize(trained_cnn, recipe="float32").model_content,
        "static": tfcompress.quantize(
            trained_cnn, recipe=Recipe("float32", static_batch=1)
        ).model_content,
    }


def test_static_check_refuses_the_dynamic_batch_flatten_and_takes_the_static_file(cnn_files):
    dynamic = gpu_support(cnn_files["dynamic"])
    assert not dynamic.compatible and dynamic.verdict == "refused"  # a dynamic-size RESHAPE
    assert [t.op for t in dynamic.dynamic_tensors] == ["RESHAPE"]
    assert {op.op for op in dynamic.cpu_ops} >= REFUSED_SHAPE_OPS
    assert all(op.from_dynamic_shape for op in dynamic.cpu_ops)  # all of them: a static batch
    assert [shape[0] for _, shape in dynamic.dynamic_inputs] == [-1]
    assert "--static-batch" in dynamic.fix() and "--target gpu" in dynamic.fix()
    static = gpu_support(cnn_files["static"])
    assert static.compatible and static.cpu_ops == () and static.fix() is None
    assert static.dynamic_inputs == ()


def test_litert_failures_are_told_apart_by_what_litert_wrote(cnn_files):
    assert failure_kind(f"{NO_DEVICE_LOG}\n{LITERT_ERROR}") == "no_device"
    assert failure_kind(f"{DELEGATE_FAILED_LOG}\n{LITERT_ERROR}") == "delegate_failed"
    assert failure_kind(str(LITERT_ERROR)) == "unknown"
    assert delegate_cpu_ops(DELEGATE_FAILED_LOG) == [
        "SHAPE: Operation is not supported.",
        "STRIDED_SLICE: STRIDED_SLICE supports for 3 or 4 dimensional tensors only.",
    ]

    def message(log: str) -> Exception:
        return diagnose("cnn.tflite", cnn_files["dynamic"], LITERT_ERROR, NativeLog(log), "GPU|CPU")

    no_gpu = message(NO_DEVICE_LOG)
    assert isinstance(no_gpu, BackendUnavailableError)
    assert str(no_gpu).startswith("no GPU: LiteRT found no GPU device")
    assert "'cpu'" in str(no_gpu) and "libvulkan1" in str(no_gpu)
    assert "`tfcompress gpu cnn.tflite` says offline" in str(no_gpu)  # benchmark --backends gpu
    refused = message(DELEGATE_FAILED_LOG)  # a GPU is here: the ops at fault and the fix
    assert isinstance(refused, UnsupportedModelError)
    text = str(refused)
    assert not text.startswith("no GPU") and "a GPU is here" in text
    assert all(f"{op} (op " in text for op in REFUSED_SHAPE_OPS) and "dynamic batch on" in text
    assert "whole graph is refused" in text
    assert "--target gpu" in text and "--static-batch 1" in text
    unknown = message("ERROR: [compiled_model.cc:1036] something else")
    assert isinstance(unknown, BackendUnavailableError)
    assert not str(unknown).startswith("no GPU") and "not say whether a GPU" in str(unknown)
    assert "--static-batch" in str(unknown)  # the static check still says what it finds


def test_gpu_rules_default_to_float16_at_a_static_batch_and_change_no_other_target():
    config = PTQConfig.from_options(target="gpu")
    assert (config.recipe.name, config.recipe.static_batch) == ("float16", 1)
    chosen = PTQConfig.from_options(target="gpu", recipe="int8", static_batch=8)
    assert (chosen.recipe.name, chosen.recipe.static_batch) == ("int8", 8)
    assert PTQConfig.from_options(target="gpu", recipe="float32").recipe.static_batch == 1
    with pytest.raises(InvalidInputError, match="float16 or float32 or int8"):
        PTQConfig.from_options(target="gpu", recipe="dynamic")
    for target in ("cpu", "edgetpu", None):
        assert PTQConfig.from_options(target=target).recipe.name == "int8"
    assert PTQConfig.from_options(target="cpu").recipe.static_batch is None
    with pytest.raises(InvalidInputError, match="static batch of 1"):
        PTQConfig.from_options(target="edgetpu", static_batch=8)


@pytest.mark.gpu
def test_quantize_for_the_gpu_folds_the_shape_ops_and_checks_the_file(trained_cnn):
    result = tfcompress.quantize(trained_cnn, target="gpu")
    ops = set(tfcompress.inspect_model(result.model_content).op_histogram)
    assert not ops & SHAPE_OPS, ops
    assert (result.recipe.name, result.recipe.static_batch) == ("float16", 1)
    verdict = result.target_verdict
    assert verdict.compatible and result.to_dict()["gpu"]["compatible"] is True
    if verdict.checked == "static":  # no GPU here: said, with LiteRT's reason
        assert "no GPU" in verdict.why_static and verdict.fully_accelerated is None
        assert str(verdict).startswith("GPU check (static: no GPU here)")
    else:  # compiled on the GPU here: LiteRT's own word
        assert verdict.fully_accelerated is True and verdict.cpu_ops == ()


@pytest.mark.gpu
def test_cli_quantize_for_the_gpu_fails_a_file_the_gpu_cannot_take_whole(tmp_path, capsys):
    """A char LSTM: an int32 embedding lookup and an LSTM kernel the GPU does not have."""
    from tfcompress.samples.troublemakers import static_batch_lstm

    lstm = tmp_path / "lstm.keras"
    static_batch_lstm().save(lstm)
    out = tmp_path / "lstm.tflite"
    code = main(["quantize", str(lstm), "--target", "gpu", "--out", str(out), "--json"])
    captured = capsys.readouterr()
    payload = json.loads(captured.out)
    assert code == 1 and out.exists()  # the check failed; the file is still written
    assert f"{out} was still written" in captured.err
    assert payload["recipe"]["name"] == "float16" and payload["gpu"]["compatible"] is False
    failure = payload["target_failure"]
    assert "would not run whole on the GPU" in failure and "fix: " in failure
    assert "\n" not in failure
    refused = {op["op"] for op in payload["gpu"]["static_check"]["cpu_ops"]}
    assert "GATHER" in refused and not any(
        op["from_dynamic_shape"] for op in payload["gpu"]["static_check"]["cpu_ops"]
    ), refused


@pytest.mark.gpu
def test_cli_quantize_for_the_gpu_passes_the_demo_cnn(model_files, tmp_path, capsys):
    out = tmp_path / "cnn_gpu.tflite"
    code = main(["quantize", str(model_files["keras3"]), "--target", "gpu", "--out", str(out),
                 "--json"])  # fmt: skip
    payload = json.loads(capsys.readouterr().out)
    assert code == 0 and payload["target_failure"] is None
    assert payload["gpu"]["compatible"] is True and payload["gpu"]["checked"] in ("gpu", "static")


@pytest.mark.gpu
def test_gpu_backend_names_the_ops_at_fault_or_says_no_gpu(cnn_files, mnist_split):
    """The dynamic-batch CNN on a machine with a GPU is not "no GPU"."""
    from tfcompress.models import TFLiteModel
    from tfcompress.runtime import create_runner

    dynamic = TFLiteModel(cnn_files["dynamic"], label="cnn_dynamic.tflite", verified=True)
    try:
        create_runner(dynamic, backend="gpu").close()
    except BackendUnavailableError as error:  # no GPU here
        assert str(error).startswith("no GPU: LiteRT found no GPU device"), error
        return
    except UnsupportedModelError as error:  # a GPU refused it: the ops and the fix
        assert "SHAPE (op" in str(error) and "--static-batch 1" in str(error)
    static = TFLiteModel(cnn_files["static"], label="cnn_b1.tflite", verified=True)
    x = mnist_split.test.x[:8]
    with create_runner(static, backend="cpu") as cpu, create_runner(static, backend="gpu") as gpu:
        assert gpu.details()["fully_accelerated"] is True
        expected = cpu.predict(x)  # the GPU rounds each op's inputs and output to fp16
        ops = sum(tfcompress.inspect_model(static.content).op_histogram.values())
        atol = kernel_atol(expected, terms=2 * ops, dtype="float16")
        np.testing.assert_allclose(gpu.predict(x), expected, atol=atol)


@pytest.mark.gpu
def test_compress_for_the_gpu_ranks_by_its_latency_or_says_it_ranked_by_size(
    model_files, tmp_path, capsys
):
    out = tmp_path / "cnn_gpu.tflite"
    code = main(["compress", str(model_files["keras3"]), "--data", str(model_files["calib"]),
                 "--eval", str(model_files["test"]), "--max-drop", "0.02", "--target", "gpu",
                 "--out", str(out), "--json"])  # fmt: skip
    payload = json.loads(capsys.readouterr().out)
    assert code == 0 and payload["passed"], payload["stop_reason"]
    assert payload["config"]["objective"] is None  # none named: the target's own
    ops = set(tfcompress.inspect_model(out.read_bytes()).op_histogram)
    assert not ops & SHAPE_OPS, ops  # every rung made at the GPU's static batch
    verdicts = [a["gpu"] for a in payload["attempts"] if a["status"] == "passed"]
    assert verdicts and all(v["compatible"] for v in verdicts)
    if all(v["checked"] == "static" for v in verdicts):  # LiteRT found no GPU here
        assert payload["objective"] == "size" and payload["gate"]["backend"] == "cpu"
        assert payload["findings"][0].startswith("ranked by size, not latency: no GPU")
    else:  # ranked by the GPU's latency, gated there
        assert payload["objective"] == "latency" and payload["gate"]["backend"] == "gpu"
        assert payload["chosen"]["latency_ms"] is not None
        assert payload["findings"][0].startswith("ranked by latency on the gpu backend")


@pytest.mark.gpu
def test_select_for_the_gpu_times_on_it_or_says_it_ranked_without_latency(mnist_split, tmp_path):
    from tfcompress.selection import Budgets, select_model
    from tfcompress.selection.executors import InlineExecutor

    result = select_model(
        train_data=(mnist_split.train.x[:300], mnist_split.train.y[:300]),
        eval_data=(mnist_split.test.x[:200], mnist_split.test.y[:200]),
        budgets=Budgets(max_size=700_000, target="gpu"),
        families=("mobilenet_v1",),
        width_multipliers=(0.25,),
        resolutions=(32,),
        executor=InlineExecutor(),
        workdir=tmp_path,
        epochs=1,
        latency_runs=10,
        latency_seconds=0.1,
    )
    [record] = result.candidates
    assert result.best is not None and result.best.name == record.name
    if record.latency_ms is None:  # no GPU here: ranked without latency, and said
        [note] = result.notes
        assert "no GPU" in note and "ranked by accuracy, then size" in note
        assert result.pareto == (record.name,)  # the front is accuracy and size
    else:  # timed on the GPU (per sample, at the target's static batch)
        assert result.notes == () and record.latency_backend == "gpu"
