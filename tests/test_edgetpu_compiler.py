"""The edgetpu_compiler log parser and runner, on genuine compiler output.

The compiler ships only from Coral's apt repository and is not installed here. Every log below
is quoted verbatim from a public issue thread (the URL above each); where the thread's text
was cut, the quote ends at the last complete line. The runner is tested with small fake
``edgetpu_compiler`` scripts put on PATH that print those logs.
"""

# ruff: noqa: E501 - the compiler logs are quoted verbatim, long lines included

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from tfcompress.errors import BackendUnavailableError, ConversionError, InvalidInputError
from tfcompress.targets.edgetpu import (
    CompilerLog,
    EdgeTPUCompilerError,
    compile_for_edgetpu,
    find_compiler,
    parse_compiler_log,
)
from tfcompress.targets.edgetpu.compiler_log import parse_size

# https://github.com/google-coral/edgetpu/issues/169 (compiler 14.1; every op mapped, so no
# "Number of operations that will run on ..." lines; printed without blank lines)
LOG_14_ALL_MAPPED = """\
Edge TPU Compiler version 14.1.317412892
Model compiled successfully in 102 ms.
Input model: model_classifier_CNN.tflite
Input size: 379.89KiB
Output model: model_classifier_CNN_edgetpu.tflite
Output size: 3.28MiB
On-chip memory used for caching model parameters: 3.27MiB
On-chip memory remaining for caching model parameters: 2.84MiB
Off-chip memory used for streaming uncached model parameters: 0.00B
Number of Edge TPU subgraphs: 1
Total number of operations: 14
Operation log: model_classifier_CNN_edgetpu.log
Operator                       Count      Status
RESHAPE                        1          Mapped to Edge TPU
MAX_POOL_2D                    4          Mapped to Edge TPU
FULLY_CONNECTED                2          Mapped to Edge TPU
CONV_2D                        4          Mapped to Edge TPU
QUANTIZE                       2          Mapped to Edge TPU
SOFTMAX                        1          Mapped to Edge TPU
"""

# https://github.com/google-coral/edgetpu/issues/60 (compiler 2.1; a split graph; the quote
# ends before the thread's cut QUANTIZE row)
LOG_21_SPLIT = """\
edgetpu_compiler -s model2.tflite 
Edge TPU Compiler version 2.1.302470888

Model compiled successfully in 12264 ms.

Input model: model2.tflite
Input size: 8.11MiB
Output model: model2_edgetpu.tflite
Output size: 9.47MiB
On-chip memory used for caching model parameters: 6.86MiB
On-chip memory remaining for caching model parameters: 7.75KiB
Off-chip memory used for streaming uncached model parameters: 1.22MiB
Number of Edge TPU subgraphs: 1
Total number of operations: 93
Operation log: model2_edgetpu.log

Model successfully compiled but not all operations are supported by the Edge TPU. A percentage of the model will instead run on the CPU, which is slower. If possible, consider updating your model to use only operations supported by the Edge TPU. For details, visit g.co/coral/model-reqs.
Number of operations that will run on Edge TPU: 83
Number of operations that will run on CPU: 10

Operator                       Count      Status

LOGISTIC                       1          More than one subgraph is not supported
ADD                            10         Mapped to Edge TPU
CONCATENATION                  1          More than one subgraph is not supported
CONCATENATION                  3          Mapped to Edge TPU
"""  # noqa: W291 - the thread's first line ends with a space

