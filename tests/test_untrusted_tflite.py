"""Untrusted model files: one structural validator, and a probe that contains native crashes.

Each hostile ``.tflite`` is made from a real int8 model by editing one field through
LiteRT's schema object API, so the file differs from a sound one in exactly that field.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tfcompress
from tfcompress.bench.size import measure_size
from tfcompress.cli import main
from tfcompress.errors import InvalidDataError, ModelLoadError
from tfcompress.models import TFLiteModel, load_model, probe, resolve_model
from tfcompress.models.onnx import load_onnx
from tfcompress.models.tflite_file import read_tflite

BENCHMARK_FAST = ["--runs", "1", "--min-seconds", "0", "--warmup-seconds", "0"]
INT8 = 9  # TensorType.INT8


@pytest.fixture(scope="module")
def seed() -> bytes:
    """A tiny Keras 3 CNN quantized to int8 (per-channel conv, per-tensor activations)."""
    import keras

    model = keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            keras.layers.Conv2D(4, 3, activation="relu"),
            keras.layers.Flatten(),
            keras.layers.Dense(3),
        ]
    )
    data = np.random.default_rng(0).random((32, 8, 8, 1), dtype=np.float32)
    return tfcompress.quantize(model, recipe="int8", representative_data=data).model_content


@pytest.fixture(autouse=True)
def fresh_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts with no cached verdict and with the probe on."""
    monkeypatch.delenv("TFCOMPRESS_NO_PROBE", raising=False)
    probe.clear_cache()


def _edit(content: bytes, edit: Callable[[Any], None]) -> bytes:
    from tfcompress._compat.litert import flatbuffer_utils

    utils = flatbuffer_utils()
    model = utils.read_model_from_bytearray(bytearray(content))
    edit(model)
    return bytes(utils.convert_object_to_bytearray(model))


def _quantized(model: Any, dtype: int = INT8) -> Any:
    """The first tensor of ``dtype`` with per-tensor quantization (an activation)."""
    tensors = model.subgraphs[0].tensors
    return next(
        t
        for t in tensors
        if t.type == dtype and t.quantization is not None and len(t.quantization.scale) == 1
    )


def _set_scale(value: float) -> Callable[[Any], None]:
    def edit(model: Any) -> None:
        quantization = _quantized(model).quantization
        quantization.scale = np.full_like(quantization.scale, value)

    return edit


def _zero_point(model: Any) -> None:
    quantization = _quantized(model).quantization
    quantization.zeroPoint = np.full_like(quantization.zeroPoint, 1000)


def _zero_point_count(model: Any) -> None:
    quantization = _quantized(model).quantization
    quantization.zeroPoint = np.zeros(3, np.int64)


def _tensor_index(model: Any) -> None:
    graph = model.subgraphs[0]
    graph.operators[1].inputs[0] = len(graph.tensors) + 7


def _buffer_index(model: Any) -> None:
    model.subgraphs[0].tensors[1].buffer = 10**6


def _opcode_index(model: Any) -> None:
    model.subgraphs[0].operators[0].opcodeIndex = 200


def _negative_shape(model: Any) -> None:
    tensor = _quantized(model)
    tensor.shape[-1] = -7


def _input_name(model: Any) -> None:
    graph = model.subgraphs[0]
    graph.tensors[graph.inputs[0]].name = b"\xff\xfe\xc3(bad"


