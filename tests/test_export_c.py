"""export-c writes C++ that compiles or refuses, all files or none, and the firmware a board builds.

Every hostile name class (keywords, reserved and predefined names, a leading digit, a leading
underscore and capital, a double underscore; names from the model's file and from ``--name``;
``--out`` names that are no identifier) is exported and compiled with the system's g++
(``-Wall -Wextra -pedantic -Werror``, skipped without one), and ``OUT_main.cc`` and
``OUT_ops.h`` are checked with ``-fsyntax-only`` against stub TFLM headers that declare the
API they use and exactly the resolver methods of the kept table. The arena ``OUT_main.cc``
declares is TFLM's measurement (needs ``tflite-micro``).
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tfcompress.cli import main
from tfcompress.targets.mcu import export_c
from tfcompress.targets.mcu._resolver_table import BUILTIN, COMMIT, CUSTOM
from tfcompress.targets.mcu.c_names import identifier_problem
from tfcompress.targets.mcu.resolver import parse_header

COMPILER = shutil.which("g++") or shutil.which("clang++")
_FLAGS = ["-std=c++11", "-Wall", "-Wextra", "-pedantic", "-Werror"]
# A model file's name -> the array name export-c gives it (xxd -i's where that compiles).
HOSTILE_FILES = {
    "while": "while_tflite",
    "int": "int_tflite",
    "class": "class_tflite",
    "main": "main_tflite",
    "std": "std_tflite",
    "linux": "linux_tflite",
    "__FILE__": "FILE_tflite",
    "8bit.tflite": "model_8bit_tflite",
    "_Foo.tflite": "Foo_tflite",
    "a__b.tflite": "a_b_tflite",
    "q\"b'\n#error x.tflite": "q_b_error_x_tflite",
    "ok_model.tflite": "ok_model_tflite",
}
HOSTILE_NAMES = ["while", "int", "class", "main", "std", "linux", "__FILE__", "9x", "_Foo",
                 "a__b", "model_", "tensor_arena", "X_H_", "a-b"]  # fmt: skip


def _converted(graph, width: int, *, int8: bool = True) -> bytes:
    """``graph`` on a (1, width) float input as a .tflite: full int8 with int8 I/O, or float."""
    import tensorflow as tf

    function = tf.function(graph, input_signature=[tf.TensorSpec((1, width), tf.float32)])
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function.get_concrete_function()])
    if int8:
        values = np.linspace(-1, 1, 8, dtype=np.float32)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([np.full((1, width), v)] for v in values)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = converter.inference_output_type = tf.int8
    return converter.convert()


@pytest.fixture(scope="module")
def relu_int8() -> bytes:
    """A one-op int8 model (RELU, int8 input and output)."""
    import tensorflow as tf

    return _converted(tf.nn.relu, 4)


@pytest.fixture(scope="module")
def sign_float() -> bytes:
    """A float model with SIGN, an op TFLM's resolver has no Add method for."""
    import tensorflow as tf

    return _converted(tf.sign, 4, int8=False)


@pytest.fixture(scope="module")
def clustered_int8() -> bytes:
    """relu(x @ w) with a (64, 256) weight of 4 distinct values, full int8: 2-bit tables."""
    import tensorflow as tf

    w = np.random.default_rng(0).choice([-1.0, -0.5, 0.5, 1.0], (64, 256)).astype(np.float32)
    return _converted(lambda x: tf.nn.relu(tf.matmul(x, w)), 64)


