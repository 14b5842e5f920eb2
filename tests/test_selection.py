"""Budget-driven model selection: budgets honoured, over-budget never trained, resume, Dask, CLI."""

from __future__ import annotations

import contextlib
import io
import json
import os
import runpy
import socket
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tfcompress.cli import main
from tfcompress.errors import InvalidDataError, InvalidInputError, OutputExistsError
from tfcompress.report.plots import pareto_indices
from tfcompress.selection import Budgets, InlineExecutor, SelectionConfig, select_model
from tfcompress.selection.candidates import Candidate
from tfcompress.selection.store import CandidateStore

# The smallest real search, as examples/select_mnist.py runs it (TFC_EXAMPLE_QUICK=1):
# MobileNetV1 at 32x32 on 300 MNIST digits, one epoch. Width 0.25 fits the size budget,
# width 0.5 does not (so it must never be trained). V1 is the zoo's cheapest family to trace
# (91 layers against MobileNetV2's 156). The example's run is this file's search
# (``first_run``); the example's own output is checked here too, not in test_examples.py.
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "select_mnist.py"
FAMILY = "mobilenet_v1"
FAMILIES = (FAMILY,)
WIDTHS = (0.25, 0.5)
MAX_SIZE = 700_000
SETTINGS = {"epochs": 1, "latency_runs": 20, "latency_seconds": 0.2}
BUDGETS = Budgets(max_size=MAX_SIZE, max_latency=20.0)


@pytest.fixture(scope="module")
def data(mnist_split):
    train = (mnist_split.train.x[:300], mnist_split.train.y[:300])
    val = (mnist_split.test.x[:300], mnist_split.test.y[:300])
    return train, val


