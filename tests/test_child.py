"""The one child-process mechanism (tfcompress/_child/): results, errors, crashes, limits.

Every native call that model or data bytes can drive (conversion, the MLIR quantizer, LiteRT
Quantizer's calibration, layer-error reports) goes through ``_child.call``; these tests pin
what a caller sees when the child answers, raises, crashes, hangs or allocates too much.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tfcompress import _child
from tfcompress.errors import (
    ChildTimeoutError,
    InvalidInputError,
    NativeCrashError,
    ResourceLimitError,
)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("tfcompress-"))


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    _child.close_warm_child()


def test_a_call_returns_its_result_and_a_warm_child_serves_the_next(private_tmp):
    first = _child.call("os:getpid", what="asking the pid")
    assert first != os.getpid()
    assert _child.call("os:getpid", what="asking again") == first  # the same warm child
    assert _child.call("os:getpid", what="a child of its own", warm=False) != first


def test_a_typed_error_crosses_as_it_was(private_tmp):
    with pytest.raises(InvalidInputError, match="must be a positive whole number"):
        _child.call(
            "tfcompress._limits:Limit.value",
            _limit_with_bad_value(),
            what="reading a limit",
            env={**os.environ, "TFCOMPRESS_EXAMPLE_LIMIT": "-3"},
            warm=False,
        )


def _limit_with_bad_value():
    from tfcompress._limits import Limit

    return Limit("TFCOMPRESS_EXAMPLE_LIMIT", 10, "pixels")


def test_a_crash_is_one_error_naming_the_signal_and_leaves_no_folder(private_tmp):
    with pytest.raises(NativeCrashError, match=r"crashed in native code \(SIGABRT\)") as caught:
        _child.call("os:abort", what="the runtime on 'model'")
    assert "Nothing was written" in str(caught.value)
    assert NativeCrashError.exit_code == 2
    assert _leftovers(private_tmp) == []
    assert _child.call("os:getpid", what="after a crash") > 0  # a fresh child answers


def test_a_call_past_its_time_limit_is_stopped(private_tmp):
    started = time.monotonic()
    with pytest.raises(ChildTimeoutError, match=r"time limit of 1 s.*TFCOMPRESS_TIMEOUT"):
        _child.call("time:sleep", 60, what="a slow conversion", timeout=1)
    assert time.monotonic() - started < 30
    assert _leftovers(private_tmp) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_DATA is Linux's")
def test_an_allocation_past_the_memory_limit_is_one_error(private_tmp):
    with pytest.raises(ResourceLimitError, match=r"memory.*TFCOMPRESS_MEMORY_LIMIT"):
        _child.call("numpy:ones", (4 * 2**30,), what="a FILL sized by the data", memory=2**30)


@pytest.mark.parametrize("value", ["inf", "nan", "1e308", "-1", "0", "ten"])
def test_an_impossible_time_limit_is_refused(monkeypatch, value):
    monkeypatch.setenv("TFCOMPRESS_TIMEOUT", value)
    with pytest.raises(InvalidInputError, match=r"TFCOMPRESS_TIMEOUT.*at most 604800"):
        _child.call("os:getpid", what="anything")


@pytest.mark.parametrize("value", ["lots", "12", "0.5GB", "inf"])
def test_an_impossible_memory_limit_is_refused(monkeypatch, value):
    monkeypatch.setenv("TFCOMPRESS_MEMORY_LIMIT", value)
    with pytest.raises(InvalidInputError, match=r"TFCOMPRESS_MEMORY_LIMIT.*at least 1 GiB"):
        _child.call("os:getpid", what="anything")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
@pytest.mark.parametrize("started_by", ["main thread", "another thread"])
def test_the_child_dies_with_its_parent(started_by):
    # The kernel's parent-death signal is keyed to the thread that started the child; the
    # children started from a thread that is gone, or from the main thread, die either way,
    # and so do the worker and the call child busy in a call when the parent is killed.
    script = textwrap.dedent(
        """
        import os, threading
        from tfcompress import _child

        def start():
            worker = _child.Worker()
            print(_child.call("os:getpid", what="pid"), worker.call("os:getpid", what="pid"))
            threading.Thread(target=worker.call, args=("time:sleep", 60), kwargs={"what": "w"},
                             daemon=True).start()
            _child.call("os:getpid", what="pid")
            threading.Thread(target=_child.call, args=("time:sleep", 60), kwargs={"what": "c"},
                             daemon=True).start()

        if os.environ["STARTED_BY"] == "main thread":
            start()
        else:
            thread = threading.Thread(target=start)
            thread.start()
            thread.join()
        print(flush=True)
        import time; time.sleep(1)  # both children are inside their calls
        os.kill(os.getpid(), 9)  # no clean-up of ours runs
        """
    )
    env = {**os.environ, "STARTED_BY": started_by}
    parent = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, check=False, env=env)  # fmt: skip
    assert parent.returncode == -signal.SIGKILL, parent.stderr
    children = [int(pid) for pid in parent.stdout.split()]
    assert len(children) == 2
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(map(_gone, children)):
        time.sleep(0.05)
    assert all(map(_gone, children))


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists() or "Z" in _state(pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return "Z"


def test_a_call_whose_child_exits_unanswered_is_a_bug(private_tmp):
    with pytest.raises(RuntimeError, match="exited with status 3 unanswered"):
        _child.call("os:_exit", 3, what="a function that exits", warm=False)


def test_a_worker_keeps_state_and_its_death_is_one_typed_error(private_tmp):
    with _child.Worker() as worker:
        pid = worker.call("os:getpid", what="asking its pid")
        assert worker.call("os:getpid", what="asking again") == pid  # the same process
        with pytest.raises(ValueError, match="math domain error"):  # the function's own error
            worker.call("math:sqrt", -1, what="a refusal")
        with pytest.raises(NativeCrashError, match=r"crashed in native code \(SIGABRT\)") as crash:
            worker.call("os:abort", what="the runtime on 'model'")
        assert crash.value.signal_number == signal.SIGABRT and not worker.alive
    with _child.Worker() as worker, pytest.raises(NativeCrashError) as ended:
        worker.call("os:_exit", 3, what="a runtime that exits")
    assert ended.value.signal_number == 0 and ended.value.exit_status == 3


def test_a_worker_past_its_time_limit_is_killed(private_tmp):
    started = time.monotonic()
    with _child.Worker() as worker, pytest.raises(ChildTimeoutError, match="--timeout"):
        worker.call("time:sleep", 60, what="a hang", timeout=1)
    assert time.monotonic() - started < 30 and not worker.alive


def test_what_cannot_cross_to_a_child_is_one_typed_error(private_tmp):
    with pytest.raises(_child.ChildTransferError, match="cannot hand"):
        _child.call("os:getpid", lambda: None, what="a lambda")
