"""Build a fixture's files once per test run, also when pytest-xdist splits the run.

``make test`` runs the suite in worker processes (pytest-xdist). A session fixture runs once
per worker, so a model the whole suite shares would be trained once per worker. Instead the
first worker that needs it builds it into a folder all workers see, under a file lock, and
the others read the files it wrote. Without xdist the folder is the session's own.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest


def shared_root(factory: pytest.TempPathFactory) -> Path:
    """The folder every worker of this run can see (the session's own without xdist)."""
    base = factory.getbasetemp()
    # xdist gives each worker a basetemp ``popen-gwN`` inside the run's folder.
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / "shared"
    folder.mkdir(exist_ok=True)
    return folder


def build_once(
    factory: pytest.TempPathFactory, name: str, build: Callable[[Path], dict[str, Path]]
) -> dict[str, Path]:
    """Run ``build(folder)`` once per test run and return the paths it returned.

    Args:
        factory: pytest's ``tmp_path_factory``.
        name: The folder's name, unique per fixture.
        build: Writes the files into the folder it is given and returns them by key.

    Returns:
        The paths by key, as the one build returned them.
    """
    root = shared_root(factory)
    folder, index = root / name, root / f"{name}.json"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not index.exists():
            folder.mkdir(exist_ok=True)
            paths = build(folder)
            index.write_text(json.dumps({key: str(path) for key, path in paths.items()}))
    return {key: Path(path) for key, path in json.loads(index.read_text()).items()}