def _recording_conversions(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every file the TFLite converter makes from here on, in order."""
    from tfcompress.quantization import converter

    made: list[bytes] = []
    original = converter._run

    def recording(tflite_converter, model):
        made.append(original(tflite_converter, model))
        return made[-1]

    monkeypatch.setattr(converter, "_run", recording)
    # The converter runs in a child process; counted here, it runs in this one.
    monkeypatch.setenv("TFCOMPRESS_IN_PROCESS", "1")
    return made


@pytest.fixture(scope="module")
def example_run(tmp_path_factory) -> tuple[Path, str, list[bytes]]:
    """``python examples/select_mnist.py OUT`` with TFC_EXAMPLE_QUICK=1, run in this process.

    Returns its output folder, what it printed and every file the converter made meanwhile.
    """
    root = tmp_path_factory.mktemp("select_example")
    out, cwd = root / "out", root / "cwd"  # anything written by accident lands in cwd
    cwd.mkdir()
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as monkeypatch:
        made = _recording_conversions(monkeypatch)
        monkeypatch.chdir(cwd)
        monkeypatch.setenv("TFC_EXAMPLE_QUICK", "1")
        monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
        monkeypatch.setattr(sys, "argv", [str(EXAMPLE), str(out)])
        with contextlib.redirect_stdout(printed):
            runpy.run_path(str(EXAMPLE), run_name="__main__")
    return out, printed.getvalue(), made


@pytest.fixture(scope="module")
def workdir(example_run) -> Path:
    return example_run[0] / "work"


@pytest.fixture(scope="module")
def conversions(example_run) -> list[bytes]:
    """What the converter made during the example's search."""
    return example_run[2]


def _search(train, val, workdir: Path):
    """The example's search, in this process, working in ``workdir``."""
    return select_model(
        train_data=train,
        eval_data=val,
        budgets=BUDGETS,
        families=FAMILIES,
        width_multipliers=WIDTHS,
        resolutions=(32,),
        executor=InlineExecutor(),
        workdir=workdir,
        **SETTINGS,
    )


@pytest.fixture(scope="module")
def first_run(example_run, data, workdir):
    """The example's search as a result: the same keywords on its work folder reuse it all."""
    train, val = data
    return _search(train, val, workdir)


@pytest.mark.slow
def test_the_example_prints_the_pick_and_writes_its_report(example_run) -> None:
    out, printed, _ = example_run
    assert "Pick: mobilenet_v1-w0.25-r32" in printed
    assert "over_budget" in printed and "int8 size" in printed
    names = {p.name for p in (out / "report").iterdir()}
    assert names == {"selection.json", "selection.md", "pareto.png"}
    assert len(list((out / "work").glob("*.json"))) == 2
    assert not list((out.parent / "cwd").iterdir())


@pytest.mark.slow
def test_the_pick_meets_every_budget(first_run) -> None:
    best = first_run.best
    assert best is not None and best.status == "trained" and best.meets_budgets
    assert best.size_bytes <= MAX_SIZE
    assert best.latency_ms <= BUDGETS.max_latency
    assert best.accuracy is not None  # scored on the held-out digits (no accuracy budget)
    assert best.worker == "local" and best.host == socket.gethostname()
    assert best.macs > 0 and best.params > 0
    assert best.name in first_run.pareto


@pytest.mark.slow
def test_over_the_size_budget_is_never_trained(first_run, workdir: Path) -> None:
    over = [r for r in first_run.candidates if r.status == "over_budget"]
    assert [r.width for r in over] == [0.5]
    for record in over:
        assert record.size_bytes > MAX_SIZE and "int8 size" in record.reason
        assert record.accuracy is None and record.train_seconds is None
        assert record.trained_at is None and not record.meets_budgets
        stored = json.loads((workdir / f"{record.name}.json").read_text())
        assert "costs" in stored and "training" not in stored


@pytest.mark.slow
def test_each_int8_file_is_converted_once(first_run, conversions) -> None:
    # Two candidates measured and one trained: three int8 files, no float32 reference
    # (selection reads only the int8 bytes).
    assert len(conversions) == 3
    over = next(r for r in first_run.candidates if r.status == "over_budget")
    assert over.size_bytes in {len(c) for c in conversions[:2]}
    assert len(conversions[2]) == first_run.best.size_bytes  # the trained pick's file


@pytest.mark.slow
def test_resume_skips_finished_work(first_run, data, workdir: Path) -> None:
    assert first_run.settings["work"] == {"measured": 0, "trained": 0, "reused": 3}
    train, val = data
    again = _search(train, val, workdir)
    assert again.settings["work"] == {"measured": 0, "trained": 0, "reused": 3}
    assert all(r.reused for r in again.candidates)
    before = {r.name: (r.measured_at, r.trained_at, r.accuracy) for r in first_run.candidates}
    assert {r.name: (r.measured_at, r.trained_at, r.accuracy) for r in again.candidates} == before
    assert again.best.name == first_run.best.name


def test_the_config_is_the_keywords_and_the_result_records_it(first_run, data, workdir: Path):
    # config= asks for the very search the keywords asked for: every phase is reused.
    train, val = data
    config = SelectionConfig(
        budgets=BUDGETS, families=FAMILIES, width_multipliers=WIDTHS, **SETTINGS
    )
    again = select_model(
        train_data=train, eval_data=val, config=config, executor=InlineExecutor(), workdir=workdir
    )
    assert again.settings["work"] == {"measured": 0, "trained": 0, "reused": 3}
    assert again.best.name == first_run.best.name
    assert first_run.config == again.config == config
    recorded = json.loads(json.dumps(first_run.to_dict()))["config"]
    assert SelectionConfig.from_dict(recorded) == config


def test_a_changed_setting_is_not_reused(tmp_path: Path) -> None:
    store = CandidateStore(tmp_path)
    candidate = Candidate("mobilenet_v2", 0.35, 32)
    trained = {"ok": True, "accuracy": 0.5, "size_bytes": 9000, "loss": 1.2, "train_seconds": 3.0}
    store.save(candidate, "training", "key-epochs-1", trained)
    assert store.phase(candidate, "training", "key-epochs-1") == trained
    assert store.phase(candidate, "training", "key-epochs-2") is None


@pytest.mark.slow
def test_result_serialises_and_reports(first_run, tmp_path: Path) -> None:
    payload = json.loads(json.dumps(first_run.to_dict()))
    assert payload["best"]["name"] == first_run.best.name
    assert Budgets.from_dict(payload["budgets"]) == BUDGETS
    assert {c["status"] for c in payload["candidates"]} == {"trained", "over_budget"}
    assert "Pick: " + first_run.best.name in str(first_run)
    files = first_run.write_report(tmp_path / "report")
    assert [f.name for f in files] == ["selection.json", "selection.md", "pareto.png"]
    assert files[2].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| name" in files[1].read_text()
    with pytest.raises(OutputExistsError):
        first_run.write_report(tmp_path / "report")


def test_pareto_front_in_three_objectives() -> None:
    # (-accuracy, latency, size): the second is beaten on all three; the third trades.
    points = [(-0.9, 2.0, 100.0), (-0.8, 3.0, 200.0), (-0.95, 5.0, 300.0), (-0.9, 2.0, 50.0)]
    assert pareto_indices(points) == [2, 3]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"budgets": {"max_size": -5}}, "max_size"),
        ({"budgets": {"min_accuracy": 1.5}}, "min_accuracy"),
        ({"families": ("mobilenet_v9",)}, "did you mean"),
        ({"resolutions": (16,)}, "at least 32"),
        ({"objective": "reward"}, "max_latency"),
        ({"objective": "speed"}, "unknown objective"),
    ],
)
def test_bad_input_is_refused_before_any_work(data, options, message) -> None:
    train, val = data
    settings = {"families": FAMILIES, "width_multipliers": WIDTHS[:1], **options}
    with pytest.raises(InvalidInputError, match=message):
        select_model(train_data=train, eval_data=val, executor=InlineExecutor(), **settings)


