"""The device install (``pip install 'tfcompress[device]'``): .tflite files, no TensorFlow.

Run by ``make device-test`` (CI, after ``make test``), which builds ``.venv-device``; each
command runs with that install's Python on ``.tflite`` files built here first. What needs
TensorFlow fails in one line naming the install that adds it (exit 2).
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from _device import device_env, device_files, device_python, run_device

pytestmark = pytest.mark.device

TF_HINT = "pip install 'tfcompress[tf]'"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, gate_model_files) -> dict[str, Path]:
    return device_files(tmp_path_factory, gate_model_files)


def test_the_install_has_no_tensorflow_and_imports_tfcompress():
    python = device_python()
    probe = (
        "import importlib.util, json, sys, tfcompress, tfcompress.testing; "
        "print(json.dumps({n: importlib.util.find_spec(n) is not None for n in "
        "('tensorflow', 'keras', 'tf_keras', 'tensorflow_model_optimization', 'distributed', "
        "'ai_edge_litert')}))"
    )
    done = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, env=device_env(), check=True
    )
    assert json.loads(done.stdout) == {
        "tensorflow": False,
        "keras": False,
        "tf_keras": False,
        "tensorflow_model_optimization": False,
        "distributed": True,
        "ai_edge_litert": True,
    }
    assert run_device("--help").returncode == 0


def test_inspect_benchmark_gate_and_edgetpu_run_there(files, tmp_path):
    inspected = run_device("inspect", str(files["int8"]))
    assert inspected.returncode == 0, inspected.stderr
    assert "FULLY_CONNECTED" in inspected.stdout

    measured = run_device(
        "benchmark",
        str(files["float32"]),
        str(files["int8"]),
        "--backends",
        "cpu,cpu-compiled,gpu,edgetpu",
        "--data",
        str(files["test"]),
        "--runs",
        "5",
        "--min-seconds",
        "0.05",
        "--warmup-seconds",
        "0",
        "--json",
    )
    assert measured.returncode == 0, measured.stderr
    report = json.loads(measured.stdout)
    assert "tensorflow" not in report["environment"]["versions"]
    rows = {(r["artifact"], r["backend"]): r for r in report["rows"]}
    for artifact in ("float32.tflite", "int8.tflite"):
        assert rows[(artifact, "cpu")]["status"] == "ok"
        assert rows[(artifact, "cpu")]["accuracy"] > 0.9
        for backend in ("cpu-compiled", "gpu", "edgetpu"):  # measured, or why not: never a crash
            assert rows[(artifact, backend)]["status"].split(":")[0] in {"ok", "unavailable"}

    passed = run_device(
        "gate", str(files["float32"]), str(files["int8"]), "--eval", str(files["test"])
    )
    assert passed.returncode == 0, passed.stderr
    failed = run_device(
        "gate", str(files["float32"]), str(files["damaged"]), "--eval", str(files["test"])
    )
    assert failed.returncode == 1, failed.stderr

    linted = run_device("edgetpu", str(files["int8"]), "--json")
    assert linted.returncode in (0, 1), linted.stderr
    assert json.loads(linted.stdout)["ops"]


def test_the_pytest_gate_plugin_runs_there(files, tmp_path):
    (tmp_path / "test_model_gate.py").write_text(
        textwrap.dedent(
            f"""
            import pytest

            @pytest.mark.accuracy_gate(max_drop=0.05, mode="tolerant")
            def test_int8(accuracy_gate):
                accuracy_gate({str(files["float32"])!r}, {str(files["int8"])!r},
                              {str(files["test"])!r})

            def test_damaged(accuracy_gate):
                accuracy_gate({str(files["float32"])!r}, {str(files["damaged"])!r},
                              {str(files["test"])!r}, max_drop=0.01)
            """
        )
    )
    done = subprocess.run(
        [str(device_python()), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=device_env(),
        timeout=300,
        check=False,
    )
    assert "1 failed, 1 passed" in done.stdout, done.stdout[-2000:]
    assert "test_model_gate.py::test_damaged" in done.stdout


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["inspect", "{reference}"], "loading a Keras model"),
        (["benchmark", "{reference}", "{int8}"], "the keras backend"),
        (["gate", "{reference}", "{int8}", "--eval", "{test}"], "loading a Keras model"),
        (["quantize", "{reference}", "--data", "{test}", "--out", "{out}"], "Keras model"),
        (
            ["compress", "{reference}", "--data", "{test}", "--eval", "{test}", "--out", "{out}"],
            "Keras model",
        ),
        (
            ["qat", "{reference}", "--train", "{test}", "--eval", "{test}", "--out", "{out}"],
            "Keras model",
        ),
        (["select", "--train", "{test}", "--eval", "{test}", "--max-size", "1MB"], "select"),
        (["zoo", "mobilenet_v2"], "zoo"),
        (["demo"], "the demo"),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else None,
)
def test_what_needs_tensorflow_says_so_in_one_line(files, tmp_path, argv, what):
    names = {k: str(v) for k, v in files.items()} | {"out": str(tmp_path / "out.tflite")}
    done = run_device(*(a.format(**names) for a in argv))
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("INFO")]
    assert len(lines) == 1, done.stderr
    assert what in lines[0] and TF_HINT in lines[0], lines[0]
    assert "internal error" not in lines[0]
