"""Measurement workers forked from a zygote: each still a process of its own, as isolated.

tfcompress/_child/zygote.py keeps, per measuring process on Linux, a child that imported the
worker's modules once and forks one worker per runner. The benchmark and gate tests run
through it everywhere (test_shipped_models: a runtime that aborts, a hang past its limit);
these check what the zygote itself promises.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

from tfcompress._child import zygote
from tfcompress.bench.isolation import IsolatedRunner, RuntimeCrashedError
from tfcompress.models import load_model
from tfcompress.runtime import base as runtime_base
from tfcompress.runtime import create_runner
from tfcompress.runtime.litert import LiteRTRunner

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the zygote forks: Linux only")


class DrawingRunner(LiteRTRunner):
    """LiteRT's runner, whose details include a draw from NumPy's global generator."""

    backend = "drawing"

    def details(self) -> dict[str, object]:
        return {**super().details(), "draw": float(np.random.random())}


@pytest.fixture(scope="module")
def model(gate_model_files: dict[str, Path]):
    return load_model(gate_model_files["int8"])


@pytest.fixture
def x() -> np.ndarray:
    from tfcompress.samples.datasets import digits

    return digits(seed=0).test.x[:3]


def _parent(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1])


def test_each_runner_is_a_worker_of_its_own_forked_by_one_zygote(model, x):
    with create_runner(model) as here:
        expected = here.run(x)
    pids = []
    for _ in range(3):
        with IsolatedRunner(model, backend="cpu") as runner:
            for name, values in runner.run(x).items():
                np.testing.assert_array_equal(values, expected[name])
            pids.append(runner.process.pid)
            assert _parent(runner.process.pid) == zygote.running().pid
    assert len(set(pids)) == 3  # one process per runner, as without the zygote


def test_each_worker_seeds_numpy_anew_as_a_fresh_interpreter_would(model, monkeypatch):
    # Forked workers share the zygote's memory: a generator it had seeded would repeat in
    # each. This zygote loads NumPy's generator before its preload, as a preloaded module may.
    monkeypatch.setitem(runtime_base.BACKENDS, "drawing", DrawingRunner)
    monkeypatch.setattr(zygote, "_zygote", None)
    monkeypatch.setattr(zygote, "_BOOTSTRAP", "import numpy.random; " + zygote._BOOTSTRAP)
    draws = set()
    try:
        for _ in range(2):
            with IsolatedRunner(model, backend="drawing") as runner:
                draws.add(runner.details()["draw"])
                assert _parent(runner.process.pid) == zygote.running().pid
    finally:
        zygote.close_zygote()  # this test's zygote; the suite's comes back with the patch
    assert len(draws) == 2


def test_a_killed_worker_is_a_crash_naming_its_signal_and_the_next_one_starts(model, x):
    runner = IsolatedRunner(model, backend="cpu")
    first = zygote.running().pid
    os.kill(runner.process.pid, signal.SIGKILL)
    with pytest.raises(RuntimeCrashedError, match="killed by SIGKILL"):
        runner.run(x)
    assert runner.run(x)  # a fresh worker, from the same zygote
    assert zygote.running().pid == first
    runner.close()


def test_a_retired_zygote_still_reports_its_running_workers(model, x):
    runner = IsolatedRunner(model, backend="cpu")
    retired = zygote.running()
    zygote.close_zygote()  # as when the settings change while a runner is open
    assert runner.run(x) and retired.poll() is None
    os.kill(runner.process.pid, signal.SIGKILL)
    with pytest.raises(RuntimeCrashedError, match="killed by SIGKILL"):
        runner.run(x)
    runner.close()
    assert retired.wait(timeout=10) == 0  # its last worker gone, it left


def test_a_changed_environment_gets_a_zygote_that_has_it(model, monkeypatch):
    with IsolatedRunner(model, backend="cpu"):
        before = zygote.running().pid
    monkeypatch.setenv("TFC_ZYGOTE_TEST", "seen")
    with IsolatedRunner(model, backend="cpu") as runner:
        assert zygote.running().pid != before
        environ = Path(f"/proc/{runner.process.pid}/environ").read_bytes().split(b"\0")
        assert b"TFC_ZYGOTE_TEST=seen" in environ


def test_the_next_test_of_a_suite_keeps_the_zygote(model, monkeypatch):
    with IsolatedRunner(model, backend="cpu"):
        before = zygote.running().pid
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/test_other.py::test_next (call)")
    with IsolatedRunner(model, backend="cpu"):
        assert zygote.running().pid == before


def test_a_worker_starts_in_the_callers_folder_of_the_moment(model, tmp_path, monkeypatch):
    with IsolatedRunner(model, backend="cpu"):
        before = zygote.running().pid
    monkeypatch.chdir(tmp_path)
    with IsolatedRunner(model, backend="cpu") as runner:
        assert zygote.running().pid == before  # the same zygote...
        assert Path(f"/proc/{runner.process.pid}/cwd").resolve() == tmp_path.resolve()


def test_a_removed_working_folder_still_gets_a_forked_worker(model, x, tmp_path, monkeypatch):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()  # as when a script's temporary folder is cleaned up under it
    with IsolatedRunner(model, backend="cpu") as runner:
        assert runner.run(x) and type(runner.process).__name__ == "Forked"


def test_a_dead_zygote_is_replaced(model, x):
    with IsolatedRunner(model, backend="cpu"):
        dead = zygote.running()
    dead.kill()
    dead.wait()
    with IsolatedRunner(model, backend="cpu") as runner:
        assert runner.run(x)
        assert zygote.running().pid != dead.pid


def test_no_zygote_when_the_environment_says_so(model, x, monkeypatch):
    monkeypatch.setenv(zygote.NO_ZYGOTE, "1")
    with IsolatedRunner(model, backend="cpu") as runner:
        assert runner.run(x)
        assert type(runner.process).__name__ == "Popen"


def test_without_a_zygote_workers_start_as_fresh_interpreters(model, x, monkeypatch):
    monkeypatch.setattr(zygote, "_zygote", None)
    monkeypatch.setattr(zygote, "_failed", set())
    monkeypatch.setattr(zygote, "_BOOTSTRAP", "import sys; sys.exit(3)")  # never ready
    with IsolatedRunner(model, backend="cpu") as runner:
        assert runner.run(x)
        assert type(runner.process).__name__ == "Popen"
        assert zygote.running() is None
    with IsolatedRunner(model, backend="cpu") as runner:  # no second try under these settings
        assert type(runner.process).__name__ == "Popen"
