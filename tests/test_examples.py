"""Every file in examples/ runs as a user runs it and does what it says.

The scripts run with ``python examples/X.py OUT_DIR`` from an empty working folder; the
gate file runs under ``python -m pytest``, in its default (demo) mode. Examples that take
over a minute on two cores honour ``TFC_EXAMPLE_QUICK=1`` (fewer training samples and
epochs, the same steps), which these tests set; their default stays what a user wants.

``select_mnist.py`` runs in test_selection.py, whose search it is (ELSEWHERE below). Most
examples run in this process (``runpy``, ``__main__``, their own argv, folder and
environment), with TensorFlow loaded once: a fresh process per example paid TensorFlow's
import twice (the script and its converter child), about half of the file's CPU time. Two
prove the path as typed, in a fresh process: the gate file under pytest and
``quantize_mnist.py``; they start in the background when the first test needs them.
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TIMEOUT_S = 420  # each takes 20-60 s alone on two cores; a hang must not stall CI for long
PARALLEL = 2
GATE = "test_model_gate.py"


def _check_quantize(out: Path, stdout: str) -> None:
    assert (out / "mnist_int8.tflite").is_file()
    assert "wrote" in stdout and "int8" in stdout


def _check_benchmark(out: Path, stdout: str) -> None:
    from tfcompress.report.schema import validate_report

    report = validate_report(json.loads((out / "benchmark.json").read_text()))
    names = {row["artifact"] for row in report["rows"] if row["status"] == "ok"}
    assert names == {"float32.tflite", "int8.tflite", "keras"}
    assert (out / "benchmark.md").is_file() and "int8.tflite" in stdout


def _check_qat(out: Path, stdout: str) -> None:
    assert (out / "mnist_qat_int8.tflite").is_file()
    assert "qat_int8" in stdout


def _check_prune(out: Path, stdout: str) -> None:
    assert (out / "mnist_pruned_int8.tflite").is_file()
    assert "clustered: gzip" in stdout


def _check_gate(out: Path, stdout: str) -> None:
    assert "3 passed" in stdout
    assert "tfcompress accuracy gates" in stdout  # the plugin's summary of both gates


def _check_two_heads(out: Path, stdout: str) -> None:
    assert (out / "two_head_int8.tflite").is_file()
    assert "input  gain (N, 1) float32" in stdout and "output box (N, 4) float32" in stdout
    assert "cls     accuracy" in stdout and "box     snr" in stdout
    assert stdout.count("gate PASSED") == 2


def _check_edgetpu(out: Path, stdout: str) -> None:
    assert (out / "cnn_relu6_int8.tflite").is_file()
    assert json.loads((out / "cnn_relu6_edgetpu_check.json").read_text())["compatible"]
    assert "ReLU6: 8/8 (compatible: True)" in stdout and "HARD_SWISH" in stdout


def _check_mcu(out: Path, stdout: str) -> None:
    assert (out / "mnist_mcu.tflite").is_file() and (out / "model_data.cc").is_file()
    assert "runs on TFLite Micro" in stdout and "uint8_t tensor_arena[" in stdout
    assert "accuracy on 200 digits: LiteRT int8" in stdout and "within the budget" in stdout


def _check_onnx(out: Path, stdout: str) -> None:
    assert (out / "mnist_int8.onnx").is_file() and (out / "mnist_float32.onnx").is_file()
    assert "[int8, onnx]" in stdout and "max |onnx - keras|" in stdout and "int8.onnx" in stdout


def _check_selective(out: Path, stdout: str) -> None:
    assert (out / "mnist_selective_int8.tflite").is_file()
    recipe = json.loads((out / "selective_recipe.json").read_text())
    assert recipe["name"] == "int8" and len(recipe["float_nodes"]) == 1
    assert "rmse/scale" in stdout and "kept float on purpose" in stdout


def _check_quantize_tflite(out: Path, stdout: str) -> None:
    for name in ("int8", "int8_head_int16", "int4"):
        assert (out / f"landmarker_{name}.tflite").is_file()
    assert "added signature serving_default" in stdout and "litert-quantizer" in stdout
    assert "per-tensor error vs float, worst first" in stdout
    assert stdout.count("gate on every output") == 3


def _check_ptq_methods(out: Path, stdout: str) -> None:
    assert (out / "digits_int8.tflite").is_file()
    recipe = json.loads((out / "digits_int8_recipe.json").read_text())
    assert recipe["name"] == "int8" and recipe["per_channel"] is False
    assert "scored against float32 on 450 eval samples" in stdout and "kept " in stdout
    assert "same bytes: True" in stdout


def _check_compress(out: Path, stdout: str) -> None:
    assert (out / "mnist_compressed.tflite").is_file()
    assert json.loads((out / "report" / "compress.json").read_text())["passed"]
    assert "chosen: " in stdout and "x the float32 .tflite" in stdout


def _check_zoo(out: Path, stdout: str) -> None:
    from tfcompress.bench.size import measure_size
    from tfcompress.models import TFLiteModel
    from tfcompress.zoo import create_model
    from tfcompress.zoo.macs import count_macs

    # MixNet's kinds of block convert to full int8 and run in LiteRT (test_zoo.py converts
    # the MobileNets), and the Keras MAC counter agrees with the .tflite counter on them.
    artifact = measure_size(TFLiteModel((out / "mixnet_s_w0.5_int8.tflite").read_bytes()))
    assert artifact.precision == "int8"
    model = create_model("mixnet_s", input_shape=(32, 32, 1), num_classes=10, width_multiplier=0.5)
    assert artifact.macs == count_macs(model) > 0
    assert f"mixnet_s 32x32x1 width 0.5: {model.count_params():,} params, " in stdout
    assert f"{artifact.macs:,} MACs" in stdout and "int8 .tflite:" in stdout
    sums = stdout.split("LiteRT int8 output (4, 10), rows sum to [", 1)[1].split("]", 1)[0]
    assert all(abs(float(value) - 1.0) <= 0.05 for value in sums.split()), sums


@dataclass(frozen=True)
class Example:
    """How to run one example and what its run must leave behind."""

    quick: bool  # needs TFC_EXAMPLE_QUICK=1 to stay near a minute
    check: Callable[[Path, str], None]
    under_pytest: bool = False
    fresh_process: bool = False  # run as typed in a new interpreter (under_pytest: always)

    def args(self, name: str, out: Path) -> list[str]:
        if self.under_pytest:  # exactly as the gate file's docstring runs it
            flags = ["-q", "-p", "no:cacheprovider", f"--basetemp={out}"]
            return ["-m", "pytest", str(EXAMPLES / name), *flags]
        return [str(EXAMPLES / name), str(out)]


# In-process examples run in this order, the quick ones together: a change of the
# environment starts a fresh converter child.
EXAMPLE_FILES = {
    "compress_mnist.py": Example(quick=True, check=_check_compress),
    "prune_mnist.py": Example(quick=True, check=_check_prune),
    "quantize_mnist.py": Example(quick=True, check=_check_quantize, fresh_process=True),
    "qat_mnist.py": Example(quick=True, check=_check_qat),
    "onnx_int8.py": Example(quick=True, check=_check_onnx),
    "selective_int8.py": Example(quick=True, check=_check_selective),
    "ptq_methods.py": Example(quick=True, check=_check_ptq_methods),
    "quantize_tflite.py": Example(quick=True, check=_check_quantize_tflite),
    "benchmark_variants.py": Example(quick=False, check=_check_benchmark),
    GATE: Example(quick=False, check=_check_gate, under_pytest=True),
    "gate_two_heads.py": Example(quick=False, check=_check_two_heads),
    "edgetpu_check.py": Example(quick=False, check=_check_edgetpu),
    "mcu_check.py": Example(quick=False, check=_check_mcu),
    "zoo_mixnet.py": Example(quick=False, check=_check_zoo),
}


def _env(**extra: str) -> dict[str, str]:
    # The gate file reads TFC_REFERENCE/TFC_ARTIFACT/TFC_TEST_DATA: none may leak in.
    env = {k: v for k, v in os.environ.items() if not k.startswith("TFC_")}
    return {**env, "TF_CPP_MIN_LOG_LEVEL": "2", **extra}


def _run(name: str, root: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    example = EXAMPLE_FILES[name]
    out, cwd = root / "out", root / "cwd"  # anything written by accident lands in cwd
    cwd.mkdir(parents=True)
    done = subprocess.run(
        [sys.executable, *example.args(name, out)],
        cwd=cwd,
        env=_env(**({"TFC_EXAMPLE_QUICK": "1"} if example.quick else {})),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    return out, done


def _fresh(name: str) -> bool:
    example = EXAMPLE_FILES[name]
    return example.fresh_process or example.under_pytest


@pytest.fixture(scope="module")
def example_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[tuple[Path, subprocess.CompletedProcess[str]]]]]:
    """Start the selected fresh-process examples in the background; tests wait for theirs."""
    selected = {
        item.callspec.params["name"]
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec")
    }
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        futures = {
            name: pool.submit(_run, name, tmp_path_factory.mktemp(name.removesuffix(".py")))
            for name in sorted(selected)
            if _fresh(name)
        }
        yield futures
        for future in futures.values():
            future.cancel()  # those not started when a test was interrupted


# Examples whose run is another test file's fixture (the same search, made once), checked there.
ELSEWHERE = {"select_mnist.py": "test_selection.py"}


def test_every_example_has_a_test():
    assert {p.name for p in EXAMPLES.glob("*.py")} == set(EXAMPLE_FILES) | set(ELSEWHERE)
    for name, test_file in ELSEWHERE.items():
        assert f'"examples" / "{name}"' in (Path(__file__).parent / test_file).read_text()


@pytest.mark.parametrize("name", list(EXAMPLE_FILES))
def test_example_runs(name: str, example_runs, tmp_path, monkeypatch, capsys) -> None:
    if _fresh(name):
        out, done = example_runs[name].result()
        code, stdout, stderr = done.returncode, done.stdout, done.stderr
    else:
        out = tmp_path / "out"
        code, stdout, stderr = _run_here(name, out, tmp_path / "cwd", monkeypatch, capsys)
    assert code == 0, (
        f"{name} exited {code}\n--- stdout\n{stdout[-4000:]}\n--- stderr\n{stderr[-4000:]}"
    )
    EXAMPLE_FILES[name].check(out, stdout)


def _run_here(name: str, out: Path, cwd: Path, monkeypatch, capsys) -> tuple[int, str, str]:
    """``python examples/NAME OUT`` in this process: its argv, an empty folder, its variables."""
    cwd.mkdir()  # anything written by accident lands here
    monkeypatch.chdir(cwd)
    for variable in [v for v in os.environ if v.startswith("TFC_")]:
        monkeypatch.delenv(variable)  # the gate file's TFC_REFERENCE... must not leak in
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    if EXAMPLE_FILES[name].quick:
        monkeypatch.setenv("TFC_EXAMPLE_QUICK", "1")
    monkeypatch.setattr(sys, "argv", [str(EXAMPLES / name), str(out)])
    capsys.readouterr()
    try:
        runpy.run_path(str(EXAMPLES / name), run_name="__main__")
        code = 0
    except SystemExit as exit_:
        # sys.exit() is success; sys.exit('message') prints it and fails, as Python does
        code = 0 if exit_.code is None else exit_.code if isinstance(exit_.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_gate_example_refuses_half_a_configuration(tmp_path: Path) -> None:
    """One of the three variables set must not silently gate the demo model instead."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(EXAMPLES / GATE), "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=_env(TFC_ARTIFACT=str(tmp_path / "mine.tflite")),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 1, done.stdout[-2000:]
    assert "set all three of TFC_REFERENCE" in done.stdout