# https://github.com/google-coral/edgetpu/issues/671 (compiler 16.0.384591198 with -d -k 10
# -n 2: the search-delegate preamble; the thread's table follows the header)
LOG_16_SEGMENT = """\
Edge TPU Compiler version 16.0.384591198
Searching for valid delegate with step 10
Try to compile segment with 84 ops
Started a compilation timeout timer of 180 seconds.

Model compiled successfully in 2270 ms.

Input model: rede_modelo3_73_segment_0_of_2.tflite
Input size: 5.21MiB
Output model: rede_modelo3_73_segment_0_of_2_edgetpu.tflite
Output size: 6.51MiB
On-chip memory used for caching model parameters: 6.02MiB
On-chip memory remaining for caching model parameters: 1.02MiB
Off-chip memory used for streaming uncached model parameters: 0.00B
Number of Edge TPU subgraphs: 1
Total number of operations: 84
Operation log: rede_modelo3_73_segment_0_of_2_edgetpu.log

Operator                       Count      Status
"""

# https://github.com/WongKinYiu/yolov7/pull/1672 (compiler 16.0.384591198 run by the YOLO
# exporter; the quote ends before the thread's cut MUL row)
LOG_16_YOLO = """\
Edge TPU: starting export with Edge TPU compiler 16.0.384591198...
Edge TPU Compiler version 16.0.384591198
Searching for valid delegate with step 10
Try to compile segment with 246 ops
Started a compilation timeout timer of 180 seconds.

Model compiled successfully in 3133 ms.

Input model: runs/train/exp8/weights/best-int8.tflite
Input size: 6.00MiB
Output model: runs/train/exp8/weights/best-int8_edgetpu.tflite
Output size: 6.47MiB
On-chip memory used for caching model parameters: 5.90MiB
On-chip memory remaining for caching model parameters: 1.16MiB
Off-chip memory used for streaming uncached model parameters: 41.75KiB
Number of Edge TPU subgraphs: 1
Total number of operations: 246
Operation log: runs/train/exp8/weights/best-int8_edgetpu.log

Operator                       Count      Status

ADD                            3          Mapped to Edge TPU
RESHAPE                        6          Mapped to Edge TPU
MAX_POOL_2D                    4          Mapped to Edge TPU
CONCATENATION                  18         Mapped to Edge TPU
PAD                            4          Mapped to Edge TPU
LOGISTIC                       64         Mapped to Edge TPU
RESIZE_NEAREST_NEIGHBOR        2          Mapped to Edge TPU
QUANTIZE                       5          Mapped to Edge TPU
"""

# https://github.com/google-coral/edgetpu/issues/358 (compiler 15.0 with -m 11: zero Edge TPU
# subgraphs; the quote ends before the thread's cut CPU line)
LOG_15_ZERO_SUBGRAPHS = """\
$ edgetpu_compiler internal_err.tflite -m 11
Edge TPU Compiler version 15.0.340273435

Model compiled successfully in 17 ms.

Input model: internal_err.tflite
Input size: 961.05KiB
Output model: internal_err_edgetpu.tflite
Output size: 882.13KiB
On-chip memory used for caching model parameters: 0.00B
On-chip memory remaining for caching model parameters: 0.00B
Off-chip memory used for streaming uncached model parameters: 0.00B
Number of Edge TPU subgraphs: 0
Total number of operations: 69
Operation log: internal_err_edgetpu.log

Model successfully compiled but not all operations are supported by the Edge TPU. A percentage of the model will instead run on the CPU, which is slower. If possible, consider updating your model to use only operations supported by the Edge TPU. For details, visit g.co/coral/model-reqs.
Number of operations that will run on Edge TPU: 0
"""

# https://github.com/google-coral/edgetpu/issues/358 (compiler 15.0, the same model without -m)
LOG_15_INTERNAL = """\
$ edgetpu_compiler internal_err.tflite 
Edge TPU Compiler version 15.0.340273435

Internal compiler error. Aborting! 
"""  # noqa: W291 - as printed, with trailing spaces

# https://github.com/google-coral/edgetpu/issues/879 (compiler 16.0.384591198 refuses QUANTIZE v3)
LOG_16_QUANTIZE_V3 = """\
edgetpu_compiler /mnt/e/models/quantized_model.tflite
Edge TPU Compiler version 16.0.384591198
ERROR: Didn't find op for builtin opcode 'QUANTIZE' version '3'. An older version of this builtin might be supported. Are you using an old TFLite binary with a newer model?

ERROR: Registration failed.

Invalid model: /mnt/e/models/quantized_model.tflite
Model could not be parsed
"""

