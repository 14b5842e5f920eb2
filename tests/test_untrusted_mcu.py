"""Hostile ``.tflite`` files for ``mcu`` and the ``tflm`` backend .

Each file is written here from scratch (:mod:`_tflite_craft`, milliseconds, no TensorFlow):
what a runtime refuses is a finding naming the op and the runtime, what cannot be read is
one line with exit 2, never an internal error; nothing the file declares is allocated in
the caller before it is checked; the ops TFLM lacks are found in one pass.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _tflite_craft import build, op, options_past_the_end, schema, tensor

from tfcompress.cli import main

pytest.importorskip("tflite_micro", reason="tflite-micro is not installed (the mcu extra)")


def _conv(stride: int) -> bytes:
    s = schema()
    options = s.Conv2DOptionsT()
    options.strideH = options.strideW = stride
    options.padding = s.Padding.SAME
    return build(
        [
            tensor([1, 4, 4, 1], scale=0.1),
            tensor([1, 1, 1, 1], data=np.array([1], np.int8), scale=0.1),
            tensor([1], "INT32", data=np.array([0], np.int32), scale=0.01),
            tensor([1, 4, 4, 1], scale=0.1),
        ],
        [op("CONV_2D", [0, 1, 2], [3], options)],
    )


def _while_of_itself() -> bytes:
    """A WHILE whose body is its own condition (it returns a bool where an int32 goes)."""
    options = schema().WhileOptionsT()
    options.condSubgraphIndex = options.bodySubgraphIndex = 1
    cond = (
        [tensor([1], "INT32"), tensor([1], "INT32", data=np.array([10], np.int32)),
         tensor([1], "BOOL")],
        [op("LESS", [0, 1], [2])], [0], [2],
    )  # fmt: skip
    return build([tensor([1], "INT32"), tensor([1], "INT32")], [op("WHILE", [0], [1], options)],
                 subgraphs=[cond])  # fmt: skip


def _relu(shape_in: list[int], shape_out: list[int] | None = None, dtype: str = "INT8") -> bytes:
    return build(
        [
            tensor(shape_in, dtype, scale=0.1),
            tensor(shape_in if shape_out is None else shape_out, dtype, scale=0.1),
        ],
        [op("RELU", [0], [1])],
    )


def _softmax(scale: float) -> bytes:
    options = schema().SoftmaxOptionsT()
    options.beta = 1.0
    return build(
        [tensor([1, 4], scale=scale), tensor([1, 4], scale=1 / 256, zero=-128)],
        [op("SOFTMAX", [0], [1], options)],
    )


def _customs(count: int) -> bytes:
    tensors = [tensor([1, 4], scale=0.1) for _ in range(count + 1)]
    return build(tensors, [op("CUSTOM", [i], [i + 1], custom=f"Mine{i}") for i in range(count)])


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("hostile_mcu")
    made = {
        "conv_stride0": _conv(0),
        "while_self": _while_of_itself(),
        "options_past_end": options_past_the_end(_conv(1)),
        "softmax_options_past_end": options_past_the_end(_softmax(1e-9)),
        "output_shape_lies": _relu([1, 4], []),
        "huge": _relu([1, 10000, 10000, 1]),
        "batch2": _relu([2, 4]),
        "customs": _customs(300),
        **{f"type_{t}": _relu([1, 4], dtype=t) for t in ("INT4", "INT2", "STRING", "RESOURCE")},
    }
    paths = {}
    for name, content in made.items():
        paths[name] = folder / f"{name}.tflite"
        paths[name].write_bytes(content)
    return paths


def _report(capsys: pytest.CaptureFixture[str], path: Path) -> dict[str, Any]:
    assert main(["mcu", str(path), "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("case", "rule", "op_name", "words"),
    [
        ("conv_stride0", "reference_failed", "CONV_2D", "LiteRT's reference kernels refused"),
        ("while_self", "refused", "WHILE", "kernel for WHILE (op 0) but failed to invoke"),
        ("output_shape_lies", "mismatch", None, "declares a shape its op does not make"),
        ("type_INT4", "io_type", None, "of type int4"),
        ("type_INT2", "io_type", None, "of type int2"),
        ("type_STRING", "io_type", None, "of type string"),
        ("type_RESOURCE", "io_type", None, "of type resource"),
    ],
)
def test_a_runtime_refusal_is_a_finding_naming_op_and_runtime(
    files, capsys, case, rule, op_name, words
):
    report = _report(capsys, files[case])
    found = [f for f in report["findings"] if f["rule"] == rule]
    assert found and words in found[0]["message"], report["findings"]
    assert found[0]["op"] == op_name
    if rule in ("refused", "io_type"):  # TFLM cannot run it as it is
        assert found[0]["blocking"] and not report["compatible"]


@pytest.mark.parametrize("case", ["options_past_end", "softmax_options_past_end"])
def test_a_table_past_the_end_is_one_line(files, capsys, case):
    assert main(["mcu", str(files[case])]) == 2
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(lines) == 1 and "lies outside the file" in lines[0], lines


def test_declared_sizes_are_checked_before_anything_is_made(files, capsys, monkeypatch):
    module = importlib.import_module("tfcompress.targets.mcu.check")

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("nothing may be made or run for a file that declares 200 MB")

    monkeypatch.setattr(module, "sample_inputs", refuse)
    monkeypatch.setattr(module, "in_child", refuse)
    report = _report(capsys, files["huge"])
    (large,) = [f for f in report["findings"] if f["rule"] == "too_large"]
    assert "200,000,000 B" in large["message"] and not report["compatible"]


def test_the_tflm_backend_refuses_huge_random_inputs_in_one_line(files, capsys):
    argv = ["benchmark", str(files["huge"]), "--backends", "tflm", "--runs", "1"]
    assert main(argv) == 2
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip() and x[:5] != "INFO "]
    assert len(lines) == 1 and "256 MiB" in lines[0] and "--data" in lines[0], lines


def test_missing_ops_are_found_in_one_pass(files, capsys, monkeypatch):
    module = importlib.import_module("tfcompress.targets.mcu.check")

    calls: list[str] = []
    real = module.in_child

    def counted(function: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(function)
        return real(function, *args, **kwargs)

    monkeypatch.setattr(module, "in_child", counted)
    report = _report(capsys, files["customs"])
    missing = {f["op"] for f in report["findings"] if f["rule"] == "no_kernel"}
    assert missing == {f"CUSTOM:Mine{i}" for i in range(300)}
    assert calls == ["load", "kernels"]  # one load, one lookup pass: never a load per op


def test_a_model_of_batch_two_runs_as_its_batch(files, tmp_path, capsys):
    data = tmp_path / "rows.npz"
    np.savez(data, x=np.linspace(-1, 1, 5 * 4, dtype=np.float32).reshape(5, 4))
    assert main(["mcu", str(files["batch2"]), "--data", str(data), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["exactness"]["samples"] == 2 and report["exactness"]["bit_exact"]
    random = _report(capsys, files["batch2"])
    assert random["exactness"]["bit_exact"] and random["compatible"]


def test_one_time_limit_for_the_whole_check(monkeypatch):
    from tfcompress.targets.mcu import probe

    def never(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("no child once the check's time is spent")

    monkeypatch.setattr(probe, "call", never)
    spent = probe.Budget(0.0)
    outcome = probe.in_child("load", b"", 1, what="loading m in TFLM", timeout=spent)
    assert outcome.failure is not None and outcome.failure.kind == "timeout"
    assert "time limit (0 s) ran out" in outcome.failure.message


def test_every_builtin_code_is_looked_up_in_one_child_without_it_failing():
    from tfcompress._compat.tflm import tflm_schema
    from tfcompress.targets.mcu.probe import in_child

    ops = tflm_schema().BuiltinOperator
    codes = sorted({v for k, v in vars(ops).items() if not k.startswith("_") and k != "CUSTOM"})
    outcome = in_child("kernels", [(c, None) for c in codes], what="looking up every code")
    assert outcome.failure is None
    found = dict(zip(codes, outcome.value, strict=True))
    assert found[ops.CONV_2D] is True and found[ops.SIGN] is False and found[ops.UNIQUE] is False