def test_data_without_labels_is_refused(data) -> None:
    train, val = data
    with pytest.raises(InvalidDataError, match="no labels"):
        select_model(train_data=train[0], eval_data=val, executor=InlineExecutor())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def npz_files(data, tmp_path_factory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("selection_data")
    (x_train, y_train), (x_val, y_val) = data
    np.savez(root / "train.npz", x=x_train, y=y_train)
    np.savez(root / "val.npz", x=x_val, y=y_val)
    return str(root / "train.npz"), str(root / "val.npz")


@pytest.mark.parametrize(
    "extra",
    [
        ["--max-size", "-5KB"],
        ["--min-accuracy", "1.5"],
        ["--families", "mixnet_q"],
        ["--resolutions", "16"],
        ["--max-latency", "fast"],
        ["--scheduler", "tcp://127.0.0.1:{port}"],
    ],
)
def test_cli_bad_input_exits_2(npz_files, extra, capsys) -> None:
    extra = [part.format(port=_free_port()) for part in extra]
    train, val = npz_files
    code = main(["select", "--train", train, "--eval", val, "--families", FAMILY, *extra])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error" in err[0]


@pytest.mark.slow
def test_cli_json_reuses_the_workdir(first_run, npz_files, workdir: Path, capsys) -> None:
    train, val = npz_files
    code = main(
        [
            "select",
            *("--train", train, "--eval", val, "--families", FAMILY),
            *("--width-multipliers", "0.25,0.5", "--resolutions", "32", "--epochs", "1"),
            *("--max-size", f"{MAX_SIZE}B", "--max-latency", "1s", "--min-accuracy", "5%"),
            *("--latency-runs", "20", "--latency-seconds", "0.2"),  # the example's
            *("--workdir", str(workdir), "--json"),
        ]
    )
    assert code == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["best"]["name"] == first_run.best.name
    assert {"size_bytes", "latency_ms", "accuracy", "width", "resolution"} <= set(payload["best"])
    assert payload["settings"]["work"]["trained"] == 0  # same data and settings: all reused
    assert [c["status"] for c in payload["candidates"]] == ["trained", "over_budget"]


@pytest.mark.slow
def test_cli_exits_1_when_nothing_meets_the_budgets(npz_files, workdir: Path, capsys) -> None:
    train, val = npz_files
    code = main(
        [
            "select",
            *("--train", train, "--eval", val, "--families", FAMILY),
            *("--width-multipliers", "0.25,0.5", "--resolutions", "32", "--epochs", "1"),
            *("--max-size", "1KB", "--latency-runs", "20", "--latency-seconds", "0.2"),
            *("--workdir", str(workdir)),  # the example's measurements, reused
        ]
    )
    assert code == 1
    captured = capsys.readouterr()
    assert f"No candidate meets every budget. Closest: {FAMILY}-w0.25-r32" in captured.out


@pytest.fixture(scope="module")
def scheduler_on_loopback(tmp_path_factory):
    """A real Dask scheduler and two workers, each in its own process on 127.0.0.1."""
    pytest.importorskip("distributed")
    import subprocess
    import sys
    import time

    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    logs = tmp_path_factory.mktemp("dask_logs")
    processes = []
    try:
        for name, args in (
            ("scheduler", ["--host", "127.0.0.1", "--port", str(port), "--no-dashboard"]),
            ("worker", [address, "--nworkers", "2", "--nthreads", "1", "--no-dashboard"]),
        ):
            with open(logs / f"{name}.log", "wb") as log:
                command = [sys.executable, "-m", f"distributed.cli.dask_{name}", *args]
                processes.append(subprocess.Popen(command, stdout=log, stderr=log))
            if name == "scheduler":
                _wait_for_port(port, deadline=time.monotonic() + 60)
        distributed = pytest.importorskip("distributed")
        with distributed.Client(address, timeout="60s", set_as_default=False) as client:
            client.wait_for_workers(2, timeout=60)
        yield address
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_for_port(port: int, *, deadline: float) -> None:
    import time

    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"no scheduler listening on 127.0.0.1:{port}")