# https://github.com/google-coral/edgetpu/issues/845 (compiler 16.0.384591198 refuses
# TRANSPOSE_CONV v4)
LOG_16_TRANSPOSE_CONV_V4 = """\
Edge TPU Compiler version 16.0.384591198
ERROR: Didn't find op for builtin opcode 'TRANSPOSE_CONV' version '4'. An older version of this builtin might be supported. Are you using an old TFLite binary with a newer model?

ERROR: Registration failed.

Invalid model: model_full_integer_quant.tflite
Model could not be parsed
"""

# https://github.com/google-coral/edgetpu/issues/631 (compiler 16.0, CONV_2D v6; no banner quoted)
LOG_16_CONV_V6 = """\
ERROR: Didn't find op for builtin opcode 'CONV_2D' version '6'. An older version of this builtin might be supported. Are you using an old TFLite binary with a newer model?

ERROR: Registration failed.
"""

# https://github.com/google-coral/edgetpu/issues/601 (compiler 16.0.384591198 with -s -a)
LOG_16_LARGE_ACTIVATIONS = """\
indeed@indeed-virtual-machine:~/Desktop/tflite$ edgetpu_compiler -s -a yolov4_bb.tflite 
Edge TPU Compiler version 16.0.384591198
Started a compilation timeout timer of 180 seconds.
ERROR: Restored original execution plan after delegate application failure.
Compilation failed: Compilation failed due to large activation tensors in model.
Compilation child process completed within timeout period.
Compilation failed! 
"""  # noqa: W291 - as printed

# https://github.com/google-coral/edgetpu/issues/342 (the table as quoted, no summary or memory
# lines; a blank line and an empty line after the header)
LOG_TABLE_ONLY = """\
Number of operations that will run on Edge TPU: 2
Number of operations that will run on CPU: 153

Operator                       Count      Status


TRANSPOSE                      70         Operation not supported
FULLY_CONNECTED                1          More than one subgraph is not supported
PAD                            1          Mapped to Edge TPU
PAD                            17         More than one subgraph is not supported
ADD                            10         More than one subgraph is not supported
MEAN                           2          More than one subgraph is not supported
CONV_2D                        35         More than one subgraph is not supported
QUANTIZE                       1          Mapped to Edge TPU
QUANTIZE                       1          Operation is otherwise supported, but not mapped due to some unspecified limitation
DEPTHWISE_CONV_2D              17         More than one subgraph is not supported
"""

# https://github.com/google-coral/edgetpu/issues/27 (2019, nothing mapped)
LOG_NOTHING_MAPPED = """\
Number of operations that will run on Edge TPU: 0
Number of operations that will run on CPU: 1

Operator                       Count      Status

FULLY_CONNECTED                1          For example, a fully-connected or softmax layer with 2D output
"""

# https://github.com/google-coral/edgetpu/issues/173 (compiler 14.1, no -s: no table, the
# warning wrapped over several lines)
LOG_14_NO_TABLE = """\
$ edgetpu_compiler T1_no_summ_02_quant8.tflite
Edge TPU Compiler version 14.1.317412892

Model compiled successfully in 113 ms.

Input model: T1_no_summ_02_quant8.tflite
Input size: 28.19KiB
Output model: T1_no_summ_02_quant8_edgetpu.tflite
Output size: 116.78KiB
On-chip memory used for caching model parameters: 60.00KiB
On-chip memory remaining for caching model parameters: 7.96MiB
Off-chip memory used for streaming uncached model parameters: 0.00B
Number of Edge TPU subgraphs: 1
Total number of operations: 24
Operation log: T1_no_summ_02_quant8_edgetpu.log

Model successfully compiled but not all operations are supported by the
Edge TPU. A percentage of the model will instead run on the CPU, which is
slower. If possible, consider updating your model to use only operations
supported by the Edge TPU. For details, visit g.co/coral/model-reqs.
Number of operations that will run on Edge TPU: 6
Number of operations that will run on CPU: 18
See the operation log file for individual operation details.
"""

