"""SIGINT, SIGTERM and SIGHUP end a run with one line and 128+N, leaving nothing behind.

The real CLI runs in a subprocess with a fresh TMPDIR; the signal is sent at a moment the
test sees (a measurement worker or the fine-tuning child exists), and afterwards no process
the run started is alive and TMPDIR is empty.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")

CODES = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}


# Ctrl-C as from a terminal: a job a non-interactive shell sends to the background (`cmd &`,
# as a CI script or nohup may run the suite) starts with SIGINT ignored, which its children
# inherit and the CLI rightly keeps ignoring. The run under test starts with the default.
_AS_FROM_A_TERMINAL = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, '-m', 'tfcompress', *sys.argv[1:]])"
)


class Run:
    """``python -m tfcompress ARGV`` with its own TMPDIR; stderr goes to a file we can cut."""

    def __init__(self, argv: list[str], root: Path) -> None:
        self.tmp = root / "tmp"
        self.tmp.mkdir()
        self.log = root / "stderr.log"
        env = {**os.environ, "TMPDIR": str(self.tmp)}
        env.pop("TFCOMPRESS_NO_PROBE", None)
        with open(self.log, "wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _AS_FROM_A_TERMINAL, *argv],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=env,
                cwd=root,
            )
        self.said_before = 0

    def wait_for(self, found, timeout: float = 60.0):
        """Poll ``found(descendants)`` until it returns something (the run must go on)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text()[-2000:]
            value = found(descendants(self.process.pid))
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"not seen within {timeout} s: {self.log.read_text()[-2000:]}")

    def handles(self, number: int, timeout: float = 10.0) -> None:
        """Wait until the CLI has installed its handler for ``number`` (Linux: SigCgt).

        Before that, the signal's default action applies (Python's own start-up, which a
        loaded machine can stretch past a fixed delay); the CLI cannot do anything there.
        """
        status = Path(f"/proc/{self.process.pid}/status")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and status.exists():
            caught = next(
                (
                    line.split()[1]
                    for line in status.read_text().splitlines()
                    if line.startswith("SigCgt")
                ),
                "0",
            )
            if int(caught, 16) >> (number - 1) & 1:
                return
            time.sleep(0.01)

    def interrupt(self, number: int) -> tuple[int, list[str]]:
        """Send the signal; the exit code and the stderr lines written after it."""
        self.said_before = self.log.stat().st_size
        self.process.send_signal(number)
        code = self.process.wait(timeout=30)
        after = self.log.read_bytes()[self.said_before :].decode("utf-8", "replace")
        return code, [line for line in after.replace("\r", "\n").splitlines() if line.strip()]


def _table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # gone meanwhile
            continue
        state, parent = text.rsplit(")", 1)[1].split()[:2]
        table[int(entry)] = (int(parent), state)
    return table


def descendants(pid: int) -> dict[int, str]:
    """Every live process under ``pid``, with its command line."""
    table = _table()
    found, pending = {}, [pid]
    while pending:
        parent = pending.pop()
        for child, (ppid, state) in table.items():
            if ppid == parent and state != "Z":
                found[child] = _cmdline(child)
                pending.append(child)
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _alive(pids) -> list[int]:
    table = _table()
    return [pid for pid in pids if pid in table and table[pid][1] != "Z"]


def assert_all_gone(pids, tmp: Path) -> None:
    """Every process in ``pids`` ends within a few seconds; TMPDIR is left empty."""
    deadline = time.monotonic() + 10
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pids), {pid: _cmdline(pid) for pid in _alive(pids)}
    assert sorted(os.listdir(tmp)) == []


def assert_one_line(lines: list[str], name: str) -> None:
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"tfcompress: interrupted ({name})"), lines
    assert "Traceback" not in lines[0]


@pytest.fixture(scope="module")
def tflite(tmp_path_factory, int8_result) -> Path:
    path = tmp_path_factory.mktemp("signals") / "cnn_int8.tflite"
    path.write_bytes(int8_result.model_content)
    return path


@pytest.mark.parametrize("number", list(CODES), ids=lambda number: number.name)
def test_a_signal_while_importing_is_one_line(tmp_path, tflite, number):
    # As soon as its handlers exist, the CLI is importing its subcommands (about a second):
    # no traceback. (On a fast machine it is loading the model already: the same test.)
    run = Run(["benchmark", str(tflite), "--min-seconds", "60"], tmp_path)
    # The CLI installs its three handlers together, first thing; Python catches SIGINT from
    # its own start, so SIGTERM's says when. Its imports take about a second more.
    run.handles(signal.SIGTERM)
    code, lines = run.interrupt(number)
    assert code == CODES[number]
    assert_one_line(lines, signal.Signals(number).name)
    assert run.log.read_text().count("\n") == 1  # nothing before it either
    assert os.listdir(run.tmp) == []


@pytest.mark.parametrize("zygote", [True, False], ids=["zygote", "fresh-workers"])
def test_sigterm_during_benchmark_stops_its_workers(tmp_path, tflite, zygote, monkeypatch):
    if not zygote:
        monkeypatch.setenv("TFCOMPRESS_NO_ZYGOTE", "1")
    argv = ["benchmark", str(tflite), "--threads", "1,2", "--batch-sizes", "1,4"]
    run = Run([*argv, "--min-seconds", "60", "--report", "report"], tmp_path)

    def measuring(found: dict[int, str]) -> dict[int, str]:
        workers = [pid for pid, line in found.items() if "tfcompress._child" in line]
        # With a zygote the worker is its child; else a fresh interpreter.
        return found if (len(workers) >= 2 if zygote else workers) else {}

    started = run.wait_for(measuring)
    time.sleep(1.0)  # the worker is inside its 60-second timing now
    started.update(descendants(run.process.pid))
    code, lines = run.interrupt(signal.SIGTERM)
    assert code == 143
    assert_one_line(lines, "SIGTERM")
    assert_all_gone(started, run.tmp)
    assert not (tmp_path / "report").exists()


