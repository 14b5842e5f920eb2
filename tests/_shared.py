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

import numpy as np
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


def summed_terms(model) -> int:
    """How many products a Keras model sums along its path: each kernel's fan-in, added up.

    The bound on how far two float kernels may drift apart grows with it (see `kernel_atol`).
    Depthwise kernels count every channel: an upper bound, never an underestimate.
    """
    kernels = [w for layer in model.layers for w in layer.get_weights() if np.ndim(w) >= 2]
    return max(1, sum(int(np.prod(np.shape(k)[:-1])) for k in kernels))


def kernel_atol(reference, *, terms: int, step: float | None = None, dtype="float32") -> float:
    """How far two correct kernels' outputs may differ, derived from the values compared.

    Two float kernels (XNNPACK or the reference kernels, TensorFlow, ONNX Runtime, numpy) sum
    in different orders, blocks and with or without FMA: a sum of ``terms`` products may round
    by up to ``terms`` epsilons of ``dtype`` at the values' magnitude (Higham's bound for a dot
    product). Integer kernels round at each requantization instead: with ``step`` (the
    output's quantization scale) each of ``terms`` requantizing ops may move it by one step.

    Args:
        reference: One side's values (their magnitude scales the bound).
        terms: Products summed along the path (float), or requantizing ops (with ``step``).
        step: The quantization scale of int8 outputs; None for float outputs.
        dtype: The float type the kernels compute in (``float16`` on a GPU in half precision).

    Returns:
        The absolute tolerance for ``np.testing.assert_allclose``.
    """
    if step is not None:
        return float(step) * terms
    magnitude = float(np.max(np.abs(reference)))
    return float(np.finfo(dtype).eps) * magnitude * terms


def grid_step(values) -> float:
    """The quantization step of dequantized int8 values: the smallest gap between distinct ones."""
    return float(np.diff(np.unique(np.asarray(values, dtype=np.float64))).min())