# https://github.com/google-coral/edgetpu/issues/490 (the reply's quote starts at the subgraph
# count: no version, memory or model lines; it ends before the thread's cut MAX_POOL_2D row)
LOG_TRIMMED_SUMMARY = """\
Number of Edge TPU subgraphs: 1
Total number of operations: 267
Operation log: detector_edgetpu.log

Model successfully compiled but not all operations are supported by the Edge TPU. A percentage of the model will instead run on the CPU, which is slower. If possible, consider updating your model to use only operations supported by the Edge TPU. For details, visit g.co/coral/model-reqs.
Number of operations that will run on Edge TPU: 261
Number of operations that will run on CPU: 6

Operator                       Count      Status

DEQUANTIZE                     2          Operation is working on an unsupported data type
DEPTHWISE_CONV_2D              80         Mapped to Edge TPU
LOGISTIC                       1          Operation is otherwise supported, but not mapped due to some unspecified limitation
CONCATENATION                  1          Mapped to Edge TPU
CONCATENATION                  1          More than one subgraph is not supported
"""

TFLITE = b"\x1c\x00\x00\x00TFL3" + bytes(24)


# --- the parser ---------------------------------------------------------------------------


def test_all_mapped_summary_and_table() -> None:
    log = parse_compiler_log(LOG_14_ALL_MAPPED)
    assert log.compiler_version == "14.1.317412892"
    assert log.succeeded and log.error is None
    assert log.compile_ms == 102
    assert log.input_model == "model_classifier_CNN.tflite"
    assert log.output_model == "model_classifier_CNN_edgetpu.tflite"
    assert log.input_size_bytes == round(379.89 * 1024)
    assert log.on_chip_memory_bytes == round(3.27 * 1024**2)
    assert log.on_chip_remaining_bytes == round(2.84 * 1024**2)
    assert log.off_chip_memory_bytes == 0
    assert (log.subgraphs, log.ops_total) == (1, 14)
    # all mapped: the compiler prints no per-device counts, the parser derives them
    assert log.ops_on_tpu_stated is None
    assert (log.ops_mapped, log.ops_on_cpu, log.fully_mapped) == (14, 0, True)
    assert [(r.operator, r.count) for r in log.operators] == [
        ("RESHAPE", 1),
        ("MAX_POOL_2D", 4),
        ("FULLY_CONNECTED", 2),
        ("CONV_2D", 4),
        ("QUANTIZE", 2),
        ("SOFTMAX", 1),
    ]
    assert sum(r.count for r in log.operators) == log.ops_total
    assert all(r.mapped for r in log.operators)


def test_split_graph_counts_and_statuses() -> None:
    log = parse_compiler_log(LOG_21_SPLIT)
    assert log.compiler_version == "2.1.302470888"
    assert (log.ops_mapped, log.ops_on_cpu, log.ops_total) == (83, 10, 93)
    assert not log.fully_mapped
    assert log.on_chip_remaining_bytes == round(7.75 * 1024)
    assert log.off_chip_memory_bytes == round(1.22 * 1024**2)
    assert log.operators[0].operator == "LOGISTIC"
    assert log.operators[0].status == "More than one subgraph is not supported"
    assert not log.operators[0].mapped
    assert [r.count for r in log.operators if r.operator == "CONCATENATION"] == [1, 3]