def _truncated(content: bytes) -> bytes:
    return content[: len(content) // 2]


def _random_body(_: bytes) -> bytes:
    body = np.random.default_rng(7).bytes(2048)
    return body[:4] + b"TFL3" + body[8:]


HOSTILE: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "nan_scale": (lambda c: _edit(c, _set_scale(np.nan)), r"scale nan; scales must be finite"),
    "inf_scale": (lambda c: _edit(c, _set_scale(np.inf)), r"scale inf; scales must be finite"),
    "zero_scale": (lambda c: _edit(c, _set_scale(0.0)), r"scale 0\.0; scales must be finite"),
    "negative_scale": (lambda c: _edit(c, _set_scale(-0.5)), r"scale -0\.5; scales must be"),
    "zero_point": (lambda c: _edit(c, _zero_point), r"zero point 1000, outside -128\.\.127"),
    "zero_point_count": (lambda c: _edit(c, _zero_point_count), r"1 quantization scale\(s\) but 3"),
    "tensor_index": (lambda c: _edit(c, _tensor_index), r"operator 1 .*: input tensor \d+ is not"),
    "buffer_index": (lambda c: _edit(c, _buffer_index), r"tensor 1 .* uses buffer 1000000"),
    "opcode_index": (lambda c: _edit(c, _opcode_index), r"operator 0 .* uses opcode 200"),
    "negative_shape": (lambda c: _edit(c, _negative_shape), r"negative dimension in its shape"),
    "input_name": (lambda c: _edit(c, _input_name), r"input tensor 0 has a name that is not UTF-8"),
    "truncated": (_truncated, r"truncated or corrupt"),
    "random_body": (_random_body, r"truncated or corrupt"),
}


