"""``benchmarks/gpu_check.py`` on a fresh GPU machine: only the wheels its docstring lists.

The machine has Python, those wheels and no TensorFlow (no network either). The first test
(cheap, every run) checks that the list is tfcompress's whole base install on Linux: every
requirement of every listed wheel, read from the installed metadata, is listed. The second
(``device``: ``make device-test``, in the TensorFlow-free install) runs the script up to where
it needs a GPU on three tiny batch-1 files and records every module each of its processes
imports: each belongs to a listed wheel or to Python.
"""

from __future__ import annotations

import configparser
import importlib.metadata
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
#: Where the GPU machine is: Linux (tqdm wants colorama on Windows only).
LINUX = {"platform_system": "Linux", "sys_platform": "linux", "os_name": "posix"}
#: A venv's own tools, there before any wheel is installed.
VENV_TOOLS = {"pip", "setuptools"}


def listed_wheels() -> set[str]:
    """The wheels the docstring lists: the indented block after "the complete list"."""
    text = SCRIPT.read_text()
    docstring = text[text.index('"""') + 3 : text.index('"""', 3)]
    block = docstring.split("the complete list", 1)[1].split("::\n\n", 1)[1]
    names = block.split("\n\n", 1)[0].split()
    return {canonicalize_name(name) for name in names}


def _requirements(distribution: str) -> list[Requirement]:
    found = []
    for line in importlib.metadata.requires(distribution) or []:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate({**LINUX, "extra": ""}):
            found.append(requirement)
    return found


def test_the_listed_wheels_are_the_whole_base_install():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = [line.strip() for line in config["options"]["install_requires"].splitlines()]
    base = [Requirement(line) for line in lines if line and not line.startswith("#")]
    wanted = {"tfcompress"}
    todo = [r.name for r in base if not r.marker or r.marker.evaluate(LINUX)]
    while todo:
        name = canonicalize_name(todo.pop())
        if name not in wanted:
            wanted.add(name)
            todo += [r.name for r in _requirements(name)]
    listed = listed_wheels()
    assert "tensorflow" not in listed
    assert listed == wanted, f"missing {wanted - listed}, not needed {listed - wanted}"


# Installed at start-up through PYTHONPATH: every process of the run (the script, its
# zygote and forked workers, any fresh interpreter) appends each top-level module it
# imports to the file named by TFC_IMPORTS, as it imports it.
RECORDER = """
import os, sys

_seen = set()

def _record(event, args):
    if event == "import":
        top = args[0].split(".")[0]
        if top not in _seen:
            _seen.add(top)
            with open(os.environ["TFC_IMPORTS"], "a") as out:
                out.write(top + "\\n")

sys.addaudithook(_record)
"""

# Run by the device install's Python: the distributions of the recorded modules. An import
# is recorded when it is attempted: one that is not installed there (an optional import in a
# try block: `_wmi`, an SDK LiteRT looks for) failed, and came from no wheel.
OWNERS = """
import importlib.metadata, importlib.util, json, sys
owners = importlib.metadata.packages_distributions()
names = set(open(sys.argv[1]).read().split())
names -= set(sys.stdlib_module_names) | set(sys.builtin_module_names)
print(json.dumps({
    name: owners.get(name, []) for name in sorted(names) if importlib.util.find_spec(name)
}))
"""


@pytest.fixture(scope="module")
def batch_1_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """gpu_check's three inputs, as a tiny convolution net instead of MobileNetV2."""
    import numpy as np

    import tfcompress
    from tfcompress._compat.keras import KerasFlavour, keras_module

    keras = keras_module(KerasFlavour.KERAS3)
    keras.utils.set_random_seed(0)
    inputs = keras.Input((16, 16, 3))
    x = keras.layers.Conv2D(4, 3, activation="relu")(inputs)
    x = keras.layers.GlobalAveragePooling2D()(x)
    model = keras.Model(inputs, keras.layers.Dense(3)(x))
    calibration = np.random.default_rng(0).random((8, 16, 16, 3), dtype=np.float32)
    folder = tmp_path_factory.mktemp("gpu_models")
    for recipe in ("float32", "float16", "int8"):
        made = tfcompress.quantize(
            model, target="gpu", recipe=recipe, static_batch=1, representative_data=calibration
        )
        (folder / f"mobilenet_v2_{recipe}.tflite").write_bytes(made.model_content)
    return folder


@pytest.mark.device
def test_gpu_check_runs_on_the_listed_wheels_only(batch_1_files, tmp_path):
    from _device import device_env, device_python

    python = str(device_python())
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(textwrap.dedent(RECORDER))
    imports = tmp_path / "imports.txt"
    env = {**device_env(), "PYTHONPATH": str(hooks), "TFC_IMPORTS": str(imports)}
    out = tmp_path / "out"
    argv = [python, str(SCRIPT), "--models", str(batch_1_files), "--out", str(out), "--quick"]
    done = subprocess.run(
        argv, capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    assert "tensorflow" not in report["environment"]["versions"]
    gpu = [r for r in report["rows"] if r["backend"] == "gpu"]
    assert len(gpu) == 9
    for row in gpu:  # measured where LiteRT finds a GPU, else why not: never a crash
        assert row["status"] == "ok" or row["status"].startswith("unavailable: no GPU"), row
    assert {r["status"] for r in report["rows"] if r["backend"] == "cpu"} == {"ok"}
    assert set(report["gpu_route"]) == {"vulkan_loader", "icd_files", "gpu"}
    if not any(row["status"] == "ok" for row in gpu):  # what the GPU route found, said
        assert "gpu_check: the gpu rows: unavailable: no GPU" in done.stderr
        assert "found: Vulkan loader " in done.stderr
    assert "wrote" in done.stderr and "| file | recipe |" in done.stdout

    owners = subprocess.run(
        [python, "-c", OWNERS, str(imports)], capture_output=True, text=True, check=True
    )
    found = json.loads(owners.stdout)
    listed = listed_wheels() | VENV_TOOLS
    ours = {"tfcompress", "gpu_check", "sitecustomize"}  # the script and its package
    strays = {
        module: names
        for module, names in found.items()
        if module not in ours and not {canonicalize_name(n) for n in names} & listed
    }
    assert not strays, f"imported, from wheels the docstring does not list: {strays}"
    assert re.search(r"\bml_dtypes\b", " ".join(found)), "the GPU path was not reached"
    assert not {"tensorflow", "keras", "tf_keras"} & set(found)


@pytest.mark.parametrize("module", ["tqdm", "ml_dtypes", "flatbuffers"])
def test_a_missing_wheel_is_named(tmp_path, module):
    """Without a listed wheel the script names the module, in one line, before any work.

    (ml_dtypes: ai-edge-litert's CompiledModel imports it; its absence once read as "needs
    ai-edge-litert >= 2".)
    """
    (tmp_path / f"{module}.py").write_text(f"raise ModuleNotFoundError('no', name={module!r})\n")
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--models", str(tmp_path), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("gpu_check: ") and f"no module named {module!r}" in line, line
    assert "ai-edge-litert >= 2" not in line and "needs TensorFlow" not in line
    assert not (tmp_path / "o").exists()