def test_a_killed_benchmark_leaves_no_worker(tmp_path, tflite):
    """SIGKILL runs no clean-up: the zygote dies with the CLI, each worker with the zygote."""
    argv = ["benchmark", str(tflite), "--batch-sizes", "1,4", "--min-seconds", "60"]
    run = Run(argv, tmp_path)
    started = run.wait_for(lambda found: found if len(found) >= 2 else {})
    started.update(descendants(run.process.pid))
    run.process.kill()
    run.process.wait(timeout=30)
    deadline = time.monotonic() + 10
    while _alive(started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(started), {pid: _cmdline(pid) for pid in _alive(started)}


@pytest.fixture(scope="module")
def training_files(tmp_path_factory, model_files, mnist_split) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("signals_training")
    train = root / "train.npz"
    np.savez(train, x=mnist_split.train.x[:2000], y=mnist_split.train.y[:2000])
    return {"model": model_files["keras3"], "train": train}


def test_sigterm_during_qat_stops_its_child_and_leaves_no_copy(tmp_path, training_files):
    out = tmp_path / "qat.tflite"
    argv = ["qat", str(training_files["model"]), "--train", str(training_files["train"])]
    run = Run([*argv, "--epochs", "200", "--out", str(out)], tmp_path)

    def training(found: dict[int, str]) -> dict[int, str]:
        child = any("tfcompress._child" in line for line in found.values())
        # Past its imports: the child wrote temporary files of its own (its copy of the
        # model, autograph's sources), which it cannot remove once it is killed.
        own_files = list(run.tmp.glob("tfcompress-child-*/tmp/*"))
        return found if child and own_files else {}

    started = run.wait_for(training, timeout=120)
    started.update(descendants(run.process.pid))
    code, lines = run.interrupt(signal.SIGTERM)
    assert code == 143
    assert_one_line(lines, "SIGTERM")
    assert_all_gone(started, run.tmp)
    assert not out.exists()


def test_a_signal_between_the_artifact_and_the_report_leaves_neither(tmp_path, monkeypatch):
    """compress writes its artifact, then its report; a signal anywhere leaves both or none."""
    from tfcompress._files import write_text_atomic
    from tfcompress.cli import main
    from tfcompress.cli._interrupt import Terminated
    from tfcompress.compression import api
    from tfcompress.compression.report import report_paths
    from tfcompress.report.writers import report_files

    class Finished:  # what compress() returns, reduced to what the CLI writes
        passed, interrupted = True, False
        stop = "json"

        def save(self, out, *, overwrite):
            Path(out).write_bytes(b"TFL3")
            if self.stop == "saved":
                raise Terminated(signal.SIGTERM)
            return Path(out)

        def write_report(self, folder, *, overwrite):
            with report_files(folder, report_paths(folder)) as written:
                write_text_atomic(folder / "compress.json", "{}")
                if self.stop == "json":  # renamed into place, not yet listed as written
                    raise Terminated(signal.SIGTERM)
            return written

    finished = Finished()
    monkeypatch.setattr(api, "compress", lambda *a, **k: finished)
    model = tmp_path / "m.keras"
    from tfcompress._compat.keras import KerasFlavour, keras_module

    keras = keras_module(KerasFlavour.KERAS3)
    keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)]).save(model)
    report, out = tmp_path / "new" / "report", tmp_path / "out.tflite"
    argv = ["compress", str(model), "--data", str(model), "--eval", str(model)]
    for stop in ("saved", "json"):
        finished.stop = stop
        assert main([*argv, "--out", str(out), "--report", str(report)]) == 143
        assert not out.exists() and not (tmp_path / "new").exists(), stop


def test_an_interruption_python_drops_is_sent_again():
    # The handler raises where the main thread stands; in a __del__ the garbage collector
    # runs (during an import, say) Python drops that exception: it must land again.
    script = """
import sys, time
from tfcompress.cli import _interrupt
_interrupt.install()

class Holder:
    def __del__(self):
        raise _interrupt.Terminated(15)  # what the handler raises, here dropped

try:
    Holder()
    time.sleep(10)
    print("not interrupted")
except _interrupt.Terminated as error:
    print("terminated", error.signum)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip() == "terminated 15", done.stderr
    assert "Exception ignored" not in done.stderr


def test_an_interruption_a_library_replaced_is_still_the_interruption():
    # LiteRT's lazy import turns what it caught into "Could not import ..." without a cause.
    script = """
import os, signal, time
from tfcompress.cli import _interrupt
_interrupt.install()
try:
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)
    except _interrupt.Terminated:
        raise RuntimeError("Could not import original test/binary location") from None
except RuntimeError as error:
    found = _interrupt.cause(error)
    print(type(found).__name__, _interrupt.exit_code(found))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip() == "Terminated 143", done.stderr


def test_an_interruption_dropped_as_the_run_ends_is_not_sent_after_it():
    # The run ended (settle) before the dropped interruption was sent again: what runs next
    # (here SIGTERM's default action, which would kill the process) never receives it.
    script = """
import signal, time
from tfcompress.cli import _interrupt
_interrupt.install()

class Holder:
    def __del__(self):
        raise _interrupt.Terminated(15)

Holder()
_interrupt.settle()
signal.signal(signal.SIGTERM, signal.SIG_DFL)
time.sleep(10 * _interrupt._RESEND_S)
print("alive")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, "alive"), done.stderr