@pytest.mark.slow
def test_cli_runs_candidates_on_both_workers_of_a_scheduler(
    scheduler_on_loopback, npz_files, capsys
) -> None:
    # The path a user types: `select --scheduler` against a scheduler in other processes,
    # which hands select_model a Dask client (the API's executor= path). connect_scheduler's
    # client is not the default client: as_completed must be given its loop, or every
    # --scheduler run fails with "No clients found" (exit 3).
    train, val = npz_files
    code = main(
        [
            "select",
            *("--train", train, "--eval", val, "--families", FAMILY),
            *("--width-multipliers", "0.25,0.5", "--resolutions", "32", "--max-size", "1KB"),
            *(
                "--latency-runs",
                "10",
                "--latency-seconds",
                "0.1",
                "--scheduler",
                scheduler_on_loopback,
            ),
            "--json",
        ]
    )
    captured = capsys.readouterr()
    assert code == 1, captured.err  # measured on the workers; nothing fits 1 KB
    payload = json.loads(captured.out)
    assert payload["executor"] == f"Dask scheduler {scheduler_on_loopback} (2 workers)"
    candidates = payload["candidates"]
    assert [c["status"] for c in candidates] == ["over_budget", "over_budget"]
    assert all(c["latency_ms"] > 0 and c["accuracy"] is None for c in candidates)
    workers = {c["worker"] for c in candidates}
    assert len(workers) == 2 and all(w.startswith("tcp://127.0.0.1:") for w in workers)
    assert payload["best"] is None


def test_the_default_pool_runs_each_task_in_a_child_under_the_time_limit() -> None:
    import _child_fakes

    from tfcompress.errors import ChildTimeoutError, NativeCrashError
    from tfcompress.selection.executors import ChildPool
    from tfcompress.selection.worker import worker_identity

    pool = ChildPool(1, timeout=8)  # the first call also starts the worker's interpreter
    try:
        where = pool.submit(worker_identity).result()["worker"]
        assert where.startswith("local:") and where != f"local:{os.getpid()}"
        assert pool.submit(worker_identity).result()["worker"] == where  # kept warm
        with pytest.raises(NativeCrashError, match="SIGSEGV"):
            pool.submit(_child_fakes.segfault).result()
        with pytest.raises(ChildTimeoutError, match="time limit of 8 s"):
            pool.submit(_child_fakes.hang).result()
        assert pool.submit(worker_identity).result()["worker"] not in (where, "local")
    finally:
        pool.shutdown()
    patient = ChildPool(1, timeout=600)
    busy = patient.submit(_child_fakes.hang)
    time.sleep(2)  # inside its call
    started = time.monotonic()
    patient.shutdown(wait=False)  # Ctrl-C: the busy child is killed, not waited for
    with pytest.raises(NativeCrashError, match="SIGKILL"):
        busy.result(timeout=30)
    assert time.monotonic() - started < 30