def _stub_headers(root: Path) -> Path:
    """TFLM headers declaring the API OUT_main.cc uses and every method of the kept table."""
    micro = root / "tensorflow" / "lite" / "micro"
    (root / "tensorflow" / "lite" / "schema").mkdir(parents=True)
    micro.mkdir(parents=True, exist_ok=True)
    methods = "".join(
        f"  TfLiteStatus {m}();\n" for m in sorted({*BUILTIN.values(), *CUSTOM.values()})
    )
    (micro / "micro_mutable_op_resolver.h").write_text(
        "#pragma once\n#include <cstddef>\n#include <cstdint>\n"
        "enum TfLiteStatus { kTfLiteOk = 0, kTfLiteError = 1 };\n"
        "enum TfLiteType { kTfLiteFloat32 = 1, kTfLiteInt16 = 7, kTfLiteInt8 = 9 };\n"
        "struct TfLiteQuantizationParams { float scale; std::int32_t zero_point; };\n"
        "union TfLitePtrUnion { std::int8_t* int8; std::int16_t* i16; char* raw; float* f; };\n"
        "struct TfLiteTensor { TfLiteType type; TfLitePtrUnion data; std::size_t bytes;\n"
        "  TfLiteQuantizationParams params; };\n"
        "namespace tflite {\nclass MicroOpResolver {};\n"
        "template <unsigned int tOpCount> class MicroMutableOpResolver : public MicroOpResolver "
        "{\n public:\n" + methods + "};\n}  // namespace tflite\n"
    )  # fmt: skip
    (micro / "micro_interpreter.h").write_text(
        '#pragma once\n#include "tensorflow/lite/micro/micro_mutable_op_resolver.h"\n'
        "namespace tflite {\nstruct Model { std::uint32_t version() const; };\n"
        "const Model* GetModel(const void* buffer);\nclass MicroInterpreter {\n public:\n"
        "  MicroInterpreter(const Model* model, const MicroOpResolver& op_resolver,\n"
        "                   std::uint8_t* tensor_arena, std::size_t tensor_arena_size);\n"
        "  TfLiteStatus AllocateTensors();\n  TfLiteStatus Invoke();\n"
        "  TfLiteTensor* input(std::size_t index);\n  TfLiteTensor* output(std::size_t index);\n"
        "  std::size_t inputs_size() const;\n  std::size_t arena_used_bytes() const;\n};\n}\n"
    )  # fmt: skip
    (micro / "micro_log.h").write_text("#pragma once\nvoid MicroPrintf(const char* format, ...);\n")
    (micro / "system_setup.h").write_text(
        "#pragma once\nnamespace tflite { void InitializeTarget(); }\n"
    )
    (root / "tensorflow" / "lite" / "schema" / "schema_generated.h").write_text(
        "#pragma once\n#define TFLITE_SCHEMA_VERSION (3)\n"
    )
    return root