@pytest.fixture(scope="module")
def hostile(seed: bytes, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("hostile")
    files = {}
    for name, (make, _) in HOSTILE.items():
        files[name] = folder / f"{name}.tflite"
        files[name].write_bytes(make(seed))
    return files


def _one_error_line(err: str, command: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"tfcompress {command}: error: "), lines[0]
    return lines[0]


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_tflite_is_refused_with_its_reason(hostile, case):
    reason = HOSTILE[case][1]
    path = hostile[case]
    with pytest.raises(ModelLoadError, match=reason) as raised:
        load_model(path)
    message = str(raised.value)
    assert "\n" not in message and str(path) in message and "re-export" in message
    with pytest.raises(ModelLoadError, match=reason):
        resolve_model(path.read_bytes())


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_cli_refuses_hostile_tflite_in_one_line(hostile, case, capsys):
    path = str(hostile[case])
    assert main(["inspect", path]) == 2
    _one_error_line(capsys.readouterr().err, "inspect")
    assert main(["benchmark", path, *BENCHMARK_FAST]) == 2
    _one_error_line(capsys.readouterr().err, "benchmark")


def _all_nan(model: Any) -> None:
    for tensor in model.subgraphs[0].tensors:
        if tensor.quantization is not None and tensor.quantization.scale is not None:
            tensor.quantization.scale = np.full_like(tensor.quantization.scale, np.nan)


def test_nan_scale_that_crashes_litert_is_refused_before_native_code(seed, monkeypatch):
    # Every scale NaN: LiteRT 2.3's XNNPACK segfaults on this file. The validator must stop
    # it first, so the probe child is never started.
    _fake_child(monkeypatch, "never")
    with pytest.raises(ModelLoadError, match=r"scale nan; .*more problem"):
        resolve_model(_edit(seed, _all_nan))


def test_real_runtime_crash_is_contained_by_the_probe(seed):
    # The same file handed straight to the probe: the real interpreter meets it in the child
    # (where LiteRT 2.3 usually dies of SIGSEGV) and this process only sees a one-line error.
    with pytest.raises(ModelLoadError, match="LiteRT interpreter") as raised:
        probe.probe_model(_edit(seed, _all_nan), "tflite", source="nan.tflite")
    assert "\n" not in str(raised.value)


def test_non_utf8_name_of_an_inner_tensor_is_only_a_label(seed, tmp_path, capsys):
    def rename(model: Any) -> None:
        model.subgraphs[0].tensors[1].name = b"\xff\xfe\xc3(bad"

    path = tmp_path / "odd_name.tflite"
    path.write_bytes(_edit(seed, rename))
    assert isinstance(load_model(path), TFLiteModel)
    assert "\ufffd\ufffd(bad" in read_tflite(path.read_bytes()).subgraphs[0].tensors[1].name
    assert main(["inspect", str(path)]) == 0
    assert "CONV_2D" in capsys.readouterr().out


def test_size_of_rank0_shapes_counts_no_macs(seed):
    # The conv's kernel and output claim rank 0: MAC estimation counts 0 for it (the dense
    # layer's 144 x 3 remain) instead of failing to unpack the kernel's shape.
    def flatten(model: Any) -> None:
        graph = model.subgraphs[0]
        codes = model.operatorCodes
        conv = next(op for op in graph.operators if codes[op.opcodeIndex].builtinCode == 3)
        for index in (conv.inputs[1], conv.outputs[0]):
            tensor = graph.tensors[index]
            tensor.shape, tensor.shapeSignature, tensor.buffer = [], None, 0
        graph.tensors[conv.inputs[1]].quantization = None  # per-channel needs a rank

    assert measure_size(TFLiteModel(seed)).macs == 6 * 6 * 4 * 3 * 3 + 144 * 3
    assert measure_size(TFLiteModel(_edit(seed, flatten))).macs == 144 * 3


def _fake_child(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Have the probe's child run ``tests/_child_fakes.py``'s ``name`` instead of the probe."""
    monkeypatch.setattr(probe, "CHILD_TARGET", f"_child_fakes:{name}")


def test_crash_of_the_runtime_is_an_error_naming_the_signal(seed, tmp_path, monkeypatch):
    path = tmp_path / "model.tflite"
    path.write_bytes(seed)
    _fake_child(monkeypatch, "segfault")
    with pytest.raises(
        ModelLoadError,
        match=r"LiteRT interpreter crashed \(SIGSEGV\) when it ran this file once on zeros",
    ):
        load_model(path)


def test_hang_is_stopped_and_not_cached(seed, monkeypatch):
    calls = []
    real = probe._run_child

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(probe, "_run_child", counting)
    _fake_child(monkeypatch, "hang")
    for _ in range(2):
        with pytest.raises(ModelLoadError, match=r"within 1 s and was stopped \(it hung\)"):
            probe.probe_model(seed, "tflite", timeout=1)
    assert len(calls) == 2


def test_runtime_refusal_is_the_childs_one_line_reason(seed, monkeypatch):
    _fake_child(monkeypatch, "refuses_load")
    with pytest.raises(ModelLoadError, match=r"cannot load it \(ValueError: bad things\)"):
        probe.probe_model(seed, "tflite", source="m.tflite")


def test_refusal_to_prepare_custom_ops_is_accepted_only_when_excused(seed, monkeypatch):
    _fake_child(monkeypatch, "refuses_prepare")
    probe.probe_model(seed, "tflite", must_prepare=False)
    with pytest.raises(ModelLoadError, match="cannot prepare it"):
        probe.probe_model(seed, "tflite")


def test_an_op_refusing_zeros_is_not_damage_and_is_retried_on_real_inputs(seed, monkeypatch):
    # An int8 DIV by a peak that is 0 on silence: the file loads, the refusal is remembered,
    # and the real inputs are tried in a child before anything runs in this process.
    _fake_child(monkeypatch, "refuses_to_run")
    probe.probe_model(seed, "tflite", source="norm_int8.tflite")
    assert "Node 3 (DIV)" in probe.zeros_refused(seed, "tflite")
    inputs = {"t0": np.ones((1, 8, 8, 1), np.float32)}
    with pytest.raises(InvalidDataError, match=r"an op refused the inputs.*the file is fine"):
        probe.probe_inputs(seed, "tflite", inputs, source="norm_int8.tflite")
    _fake_child(monkeypatch, "abort")
    with pytest.raises(ModelLoadError, match=r"crashed \(SIGABRT\).*on the real inputs"):
        probe.probe_inputs(seed, "tflite", inputs, source="norm_int8.tflite")
    _fake_child(monkeypatch, "runs")
    probe.probe_inputs(seed, "tflite", inputs)
    assert probe.zeros_refused(seed, "tflite") is None  # it ran: no second child


def test_valid_model_is_probed_once(seed, tmp_path, monkeypatch):
    path = tmp_path / "model.tflite"
    path.write_bytes(seed)
    calls = []
    real = probe._run_child

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(probe, "_run_child", counting)
    assert isinstance(load_model(path), TFLiteModel)
    assert isinstance(resolve_model(seed), TFLiteModel)
    tfcompress.inspect_model(path)
    assert calls == ["tflite"]


def test_a_probe_in_the_warm_child_says_the_same(seed, monkeypatch):
    # LiteRT Quantizer probes in the warm child it calibrates in, with no process of its
    # own: a crash or a refusal there reads as it does from a worker of its own.
    from tfcompress import _child
    from tfcompress._child import warm

    _child.close_warm_child()
    try:
        _fake_child(monkeypatch, "segfault")
        with pytest.raises(ModelLoadError, match=r"crashed \(SIGSEGV\) when it ran this file"):
            probe.probe_model(seed, "tflite", source="m.tflite", in_warm_child=True)
        probe.clear_cache()
        _fake_child(monkeypatch, "refuses_load")
        with pytest.raises(ModelLoadError, match=r"cannot load it \(ValueError: bad things\)"):
            probe.probe_model(seed, "tflite", source="m.tflite", in_warm_child=True)
        assert warm.running()  # it ran there, and the child stays warm
    finally:
        _child.close_warm_child()


@pytest.mark.skipif(sys.platform != "linux", reason="the zygote forks: Linux only")
def test_probes_fork_from_the_measurement_zygote_only_when_shared(seed, monkeypatch):
    from tfcompress._child import zygote

    monkeypatch.setattr(zygote, "_zygote", None)
    monkeypatch.setattr(zygote, "_failed", set())
    try:
        probe.probe_model(seed, "tflite")  # one probe: a fresh interpreter, no zygote started
        assert zygote.running() is None
        probe.clear_cache()
        with probe.sharing_zygote():  # benchmark's loads: its workers' zygote serves them
            probe.probe_model(seed, "tflite")
        assert zygote.running() is not None
        probe.clear_cache()
        probe.probe_model(seed, "tflite")  # a zygote runs: the probe forks from it
    finally:
        zygote.close_zygote()


def test_opt_out_skips_the_probe_not_the_validator(seed, hostile, tmp_path, monkeypatch):
    monkeypatch.setenv("TFCOMPRESS_NO_PROBE", "1")
    _fake_child(monkeypatch, "never")
    assert isinstance(resolve_model(seed), TFLiteModel)
    with pytest.raises(ModelLoadError, match="scale nan"):
        load_model(hostile["nan_scale"])


def test_probe_child_never_imports_tensorflow(seed):
    # The probe's worker as the probe starts it (no zygote runs in a fresh process), asked
    # after the probe what it imported.
    from tfcompress._child import Worker

    with Worker(fork="running") as worker:
        assert worker.call(probe.CHILD_TARGET, "tflite", seed, None, what="probing") == {"ok": True}
        assert not worker.call("sys:modules.__contains__", "tensorflow", what="asking")


def _onnx_file(folder: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = folder / "relu.onnx"
    onnx.save(model, path)
    return path


def test_onnx_is_probed_in_a_child(tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    path = _onnx_file(tmp_path)
    assert load_onnx(path).name == "relu.onnx"
    probe.clear_cache()
    _fake_child(monkeypatch, "abort")
    with pytest.raises(ModelLoadError, match=r"ONNX Runtime crashed \(SIGABRT\) when it ran"):
        load_model(path)


def test_an_artifact_its_runtime_crashes_on_is_an_error_row_beside_the_others(
    seed, tmp_path, monkeypatch, capsys
):
    # A valid file that crashes LiteRT at the probe used to refuse the whole command (no
    # rows); alone it still is the command's one line, beside others it is its rows.
    def mark(model: Any) -> None:
        model.subgraphs[0].tensors[0].name = b"crash-me"

    good, bad = tmp_path / "good.tflite", tmp_path / "bad.tflite"
    good.write_bytes(seed)
    bad.write_bytes(_edit(seed, mark))
    _fake_child(monkeypatch, "segfault_if_marked")
    argv = ["benchmark", str(good), str(bad), "--backends", "cpu", "--json", *BENCHMARK_FAST]
    assert main(argv) == 2  # a row failed (docs/benchmarking.md)
    rows = {row["artifact"]: row for row in json.loads(capsys.readouterr().out)["rows"]}
    assert rows["good.tflite"]["status"] == "ok"
    assert rows["bad.tflite"]["status"].startswith("error: ")
    assert "crashed (SIGSEGV)" in rows["bad.tflite"]["status"]
    assert main(["benchmark", str(bad), *BENCHMARK_FAST]) == 2
    _one_error_line(capsys.readouterr().err, "benchmark")