def test_compiler_16_search_delegate_log() -> None:
    log = parse_compiler_log(LOG_16_SEGMENT)
    assert log.compiler_version == "16.0.384591198"
    assert log.succeeded
    assert log.input_model == "rede_modelo3_73_segment_0_of_2.tflite"
    assert log.on_chip_memory_bytes == round(6.02 * 1024**2)
    assert (log.subgraphs, log.ops_total, log.ops_mapped) == (1, 84, 84)
    assert log.operators == ()


def test_compiler_16_table_with_blank_line_after_header() -> None:
    log = parse_compiler_log(LOG_16_YOLO)
    assert log.compiler_version == "16.0.384591198"
    assert log.output_model == "runs/train/exp8/weights/best-int8_edgetpu.tflite"
    assert log.off_chip_memory_bytes == round(41.75 * 1024)
    assert len(log.operators) == 8
    assert log.operators[-1].operator == "QUANTIZE"
    assert log.operators[5].count == 64
    assert log.fully_mapped


def test_zero_subgraphs_maps_nothing() -> None:
    log = parse_compiler_log(LOG_15_ZERO_SUBGRAPHS)
    assert log.succeeded
    assert log.subgraphs == 0
    assert log.on_chip_memory_bytes == 0
    assert (log.ops_mapped, log.ops_total, log.ops_on_cpu) == (0, 69, 69)
    assert not log.fully_mapped
    assert "0 of 69 ops" in str(log)


def test_nothing_mapped_table_without_summary() -> None:
    log = parse_compiler_log(LOG_NOTHING_MAPPED)
    assert log.compiler_version is None
    assert (log.ops_on_tpu_stated, log.ops_on_cpu_stated) == (0, 1)
    (row,) = log.operators
    assert row.operator == "FULLY_CONNECTED"
    assert row.status == "For example, a fully-connected or softmax layer with 2D output"


def test_table_with_two_blank_lines_and_long_status() -> None:
    log = parse_compiler_log(LOG_TABLE_ONLY)
    assert len(log.operators) == 10
    assert sum(r.count for r in log.operators) == 155 == 2 + 153
    assert sum(r.count for r in log.operators if r.mapped) == 2
    assert log.operators[8].status == (
        "Operation is otherwise supported, but not mapped due to some unspecified limitation"
    )


def test_log_without_memory_lines_or_version() -> None:
    log = parse_compiler_log(LOG_TRIMMED_SUMMARY)
    assert log.compiler_version is None
    assert log.on_chip_memory_bytes is None and log.off_chip_memory_bytes is None
    assert (log.subgraphs, log.ops_total, log.ops_mapped, log.ops_on_cpu) == (1, 267, 261, 6)
    assert log.operators[0].status == ("Operation is working on an unsupported data type")
    assert len(log.operators) == 5


def test_no_table_and_wrapped_warning() -> None:
    log = parse_compiler_log(LOG_14_NO_TABLE)
    assert log.succeeded
    assert (log.ops_mapped, log.ops_on_cpu, log.ops_total) == (6, 18, 24)
    assert log.operators == ()
    assert log.on_chip_memory_bytes == 60 * 1024


@pytest.mark.parametrize(
    ("text", "op", "version"),
    [
        (LOG_16_QUANTIZE_V3, "QUANTIZE", 3),
        (LOG_16_TRANSPOSE_CONV_V4, "TRANSPOSE_CONV", 4),
        (LOG_16_CONV_V6, "CONV_2D", 6),
    ],
)
def test_op_version_not_supported(text: str, op: str, version: int) -> None:
    log = parse_compiler_log(text)
    assert not log.succeeded
    assert log.unsupported_op_version == (op, version)
    assert log.error is not None
    assert log.error.startswith(f"ERROR: Didn't find op for builtin opcode '{op}'")
    assert log.ops_mapped is None and log.ops_total is None
    assert log.to_dict()["unsupported_op_version"] == {"op": op, "version": version}


def test_op_version_log_keeps_version() -> None:
    log = parse_compiler_log(LOG_16_QUANTIZE_V3)
    assert log.compiler_version == "16.0.384591198"
    assert "failed: ERROR: Didn't find op" in str(log)


