"""``benchmark --on`` and ``gate --on``: rows measured on Dask workers, each a device.

A real scheduler runs on 127.0.0.1 and its workers are ``dask worker`` processes of the
TensorFlow-free device install (``make device-install``), so every row comes from another
interpreter than this one. Tests that need them are marked ``device`` (``make
device-test``); the refusals that need no cluster run in ``make test``.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from _device import DEVICE_PYTHON, Cluster, conv_files, device_files, free_port

from tfcompress.cli import main
from tfcompress.report.schema import SCHEMA_VERSION

FAST = ["--runs", "5", "--min-seconds", "0.05", "--warmup-seconds", "0"]


@pytest.fixture(scope="module")
def files(tmp_path_factory, gate_model_files) -> dict[str, Path]:
    return {**device_files(tmp_path_factory, gate_model_files), **conv_files(tmp_path_factory)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A scheduler and two one-thread workers, ``pi-a`` and ``pi-b``, of the device install."""
    pytest.importorskip("distributed")
    started = Cluster(tmp_path_factory.mktemp("dask_logs"))
    try:
        yield started.start("pi-a", "pi-b")
    finally:
        started.stop()


def _one_line(capsys) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.device
def test_rows_run_on_each_worker_and_carry_its_environment(cluster, files, capsys, tmp_path):
    argv = ["benchmark", str(files["float32"]), str(files["int8"]), "--data", str(files["test"])]
    report_dir = tmp_path / "report"
    code = main([*argv, "--on", cluster.address, *FAST, "--json", "--report", str(report_dir)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads(captured.out)
    assert report["schema_version"] == SCHEMA_VERSION
    rows = {(r["device"], r["artifact"]): r for r in report["rows"]}
    assert set(rows) == {
        (device, artifact)
        for device in ("pi-a", "pi-b")
        for artifact in ("float32.tflite", "int8.tflite")
    }
    assert all(r["status"] == "ok" and r["accuracy"] > 0.9 for r in rows.values())
    assert set(report["devices"]) == {"pi-a", "pi-b"}
    for name, device in report["devices"].items():
        # read on the device: its interpreter is the device install's, not this one
        assert device["executable"] == str(DEVICE_PYTHON) != sys.executable
        assert device["address"].startswith("tcp://127.0.0.1:")
        environment = device["environment"]
        assert "tensorflow" not in environment["versions"]
        assert environment["cores"] >= 1 and environment["arch"] and environment["cpu"]
        assert device["delegates"]["cpu"].startswith("loaded: xnnpack True"), name
    assert report["notes"][0].startswith("on pi-a: int8.tflite vs float32.tflite on cpu")
    # the written report says the same: the JSON as printed, the devices in the Markdown
    assert json.loads((report_dir / "benchmark.json").read_text())["devices"].keys() == {
        "pi-a",
        "pi-b",
    }
    markdown = (report_dir / "benchmark.md").read_text()
    assert "## Devices" in markdown and "| p50 ms pi-a |" in markdown
    assert "device" in (report_dir / "benchmark.csv").read_text().splitlines()[0].split(",")


def test_each_device_is_compared_with_its_own_reference_rows():
    from tfcompress.bench.analysis import with_ratios
    from tfcompress.bench.result import BenchmarkRow
    from tfcompress.bench.stats import summarize

    def row(artifact: str, device: str, ms: float) -> BenchmarkRow:
        return BenchmarkRow(
            artifact, "cpu", 1, 1, latency=summarize([ms / 1000] * 9), device=device
        )

    rows = [
        row("f32", "pi", 4.0),
        row("i8", "pi", 2.0),
        row("f32", "pc", 1.0),
        row("i8", "pc", 2.0),
    ]
    assert [r.speedup for r in with_ratios(rows, "f32")] == [1.0, 2.0, 1.0, 0.5]


@pytest.mark.device
def test_medians_agree_with_a_local_run_within_the_harness_interval(cluster, files):
    import tfcompress

    # The harness's interval of a row is mean +- std (as benchmark_model prints it): the
    # medians agree when each lies in the other's. The runs are paired (here under the
    # machine's measurement lock, then each device, one at a time) so that a loaded machine
    # drifts little between them; a disagreement is measured again, twice: what must hold
    # is that measuring through a worker adds nothing systematic.
    for _attempt in range(3):
        result = tfcompress.benchmark(
            [str(files["cnn"])], on=cluster.address, local=True, runs=100, min_seconds=0.5
        )
        by_device = {row.device: row.latency for row in result.rows}
        assert set(by_device) == {"local", "pi-a", "pi-b"}
        here = by_device["local"]
        if all(here.agrees_with(by_device[name]) for name in ("pi-a", "pi-b")):
            break
    shown = {name: (s.p50, s.mean, s.std) for name, s in by_device.items()}
    assert all(here.agrees_with(by_device[name]) for name in ("pi-a", "pi-b")), shown
    assert [d.name for d in result.devices] == ["local", "pi-a", "pi-b"]
    assert "p50 ms pi-a" in result.side_by_side()


@pytest.mark.device
def test_a_worker_killed_mid_run_is_an_error_row_and_the_report_finishes(cluster, files):
    cluster.add("doomed")
    argv = [sys.executable, "-m", "tfcompress", "benchmark", str(files["float32"])]
    argv += [str(files["int8"]), "--on", cluster.address, "--runs", "5", "--min-seconds", "1.5"]
    run = subprocess.Popen([*argv, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        with cluster.client() as client:  # kill it while it measures a row
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                doing = {
                    client.scheduler_info()["workers"].get(w, {}).get("name"): keys
                    for w, keys in client.processing().items()
                }
                if any(str(k).startswith("tfcompress-measure") for k in doing.get("doomed", [])):
                    break
                time.sleep(0.1)
            else:
                pytest.fail("the doomed worker never started measuring")
        cluster.kill("doomed")
        out, err = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 2, err.decode()[-2000:]  # error rows: exit 2, the table printed
    report = json.loads(out)
    by_device: dict[str, list[dict]] = {}
    for row in report["rows"]:
        by_device.setdefault(row["device"], []).append(row)
    assert all(r["status"] == "ok" for name in ("pi-a", "pi-b") for r in by_device[name])
    doomed = by_device["doomed"]
    assert doomed and all(r["status"].startswith("error: device doomed (tcp://") for r in doomed)
    assert "while measuring this row" in doomed[0]["status"]
    last = err.decode().strip().splitlines()[-1]  # the CLI's one error line names it too
    assert last.startswith("tfcompress benchmark: error: ") and "device doomed (tcp://" in last


@pytest.mark.device
def test_gate_runs_the_candidate_on_each_device(cluster, files, capsys):
    def gate(candidate: str, *extra: str) -> int:
        reference, data = str(files["float32"]), str(files["test"])
        on = ["--on", cluster.address]
        return main(["gate", reference, str(files[candidate]), "--eval", data, *on, *extra])

    assert gate("int8", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert sorted(report["devices"]) == ["pi-a", "pi-b"]
    assert report["devices"]["pi-a"]["backend"] == "cpu on pi-a"
    assert gate("damaged", "--device", "pi-b") == 1
    out = capsys.readouterr().out
    assert "on device pi-b" in out and "candidate damaged.tflite on cpu on pi-b" in out


@pytest.mark.device
def test_tls_scheduler_with_certificates(tmp_path, files, capsys):
    pytest.importorskip("distributed")
    tls = _certificates(tmp_path)
    secure = Cluster(tmp_path, tls=tls)
    try:
        secure.start("tls-pi")
        argv = ["benchmark", str(files["int8"]), "--on", secure.address, *FAST, "--json"]
        assert main([*argv, *tls]) == 0
        report = json.loads(capsys.readouterr().out)
        assert [r["device"] for r in report["rows"]] == ["tls-pi"]
        assert main(argv) == 2  # a tls:// scheduler without this client's certificate
        assert "tls://" in _one_line(capsys)
    finally:
        secure.stop()


def _certificates(folder: Path) -> list[str]:
    """A CA and one certificate it signed (CN and SAN 127.0.0.1), with openssl."""
    if subprocess.run(["openssl", "version"], capture_output=True).returncode:
        pytest.skip("no openssl to make test certificates")
    ca, key, csr, cert = (folder / n for n in ("ca.pem", "node.key", "node.csr", "node.pem"))
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    ca_key, ext = str(folder / "ca.key"), str(folder / "san.ext")
    commands = [
        f"req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=tfcompress-test-ca "
        f"-keyout {ca_key} -out {ca}",
        f"req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout {key} -out {csr}",
        f"x509 -req -days 1 -CAcreateserial -in {csr} -CA {ca} -CAkey {ca_key} -out {cert} "
        f"-extfile {ext}",
    ]
    for command in commands:  # the temporary folder's path has no spaces
        subprocess.run(["openssl", *command.split()], check=True, capture_output=True)
    return ["--tls-ca-file", str(ca), "--tls-cert", str(cert), "--tls-key", str(key)]


@pytest.mark.parametrize(
    "extra",
    [
        ["--on", "tcp://127.0.0.1:{closed}"],
        ["--on", "garbage"],
        ["--on", "udp://127.0.0.1:8786"],
        ["--on", "tcp://127.0.0.1:{closed}", "--tls-cert", "client.pem"],
        ["--tls-ca-file", "ca.pem"],
        ["--local"],
    ],
)
def test_what_cannot_reach_a_device_is_one_line_exit_2(gate_model_files, capsys, extra):
    pytest.importorskip("distributed")
    closed = str(free_port())
    argv = [a.replace("{closed}", closed) for a in extra]
    started = time.perf_counter()
    assert main(["benchmark", str(gate_model_files["int8"]), *argv]) == 2
    assert time.perf_counter() - started < 20  # the connect timeout is 5 s
    line = _one_line(capsys)
    assert line.startswith("tfcompress benchmark: error: ")


def test_a_keras_model_is_refused_on_devices_before_any_work(gate_model_files):
    import tfcompress
    from tfcompress.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match=r"--on measures \.tflite and \.onnx"):
        tfcompress.benchmark([str(gate_model_files["reference"])], on=object())


def test_one_measurement_at_a_time_per_machine():
    from tfcompress.bench._on_device import machine_lock

    spans: list[tuple[float, float]] = []

    def hold() -> None:
        with machine_lock():
            start = time.perf_counter()
            time.sleep(0.2)
            spans.append((start, time.perf_counter()))

    threads = [threading.Thread(target=hold) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    spans.sort()
    assert all(end <= start for (_, end), (start, _) in itertools.pairwise(spans))
    # another process is held off too (a second worker on the same machine)
    code = "from tfcompress.bench._on_device import machine_lock\nwith machine_lock(): print('in')"
    with machine_lock():
        other = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
        time.sleep(1.0)
        assert other.poll() is None  # still waiting for the lock
    assert other.communicate(timeout=60)[0].strip() == b"in"


@pytest.mark.device
def test_compress_ranks_by_the_latency_measured_on_the_named_device(cluster, files, capsys):
    reference, data = str(files["reference"]), str(files["test"])
    argv = ["compress", reference, "--data", data, "--eval", data, "--max-drop", "0.05"]
    out = Path(cluster.logs) / "compressed.tflite"
    options = ["--objective", "latency", "--on", cluster.address, "--out", str(out), "--force"]
    # two devices and none named: one search ranks on one device, so it is refused
    assert main([*argv, *options]) == 2
    assert "several devices on the scheduler (pi-a, pi-b)" in _one_line(capsys)
    assert main([*argv, *options, "--device", "pi-b", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["device"]["name"] == "pi-b"
    assert result["device"]["address"].startswith("tcp://127.0.0.1:")
    timed = [a for a in result["attempts"] if a["latency_ms"] is not None]
    assert len(timed) >= 2 and all(a["device"] == "pi-b" for a in timed)
    passing = [a for a in timed if a["passed"]]
    assert result["chosen"]["latency_ms"] == min(a["latency_ms"] for a in passing)
    assert any("measured on device pi-b" in f for f in result["findings"])
    assert "config" in result and "on" not in result["config"]  # where, not what: not replayed


@pytest.mark.device
def test_select_measures_each_candidate_latency_on_the_device(cluster, tmp_path, capsys):
    import numpy as np

    from tfcompress.samples.datasets import digits

    split = digits(seed=0)
    train, val = tmp_path / "train.npz", tmp_path / "val.npz"
    np.savez(train, x=split.train.x[:64].reshape(-1, 8, 8, 1), y=split.train.y[:64])
    np.savez(val, x=split.test.x[:32].reshape(-1, 8, 8, 1), y=split.test.y[:32])
    # A latency budget no candidate meets: phase 1 only (one int8 file, timed on pi-a).
    code = main(
        [
            "select",
            *("--train", str(train), "--eval", str(val), "--families", "mobilenet_v1"),
            *("--width-multipliers", "0.25", "--resolutions", "32", "--epochs", "1"),
            *("--max-latency", "0.0001ms", "--latency-runs", "5", "--latency-seconds", "0.05"),
            *("--on", cluster.address, "--device", "pi-a", "--json"),
        ]
    )
    captured = capsys.readouterr()
    assert code == 1, captured.err
    payload = json.loads(captured.out)
    [candidate] = payload["candidates"]
    assert candidate["status"] == "over_budget" and candidate["latency_ms"] > 0
    assert candidate["device"] == "pi-a" and candidate["macs"]
    assert candidate["worker"] == payload["settings"]["device"]["address"]
    assert "device pi-a" in candidate["reason"] or "latency" in candidate["reason"]


@pytest.mark.parametrize("command", ["compress", "select"])
def test_search_on_a_bad_address_is_one_line_exit_2(gate_model_files, capsys, command):
    pytest.importorskip("distributed")
    model, data = str(gate_model_files["reference"]), str(gate_model_files["test"])
    on = ["--on", f"tcp://127.0.0.1:{free_port()}"]
    argv = {
        "compress": ["compress", model, "--data", data, "--eval", data, "--out", "x.tflite"],
        "select": ["select", "--train", data, "--eval", data, "--max-latency", "5ms"],
    }[command]
    extra = ["--objective", "latency"] if command == "compress" else []
    started = time.perf_counter()
    assert main([*argv, *extra, *on]) == 2
    assert time.perf_counter() - started < 20  # the connect timeout is 5 s
    line = _one_line(capsys)
    assert line.startswith(f"tfcompress {command}: error: cannot reach the Dask scheduler")
    # --on that times nothing is refused before it connects
    if command == "compress":
        assert main([*argv, "--no-measure-latency", *on]) == 2
        assert "--no-measure-latency times nothing" in _one_line(capsys)


@pytest.mark.device
def test_a_crash_on_one_device_is_its_error_row_and_the_others_judge(cluster, files, capsys):
    preload = str(Path(__file__).with_name("_crashing_device.py"))
    cluster.add("pi-crash", extra=("--preload", preload))
    try:
        reference, data = str(files["float32"]), str(files["test"])
        argv = ["gate", reference, str(files["int8"]), "--eval", data, "--on", cluster.address]
        code = main([*argv, "--json"])
        captured = capsys.readouterr()
    finally:
        cluster.kill("pi-crash")
    assert code == 2, captured.err
    devices = json.loads(captured.out)["devices"]
    assert devices["pi-a"]["passed"] and devices["pi-b"]["passed"], devices
    (row,) = devices["pi-crash"]["errors"]
    assert row["role"] == "candidate" and "on device pi-crash: " in row["status"]
    assert "SIGABRT" in row["status"]  # the cause, as the device's crash said it
    errors = [line for line in captured.err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "on device pi-crash" in errors[0] and "SIGABRT" in errors[0]
