"""The wheel ``make wheel`` builds: what a device installs, tfcompress not being on the index.

Built here from a copy of the sources pip reads (``setup.cfg``, ``pyproject.toml``, the
README and ``tfcompress/``) with this environment's setuptools, so no network is needed and
the checkout gets no ``build/``; ``make wheel`` runs the same ``pip wheel`` in an isolated
build environment.
"""

from __future__ import annotations

import email
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import tfcompress

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("setup.cfg", "pyproject.toml", "README.md")
#: Fenced blocks whose lines a reader runs (a CI workflow's `run:` lines included).
SHELL = {"bash", "sh", "shell", "yaml", "yml"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "tfcompress", source / "tfcompress", ignore=shutil.ignore_patterns("__pycache__")
    )
    out = tmp_path_factory.mktemp("dist")
    argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    done = subprocess.run(
        [*argv, "--wheel-dir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (built,) = out.glob("*.whl")
    return built


def test_the_wheel_holds_the_package_and_its_data_only(wheel):
    assert wheel.name == f"tfcompress-{tfcompress.__version__}-py3-none-any.whl"
    names = set(zipfile.ZipFile(wheel).namelist())
    info = f"tfcompress-{tfcompress.__version__}.dist-info"
    assert {name.split("/")[0] for name in names} == {"tfcompress", info}
    sources = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "tfcompress").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert "tfcompress/py.typed" in sources  # the package data: typed for its users
    assert sources == {name for name in names if not name.startswith(info)}
    assert not [n for n in names if re.match(r"(tests|benchmarks|examples|fuzzing)/", n)]


def test_the_wheel_declares_the_installs_the_docs_give(wheel):
    archive = zipfile.ZipFile(wheel)
    info = f"tfcompress-{tfcompress.__version__}.dist-info"
    metadata = email.message_from_string(archive.read(f"{info}/METADATA").decode())
    python = metadata["Requires-Python"]
    assert {"<3.14", ">=3.11"} == set(python.split(",")), python  # 3.12 and 3.13 allowed
    assert {"device", "tf", "onnx", "mcu", "all"} <= set(metadata.get_all("Provides-Extra"))
    requires = metadata.get_all("Requires-Dist")
    device = [r for r in requires if 'extra == "device"' in r]
    assert device and not [r for r in device if "tensorflow" in r]
    base = [r for r in requires if "extra ==" not in r]
    assert any(r.startswith("ai-edge-litert") for r in base)
    assert not [r for r in base if r.startswith(("tensorflow", "tf-keras"))]
    entry_points = archive.read(f"{info}/entry_points.txt").decode()
    assert "tfcompress = tfcompress.cli:entry" in entry_points
    assert "tfcompress = tfcompress.testing.plugin" in entry_points


def test_make_wheel_builds_it_without_stale_files():
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\nwheel:", 1)[1].split("\n\n", 1)[0]
    assert "rm -rf build" in recipe  # setuptools would carry a deleted module over
    assert "pip wheel --no-deps --wheel-dir dist ." in recipe


def test_every_install_command_in_the_docs_installs_what_exists():
    """tfcompress is not on the package index: a command installs the checkout or the wheel.

    A bare ``tfcompress`` requirement is right only from a wheelhouse (``--no-index``).
    """
    from _doc_commands import doc_files

    wrong = []
    for path in doc_files():
        language = None  # outside a fenced block; `text` and unlabelled blocks are not run
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip().startswith("```"):
                language = line.strip()[3:].strip() if language is None else None
                continue
            if language not in SHELL or "pip install" not in line:
                continue
            command = line.split("pip install", 1)[1].split("#", 1)[0]
            bare = re.findall(
                r"""(?:^|\s)['"]?(tfcompress(?:\[[\w,-]+\])?)['"]?(?=\s|$)""", command
            )
            if bare and "--no-index" not in command:
                wrong.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not wrong, "installs tfcompress from the package index, where it is not:\n" + "\n".join(
        wrong
    )