def test_internal_compiler_error() -> None:
    log = parse_compiler_log(LOG_15_INTERNAL)
    assert log.compiler_version == "15.0.340273435"
    assert not log.succeeded
    assert log.error == "Internal compiler error. Aborting!"
    assert log.unsupported_op_version is None


def test_compilation_failed_names_the_cause() -> None:
    log = parse_compiler_log(LOG_16_LARGE_ACTIVATIONS)
    assert not log.succeeded
    assert log.error == (
        "Compilation failed: Compilation failed due to large activation tensors in model."
    )


def test_to_dict_is_json() -> None:
    data = json.loads(json.dumps(parse_compiler_log(LOG_21_SPLIT).to_dict()))
    assert data["ops_mapped"] == 83
    assert data["operators"][1] == {"operator": "ADD", "count": 10, "status": "Mapped to Edge TPU"}
    assert "text" not in data


def test_parse_size() -> None:
    assert parse_size("0.00B") == 0
    assert parse_size("1.00MiB") == 1024**2
    assert parse_size("lots") is None


def test_empty_log() -> None:
    log = parse_compiler_log("")
    assert isinstance(log, CompilerLog)
    assert not log.succeeded and log.error is None and log.operators == ()


# --- the runner, with fake compilers on PATH --------------------------------------------------


