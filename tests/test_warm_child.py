"""The warm child of tfcompress/_child/warm.py: reused within a process, fresh when it must be.

Fine-tuning and conversion share it: a process's second fine-tune (or a conversion after a
fine-tune) pays no second TensorFlow import, and gives the same bytes as a fresh child.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import tfcompress
from tfcompress._child import warm
from tfcompress._child.serve import BOOTSTRAP


def _child_pid() -> int | None:
    child = warm._current
    return None if child is None or child.process.poll() is not None else child.process.pid


@pytest.mark.slow
def test_a_second_fine_tune_reuses_the_child_and_gives_the_same_bytes(gate_model_files):
    from tfcompress.samples.datasets import digits

    split = digits(seed=0)
    model, train = gate_model_files["reference"], (split.train.x[:200], split.train.y[:200])
    first = tfcompress.qat(model, train_data=train, epochs=1, isolate=True)
    pid = _child_pid()
    second = tfcompress.qat(model, train_data=train, epochs=1, isolate=True)
    assert pid is not None and _child_pid() == pid  # one child, still warm
    assert second.model_content == first.model_content  # Keras' state was reset between
    # A child that died while idle (the out-of-memory killer) is replaced, not reused.
    warm._current.process.kill()
    warm._current.process.wait()
    third = tfcompress.qat(model, train_data=train, epochs=1, isolate=True)
    assert _child_pid() not in (None, pid) and third.model_content == first.model_content


def test_another_environment_or_process_or_a_long_idle_needs_another_child(monkeypatch):
    from tfcompress._limits import CHILD_MEMORY

    memory = CHILD_MEMORY.value()
    child = warm._start(dict(os.environ), memory)  # no call: it imports nothing yet
    try:
        assert warm.usable(child, os.environ, memory)
        # TensorFlow reads its environment once: another environment needs another child.
        assert not warm.usable(child, {**os.environ, "TF_NUM_INTEROP_THREADS": "1"}, memory)
        # pytest names the current test in the environment: a suite's next test reuses it.
        other_test = {**os.environ, "PYTEST_CURRENT_TEST": "t.py::other (call)"}
        assert warm.usable(child, other_test, memory)
        # Another memory limit is another child.
        assert not warm.usable(child, os.environ, memory + 2**30)
        # A child idle for too long may be exiting on its own: not reused.
        monkeypatch.setattr(warm, "REUSE_SECONDS", 0.0)
        assert not warm.usable(child, os.environ, memory)
        monkeypatch.undo()
        # A forked caller has its own process: it starts its own child.
        monkeypatch.setattr(os, "getpid", lambda: child.owner + 1)
        assert not warm.usable(child, os.environ, memory)
    finally:
        monkeypatch.undo()
        child.close()
    assert child.process.returncode == 0  # closing its pipe ends it cleanly


def test_the_serving_child_exits_when_its_pipe_closes():
    requests, ours = os.pipe()
    answers_read, answers = os.pipe()
    paths = json.dumps([p for p in sys.path if p])
    command = [sys.executable, "-P", "-c", BOOTSTRAP, paths, "0", str(2**30), str(requests)]
    child = subprocess.Popen(
        [*command, str(answers), "call"], pass_fds=(requests, answers), stderr=subprocess.PIPE
    )
    for fd in (requests, answers, ours):  # no request will come: it exits at once
        os.close(fd)
    assert child.wait(timeout=60) == 0, child.stderr.read()
    os.close(answers_read)
    done = subprocess.run(command[:5], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "usage:" in done.stderr


def test_a_command_starts_its_converter_child_first_and_kills_it_when_refused(
    tmp_path, monkeypatch, capfd
):
    """quantize starts the converter's child before it imports its own modules; a command
    refused after that does not wait at exit for the child's TensorFlow import: it is killed."""
    import signal

    from tfcompress.cli import main

    monkeypatch.setattr(warm, "CONVERTER", "tests._child_fakes:hang")  # a 60 s warm-up
    warm.close_warm_child()
    model = tmp_path / "m.keras"
    model.write_bytes(b"not a zip: refused when the file is checked, after the child started")
    argv = ["quantize", str(model), "--out", str(tmp_path / "q.tflite"), "--data", "d.npz"]
    try:
        assert main(argv) == 2
        assert "wrong magic bytes" in capfd.readouterr().err
        child = warm._current
        assert child is not None and child.process.poll() is None  # started, still warming
    finally:
        warm.close_warm_child(kill=True)  # what exit does
    assert child.process.returncode == -signal.SIGKILL
    assert not (tmp_path / "q.tflite").exists()


@pytest.mark.parametrize(
    ("words", "early"),
    [
        (["quantize", "MODEL", "--data", "d.npz", "--out", "q.tflite"], True),
        (["compress", "MODEL", "--data", "d.npz", "--out", "c.tflite"], True),
        (["quantize", "m.tflite", "--data", "d.npz", "--out", "q.tflite"], False),  # no converter
        (["quantize", "MODEL", "--out", "q.onnx"], False),  # the verb decides
        (["quantize", "MODEL", "--timeout", "30", "--out", "q.tflite"], False),  # child's env
        (["quantize", "MODEL", "--timeo=30", "--out", "q.tflite"], False),  # argparse's prefix
        (["-v", "quantize", "MODEL", "--out", "q.tflite"], False),  # the native log level
        (["quantize", "MODEL", "--help"], False),
    ],
)
def test_the_converter_child_starts_before_the_parser_is_built(
    words, early, tmp_path, monkeypatch, capfd
):
    """Building the parser reads every option declaration (a quarter second on two cores):
    a plain ``quantize``/``compress`` of a Keras model starts its child first."""
    import tfcompress.cli as cli

    monkeypatch.setattr(warm, "CONVERTER", "tests._child_fakes:hang")  # a 60 s warm-up
    model = tmp_path / "m.keras"
    model.write_bytes(b"not a zip: refused when the file is checked")
    words = [str(model) if w == "MODEL" else w for w in words]
    started: list[bool] = []
    build = cli.build_parser

    def recording():
        started.append(warm.running())
        return build()

    monkeypatch.setattr(cli, "build_parser", recording)
    warm.close_warm_child()
    try:
        cli.main(words)
    finally:
        warm.close_warm_child(kill=True)
    assert started == [early]
