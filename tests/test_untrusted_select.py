"""``tfcompress select`` with hostile options, schedulers and work folders: exit 2, one line."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tfcompress.cli import main
from tfcompress.cli.common import emit_json
from tfcompress.errors import BackendUnavailableError, InvalidInputError
from tfcompress.selection.candidates import Candidate
from tfcompress.selection.search import _check_something_measured
from tfcompress.selection.store import CandidateStore

BASE = ["select", "--train", "missing_train.npz", "--eval", "missing_val.npz"]


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert "Traceback" not in lines[0] and "internal error" not in lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "extra",
    [
        ["--max-size", "1e999"],
        ["--max-size", "-5KB"],
        ["--max-latency", "inf"],
        ["--max-latency", "nan"],
        ["--min-accuracy", "2"],
        ["--min-accuracy", "nan%"],
        ["--min-seconds", "inf"],
        ["--min-seconds", "nan"],
        ["--seed", "-1"],
        ["--seed", str(2**40)],
        ["--scheduler", "tls://127.0.0.1:8786"],
        ["--scheduler", "tcp://127.0.0.1:" + "9" * 50],
        ["--scheduler", "tcp://127.0.0.1:0"],
        ["--scheduler", "garbage"],
    ],
)
def test_impossible_options_exit_2_in_one_line(capsys, extra):
    assert main([*BASE, "--max-size", "1MB", *extra]) == 2
    _one_line(capsys)


@contextlib.contextmanager
def _server(reply: bytes | None) -> Iterator[int]:
    """A loopback server that accepts, sends ``reply`` (or nothing) and never closes."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            held.append(connection)
            if reply is not None:
                connection.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for connection in held:
            connection.close()
        listener.close()


@pytest.mark.parametrize("reply", [None, b"\x00\x01garbag"], ids=["silent", "garbage"])
def test_a_server_that_is_not_a_scheduler_is_exit_2_within_the_timeout(capsys, reply):
    with _server(reply) as port:
        started = time.perf_counter()
        code = main([*BASE, "--max-size", "1MB", "--scheduler", f"tcp://127.0.0.1:{port}"])
        assert time.perf_counter() - started < 20  # the connect timeout is 5 s
    assert code == 2
    line = _one_line(capsys)
    assert "Dask scheduler" in line


def test_an_edgetpu_backend_without_its_runtime_is_refused_before_any_work(capsys):
    code = main([*BASE, "--max-size", "1MB", "--target", "edgetpu"])
    if code != 2:
        pytest.skip("the Edge TPU runtime is installed here")
    assert "libedgetpu" in _one_line(capsys)


def test_nothing_measured_is_not_a_failed_budget():
    unavailable = {"a": {"ok": False, "reason": "latency measurement: unavailable: no GPU"}}
    from tfcompress.selection.budgets import Budgets

    budgets = Budgets(max_size=10**6, target="gpu")
    with pytest.raises(BackendUnavailableError, match="target 'gpu'"):
        _check_something_measured(unavailable, budgets)
    with pytest.raises(InvalidInputError, match="no candidate could be measured"):
        _check_something_measured({"a": {"ok": False, "reason": "build failed"}}, budgets)
    _check_something_measured({"a": {"ok": True}, "b": {"ok": False}}, budgets)


COSTS = {
    "ok": True,
    "params": 1000,
    "macs": 5000,
    "size_bytes": 4000,
    "latency_ms": 1.5,
    "latency_backend": "cpu",
    "threads": 1,
}
TRAINING = {"ok": True, "accuracy": 0.9, "size_bytes": 4000, "loss": 0.3, "train_seconds": 2.0}


@pytest.mark.parametrize(
    ("phase", "result", "problem"),
    [
        ("costs", {**COSTS, "latency_ms": float("nan")}, "latency_ms is nan"),
        ("costs", {**COSTS, "latency_ms": "1.5"}, "latency_ms is '1.5'"),
        ("costs", {**COSTS, "size_bytes": -1}, "size_bytes is -1"),
        ("costs", {**COSTS, "exec": "rm -rf"}, "unknown fields"),
        ("costs", {k: v for k, v in COSTS.items() if k != "params"}, "missing"),
        ("training", {**TRAINING, "accuracy": 2.0}, "accuracy is 2.0"),
        ("training", {**TRAINING, "ok": "yes"}, "ok is 'yes'"),
        ("training", [1, 2], "a JSON list"),
    ],
)
def test_hostile_resume_files_are_measured_again(tmp_path, caplog, phase, result, problem):
    candidate = Candidate("mobilenet_v2", 0.35, 32)
    store = CandidateStore(tmp_path)
    store.save(candidate, phase, "k", result if isinstance(result, dict) else {})
    stored = json.loads(store.path(candidate).read_text())
    stored[phase]["result"] = result
    # json writes NaN as the token NaN, and json reads it back: as a hand-edited file would.
    store.path(candidate).write_text(json.dumps(stored))
    assert store.phase(candidate, phase, "k") is None
    assert problem in caplog.text and "measuring this candidate again" in caplog.text
    good = COSTS if phase == "costs" else TRAINING
    store.save(candidate, phase, "k", good)
    assert store.phase(candidate, phase, "k") == good


def test_json_output_is_standard_json(capsys):
    import io

    out = io.StringIO()
    emit_json(out, {"latency": float("nan"), "rows": [{"x": float("inf")}, 1.5]})
    assert json.loads(out.getvalue(), parse_constant=pytest.fail) == {
        "latency": None,
        "rows": [{"x": None}, 1.5],
    }