def _fake_compiler(folder: Path, body: str) -> Path:
    """An executable ``edgetpu_compiler`` in ``folder`` running ``body`` (Python)."""
    script = folder / "edgetpu_compiler"
    script.write_text(f"#!{sys.executable}\nimport sys, time, pathlib\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


_WORKING = f"""
args = sys.argv[1:]
out = pathlib.Path(args[args.index("-o") + 1])
model = pathlib.Path(args[-1])
(out / (model.stem + "_edgetpu.tflite")).write_bytes(model.read_bytes() + b"EDGETPU")
sys.stdout.write({LOG_21_SPLIT!r})
"""

_FAILING = f"""
sys.stdout.write({LOG_16_QUANTIZE_V3.splitlines()[1] + chr(10)!r})
sys.stderr.write({chr(10).join(LOG_16_QUANTIZE_V3.splitlines()[2:]) + chr(10)!r})
sys.exit(1)
"""

_HANGING = """
sys.stdout.write("Edge TPU Compiler version 16.0.384591198\\n")
sys.stdout.flush()
time.sleep(60)
"""


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    return folder


@pytest.fixture(scope="module")
def valid_tflite() -> bytes:
    """A real (tiny) .tflite: what a compiler returns must pass the .tflite reader."""
    import tfcompress
    from tfcompress._compat.keras import KerasFlavour, keras_module

    keras = keras_module(KerasFlavour.KERAS3)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    return tfcompress.quantize(model, recipe="float32").model_content


@pytest.fixture
def model_file(tmp_path: Path, valid_tflite: bytes) -> Path:
    path = tmp_path / "net_int8.tflite"
    path.write_bytes(valid_tflite)
    return path


pytestmark_posix = pytest.mark.skipif(os.name != "posix", reason="fake compilers are scripts")


@pytestmark_posix
def test_runner_keeps_compiled_bytes_and_parses_log(
    bin_dir: Path, model_file: Path, valid_tflite: bytes
) -> None:
    fake = _fake_compiler(bin_dir, _WORKING)
    assert find_compiler() == str(fake)
    run = compile_for_edgetpu(model_file)
    assert run.compiled == valid_tflite + b"EDGETPU"
    assert run.compiler == str(fake)
    assert run.log.ops_mapped == 83 and run.log.ops_total == 93
    assert list(model_file.parent.glob("*_edgetpu*")) == []  # nothing written by the input
    saved = run.save(model_file.parent / "net_int8_edgetpu.tflite")
    assert saved.read_bytes() == run.compiled
    assert run.to_dict()["compiled_bytes"] == len(valid_tflite) + 7


@pytestmark_posix
def test_runner_with_explicit_path_and_bytes(
    tmp_path: Path, bin_dir: Path, valid_tflite: bytes
) -> None:
    elsewhere = tmp_path / "coral"
    elsewhere.mkdir()
    fake = _fake_compiler(elsewhere, _WORKING)
    run = compile_for_edgetpu(valid_tflite, compiler=fake)
    assert run.compiled.endswith(b"EDGETPU")


@pytestmark_posix
def test_failing_compiler_is_one_line_error(bin_dir: Path, model_file: Path) -> None:
    _fake_compiler(bin_dir, _FAILING)
    with pytest.raises(EdgeTPUCompilerError) as info:
        compile_for_edgetpu(model_file)
    message = str(info.value)
    assert "\n" not in message
    assert "exit status 1" in message
    assert "Didn't find op for builtin opcode 'QUANTIZE' version '3'" in message
    assert "older TensorFlow" in message
    assert isinstance(info.value, ConversionError) and info.value.exit_code == 2
    assert info.value.log is not None and info.value.log.unsupported_op_version == ("QUANTIZE", 3)


@pytestmark_posix
def test_hanging_compiler_times_out(bin_dir: Path, model_file: Path) -> None:
    _fake_compiler(bin_dir, _HANGING)
    started = time.perf_counter()
    with pytest.raises(EdgeTPUCompilerError) as info:
        compile_for_edgetpu(model_file, timeout=2)
    assert time.perf_counter() - started < 15
    assert info.value.timed_out
    assert "did not finish within 2 s" in str(info.value)
    assert "\n" not in str(info.value)
    assert info.value.log is not None
    assert info.value.log.compiler_version == "16.0.384591198"


@pytestmark_posix
def test_success_without_output_file_is_an_error(bin_dir: Path, model_file: Path) -> None:
    _fake_compiler(bin_dir, f"sys.stdout.write({LOG_14_ALL_MAPPED!r})")
    with pytest.raises(EdgeTPUCompilerError, match=r"wrote no net_int8_edgetpu\.tflite"):
        compile_for_edgetpu(model_file)


@pytestmark_posix
def test_exit_zero_with_error_log_is_an_error(bin_dir: Path, model_file: Path) -> None:
    _fake_compiler(bin_dir, f"sys.stdout.write({LOG_15_INTERNAL!r})")
    with pytest.raises(EdgeTPUCompilerError, match=r"Internal compiler error\. Aborting!$"):
        compile_for_edgetpu(model_file)


def test_no_compiler_installed(bin_dir: Path, model_file: Path) -> None:
    assert find_compiler() is None
    with pytest.raises(BackendUnavailableError, match="edgetpu_compiler not installed"):
        compile_for_edgetpu(model_file)


def test_bad_compiler_path(tmp_path: Path, model_file: Path) -> None:
    with pytest.raises(BackendUnavailableError, match="not an executable edgetpu_compiler"):
        compile_for_edgetpu(model_file, compiler=tmp_path / "missing")


def test_bad_timeout(model_file: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"timeout 0 is not a time limit.*a week"):
        compile_for_edgetpu(model_file, timeout=0)


# --- a misbehaving compiler: what it starts dies with it, what it leaves is checked ------------


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1][0] != "Z"  # a zombie is dead
    except OSError:
        return False


def _daemon(pid_file: Path) -> str:
    """Python that double-forks a daemon holding stdout open, in its own session."""
    return f"""
import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))
        time.sleep(3600)
    os._exit(0)
"""


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