def _compile(*args: str | Path, cwd: Path) -> None:
    if COMPILER is None:
        pytest.skip("no C++ compiler (g++ or clang++) on PATH")
    done = subprocess.run([COMPILER, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


def test_hostile_names_are_fixed_or_refused_and_everything_compiles(relu_int8, tmp_path, capsys):
    models, out = tmp_path / "models", tmp_path / "out"
    models.mkdir()
    out.mkdir()
    written = []
    for index, (file_name, expected) in enumerate(HOSTILE_FILES.items()):
        (models / file_name).write_bytes(relu_int8)
        result = export_c(models / file_name, out / f"m{index}", arena=4096)
        assert result.name == expected and identifier_problem(result.name) is None
        fixed = file_name.replace(".tflite", "_tflite") != expected
        assert any(expected in note for note in result.notes) == fixed, result.notes
        written.append(result)
    for name in HOSTILE_NAMES:  # chosen names are refused in one line, nothing written
        code = main(["export-c", str(models / "ok_model.tflite"), "--out", str(out / "x"),
                     "--name", name, "--arena", "4KB"])  # fmt: skip
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and "cannot name the array" in err, (name, err)
    assert not list(out.glob("x*"))
    # --out names: one that is no identifier gets a guard from a sanitised one
    assert main(["export-c", str(models / "ok_model.tflite"), "--out", str(out / "8bit"),
                 "--name", "eight", "--arena", "4096"]) == 0  # fmt: skip
    assert "#ifndef MODEL_8BIT_H_" in (out / "8bit.h").read_text()
    headers = [r.header.name for r in written] + ["8bit.h"]
    names = [r.name for r in written] + ["eight"]
    user = "".join(f'#include "{h}"\n' for h in headers) + "#include <cstdio>\nint main() {\n"
    user += "".join(f'  std::printf("%u %d\\n", {n}_len, {n}[4]);\n' for n in names)
    (out / "user.cc").write_text(user + "  return 0;\n}\n")
    sources = [r.source.name for r in written] + ["8bit.cc", "user.cc"]
    _compile(*_FLAGS, "-o", "all", *sources, cwd=out)
    ran = subprocess.run([str(out / "all")], capture_output=True, text=True, check=True)
    assert ran.stdout.split()[::2] == [str(len(relu_int8))] * len(names)
    assert ran.stdout.split()[1::2] == [str(ord("T"))] * len(names)  # "TFL3" at offset 4
    _compile("-std=gnu++11", "-Wall", "-Wextra", "-pedantic", "-Werror", "-c", *sources, cwd=out)
    stubs = _stub_headers(tmp_path / "stubs")
    mains = [r.main.name for r in written if r.main is not None] + ["8bit_main.cc"]
    assert len(mains) == len(names)
    _compile(*_FLAGS, "-fsyntax-only", f"-I{stubs}", *mains, cwd=out)


@pytest.mark.parametrize(
    "out, words",
    [
        (".", "give a path and a base name"),
        ("", "give a path and a base name"),
        ("folder/", "give a path and a base name"),
        ("folder", "is a directory"),
        ("/dev/null", "is a character device"),
        ("/dev/null.cc", "is a character device"),
        ('q"b', "#include"),
        ("nl\n#error injected\n//", "give a path and a base name"),
        ("nl\n#error injected\nx", "#include"),
        ("-dash", "#include"),
    ],
)
def test_out_places_that_cannot_hold_the_files_are_one_line(relu_int8, tmp_path, out, words,
                                                             capsys, monkeypatch):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.tflite").write_bytes(relu_int8)
    (tmp_path / "folder").mkdir()
    before = sorted(tmp_path.rglob("*"))
    assert main(["export-c", "m.tflite", f"--out={out}", "--arena", "4096"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "injected\n" not in err, err
    assert sorted(tmp_path.rglob("*")) == before


def test_the_files_are_written_all_or_none(relu_int8, tmp_path, monkeypatch, capsys):
    import tfcompress._files as files

    (tmp_path / "m.tflite").write_bytes(relu_int8)
    synced = []

    def full_disk_on_the_second(fd: int) -> None:
        synced.append(fd)
        if len(synced) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files.os, "fsync", full_disk_on_the_second)
    out = tmp_path / "o"
    assert main(["export-c", str(tmp_path / "m.tflite"), "--out", str(out), "--arena", "4096"]) == 2
    err = capsys.readouterr().err
    assert "none of the 4 files was written" in err and "free some space" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.tflite"]  # no file, no temp
    monkeypatch.undo()
    assert main(["export-c", str(tmp_path / "m.tflite"), "--out", str(out), "--arena", "4096"]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["m.tflite", "o.cc", "o.h", "o_main.cc", "o_ops.h"]


def test_the_resolver_has_exactly_the_models_ops(relu_int8, sign_float, tmp_path, capsys):
    (tmp_path / "relu.tflite").write_bytes(relu_int8)
    assert main(["export-c", str(tmp_path / "relu.tflite"), "--out", str(tmp_path / "r"),
                 "--arena", "2KiB", "--json"]) == 0  # fmt: skip
    payload = json.loads(capsys.readouterr().out)
    assert payload["ops"] == [{"op": "RELU", "method": "AddRelu"}]
    assert payload["arena_bytes"] == 2048 and payload["resolver_methods_from"].endswith(COMMIT)
    ops = (tmp_path / "r_ops.h").read_text()
    assert "tflite::MicroMutableOpResolver<1> relu_tflite_op_resolver" in ops
    assert re.findall(r"resolver\.(Add\w+)\(\)", ops) == ["AddRelu"]
    assert "kArenaSize = 2048;" in (tmp_path / "r_main.cc").read_text()
    # an op without an Add method: the array is written, the resolver and main are not, said
    (tmp_path / "sign.tflite").write_bytes(sign_float)
    assert main(["export-c", str(tmp_path / "sign.tflite"), "--out", str(tmp_path / "s")]) == 0
    text = capsys.readouterr().out
    assert "no Add method for SIGN" in text and "s_ops.h" in text
    assert sorted(p.name for p in tmp_path.glob("s*")) == ["s.cc", "s.h", "sign.tflite"]
    # over an earlier export with all four files: the two left are named as stale
    assert main(["export-c", str(tmp_path / "sign.tflite"), "--out", str(tmp_path / "r"),
                 "--force"]) == 0  # fmt: skip
    assert "r_ops.h is left from an earlier export" in capsys.readouterr().out


def test_the_kept_resolver_table_is_tflms():
    schema = pytest.importorskip("tflite_micro.tensorflow.lite.micro.python.schema_py_generated")
    names = {k for k in vars(schema.BuiltinOperator) if not k.startswith("_")}
    assert set(BUILTIN) <= names  # every key is a builtin op of TFLM's own schema
    # The header at COMMIT has 120 Add methods: 100 builtin, 17 custom, AddEthosU (its name
    # is not a literal) and the generic AddBuiltin and AddCustom.
    assert (len(BUILTIN), len(CUSTOM)) == (100, 17)
    assert all(re.fullmatch(r"Add[A-Z]\w*", m) for m in (*BUILTIN.values(), *CUSTOM.values()))
    assert re.fullmatch(r"[0-9a-f]{40}", COMMIT)
    assert (BUILTIN["CONV_2D"], BUILTIN["FULLY_CONNECTED"], CUSTOM["TFLM_DECODE"]) == (
        "AddConv2D", "AddFullyConnected", "AddDecode")  # fmt: skip
    header = os.environ.get("TFLM_RESOLVER_HEADER")  # the header at COMMIT: regenerate, compare
    if header:
        assert parse_header(Path(header).read_text()) == (BUILTIN, CUSTOM)


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("tflite_micro") is None, reason="needs tflite-micro"
)
def test_main_declares_the_measured_arena_and_mcu_lists_the_ops(relu_int8, tmp_path, capsys):
    from tfcompress.targets.mcu import check

    model = tmp_path / "relu.tflite"
    model.write_bytes(relu_int8)
    report = check(model)
    assert main(["export-c", str(model), "--out", str(tmp_path / "r")]) == 0
    text = (tmp_path / "r_main.cc").read_text()
    assert f"kArenaSize = {report.arena.recommended};" in text and "+ 10%" in text
    assert main(["mcu", str(model)]) == 0
    assert "ops to register: tflite::MicroMutableOpResolver<1> with AddRelu()" in (
        capsys.readouterr().out
    )
    assert report.to_dict()["resolver"] == {"size": 1, "methods": ["AddRelu"],
                                            "without_method": []}  # fmt: skip


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("tflite_micro") is None, reason="needs tflite-micro"
)
def test_lut_weights_take_less_flash_and_compute_the_same(clustered_int8, relu_int8, tmp_path,
                                                          capsys):  # fmt: skip
    from tfcompress.models.tflite_file import read_tflite
    from tfcompress.targets.mcu.export_c import flash_bytes

    model = tmp_path / "clustered.tflite"
    model.write_bytes(clustered_int8)
    assert main(["export-c", str(model), "--out", str(tmp_path / "c"), "--lut", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    lut = payload["lut"]
    assert [(t["bits"], t["bytes"]) for t in lut["tensors"]] == [(2, 64 * 256)]
    assert lut["outputs_identical"] and lut["max_difference"] == [0.0] and lut["samples"] == 8
    assert lut["flash_bytes_before"] == flash_bytes(len(clustered_int8))
    assert lut["flash_bytes_after"] == payload["flash_bytes"] < lut["flash_bytes_before"] * 0.7
    assert lut["arena_bytes_after"] > lut["arena_bytes_before"]  # the decoded weights
    assert payload["arena_bytes"] == lut["arena_bytes_after"]
    assert {"op": "CUSTOM:TFLM_DECODE", "method": "AddDecode"} in payload["ops"]
    assert "resolver.AddDecode()" in (tmp_path / "c_ops.h").read_text()
    written = (tmp_path / "c.cc").read_text()
    array = bytes(int(b, 16) for b in re.findall(r"0x([0-9a-f]{2})", written))
    assert len(array) == payload["model_bytes"]
    assert "CUSTOM:TFLM_DECODE" in [o.opcode for o in read_tflite(array).subgraphs[0].operators]
    # nothing a table shrinks: one line, exit 2, nothing written
    (tmp_path / "relu.tflite").write_bytes(relu_int8)
    assert main(["export-c", str(tmp_path / "relu.tflite"), "--out", str(tmp_path / "r"),
                 "--lut"]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "no int8 weight has few enough distinct values" in err and err.count("\n") == 1
    assert not list(tmp_path.glob("r.*")) and not list(tmp_path.glob("r_*"))


@pytest.mark.skipif(
    not os.environ.get("TFLM_LIB"), reason="set TFLM_LIB (and TFLM_CXXFLAGS) to a TFLM build"
)
def test_main_links_and_runs_against_a_real_tflm(relu_int8, tmp_path):
    """Opt-in: TFLM_LIB=libtensorflow-microlite.a, TFLM_CXXFLAGS='-isystem TFLM_ROOT ...'."""
    model = tmp_path / "relu.tflite"
    model.write_bytes(relu_int8)
    assert main(["export-c", str(model), "--out", str(tmp_path / "m"), "--arena", "2KiB"]) == 0
    flags = os.environ.get("TFLM_CXXFLAGS", "").split()
    _compile("-std=c++17", "-DTF_LITE_STATIC_MEMORY", *flags, *_FLAGS[1:], "m_main.cc", "m.cc",
             os.environ["TFLM_LIB"], "-o", "m_main", cwd=tmp_path)  # fmt: skip
    ran = subprocess.run([str(tmp_path / "m_main")], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    used = int(re.search(r"arena used (\d+) of 2048 bytes", ran.stdout + ran.stderr).group(1))
    assert 0 < used <= 2048