@needs_proc
def test_a_compiler_that_leaves_a_daemon_behind_returns_and_the_daemon_dies(
    bin_dir: Path, model_file: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "daemon.pid"
    body = _WORKING.replace("args = ", _daemon(pid_file) + "\nargs = ")
    _fake_compiler(
        bin_dir,
        body + "\nwhile not pathlib.Path(" + repr(str(pid_file)) + ").exists(): time.sleep(0.01)\n",
    )
    started = time.perf_counter()
    run = compile_for_edgetpu(model_file, timeout=20)
    assert time.perf_counter() - started < 15
    assert run.log.succeeded
    assert not _alive(int(pid_file.read_text())), "the compiler's daemon outlived the call"


@needs_proc
def test_a_hanging_compiler_with_a_child_is_stopped_with_the_child(
    bin_dir: Path, model_file: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "daemon.pid"
    _fake_compiler(bin_dir, _daemon(pid_file) + "\ntime.sleep(3600)\n")
    started = time.perf_counter()
    with pytest.raises(EdgeTPUCompilerError, match="stopped with everything it started"):
        compile_for_edgetpu(model_file, timeout=2)
    assert time.perf_counter() - started < 15
    assert pid_file.exists() and not _alive(int(pid_file.read_text()))


@pytestmark_posix
def test_a_compiler_that_floods_its_output_is_read_and_dropped(
    bin_dir: Path, model_file: Path
) -> None:
    flood = "chunk = 'x' * (1 << 20) + chr(10)\nfor _ in range(64): sys.stdout.write(chunk)\nsys.exit(1)"
    _fake_compiler(bin_dir, flood)
    with pytest.raises(EdgeTPUCompilerError, match="exit status 1") as info:
        compile_for_edgetpu(model_file, timeout=60)
    assert len(str(info.value)) < 2000


def _leaves(body: str) -> str:
    """A compiler that prints a successful log after leaving NAME_edgetpu.tflite as ``body``."""
    return f"""
args = sys.argv[1:]
out = pathlib.Path(args[args.index("-o") + 1])
model = pathlib.Path(args[-1])
target = out / (model.stem + "_edgetpu.tflite")
{body}
sys.stdout.write({LOG_21_SPLIT!r})
"""


@pytestmark_posix
@pytest.mark.parametrize(
    ("body", "refusal"),
    [
        ("target.symlink_to('/etc/passwd')", "does not read"),
        ("target.symlink_to(model)", "does not read"),
        ("import os; os.link(model, target)", "a hard link"),
        ("import os; os.mkfifo(target)", "a named pipe"),
        ("target.write_bytes(b'not a model at all')", "not a valid .tflite"),
        (
            "(pathlib.Path.cwd().parent / (model.stem + '_edgetpu.tflite'))"
            ".write_bytes(model.read_bytes())",
            "wrote no",
        ),
    ],
    ids=["symlink-system", "symlink-input", "hard-link", "fifo", "garbage", "outside-folder"],
)
def test_only_a_valid_regular_file_in_the_work_folder_is_accepted(
    bin_dir: Path, model_file: Path, body: str, refusal: str
) -> None:
    _fake_compiler(bin_dir, _leaves(body))
    with pytest.raises(EdgeTPUCompilerError, match=refusal) as info:
        compile_for_edgetpu(model_file, timeout=30)
    assert "\n" not in str(info.value)


@pytestmark_posix
def test_the_time_limit_is_the_one_of_every_child(bin_dir, model_file, monkeypatch) -> None:
    # No limit of its own: TFCOMPRESS_TIMEOUT (what --timeout sets) stops a hung compiler.
    _fake_compiler(bin_dir, _HANGING)
    monkeypatch.setenv("TFCOMPRESS_TIMEOUT", "2")
    with pytest.raises(EdgeTPUCompilerError, match=r"within 2 s.*TFCOMPRESS_TIMEOUT") as info:
        compile_for_edgetpu(model_file)
    assert info.value.timed_out
    monkeypatch.setenv("TFCOMPRESS_TIMEOUT", "inf")
    with pytest.raises(InvalidInputError, match="TFCOMPRESS_TIMEOUT"):
        compile_for_edgetpu(model_file)
