"""``--on``'s connection holds the input contract: TLS files, hostile ports, departed workers.

Only loopback listeners (127.0.0.1), each answering one connection and gone within seconds;
the worker list of a run is faked, so a momentarily empty list is met every time.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tfcompress.bench import _on_device, devices
from tfcompress.bench.result import BenchmarkRow
from tfcompress.cli import main
from tfcompress.runtime.routing import Route

pytest.importorskip("distributed")


def _listener(reply) -> int:
    """A port on 127.0.0.1 that runs ``reply(connection)`` for its first client, then closes."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10)

    def serve() -> None:
        with server:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            # OSError: the client hung up, as it was meant to
            with connection, contextlib.suppress(OSError):
                reply(connection)

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1]


def _short_frame(connection: socket.socket) -> None:
    body = b"\x00" * 8 + b"\x93\x01\x02"  # a length-prefixed frame msgpack cannot read
    connection.sendall(struct.pack("Q", len(body)) + body)
    time.sleep(1)


def _huge_frame(connection: socket.socket) -> None:
    connection.sendall(struct.pack("Q", 6 * 10**9))  # announces 6 GB, then sends zeros
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:
        connection.sendall(b"\0" * 65536)


@pytest.mark.parametrize(
    ("reply", "said"),
    [(_short_frame, "not as a Dask scheduler"), (_huge_frame, "6,000,000,000 bytes")],
)
def test_a_port_that_is_no_scheduler_is_one_line_and_dask_says_nothing(capfd, reply, said):
    port = _listener(reply)
    # The huge frame is refused when announced (its size is in the line), not read.
    assert main(["benchmark", "m.tflite", "--on", f"tcp://127.0.0.1:{port}"]) == 2
    lines = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("tfcompress benchmark: error:"), lines
    assert said in lines[0]


@pytest.fixture(scope="module")
def pems(tmp_path_factory) -> dict[str, Path]:
    """A certificate with its key, and files no TLS library reads."""
    folder = tmp_path_factory.mktemp("pems")
    cert, key = folder / "cert.pem", folder / "cert.key"
    command = f"req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=t -keyout {key} -out {cert}"
    try:
        subprocess.run(["openssl", *command.split()], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("no openssl to make a test certificate")
    garbage = folder / "garbage.pem"
    garbage.write_text("-----BEGIN CERTIFICATE-----\nnot base64 !!\n-----END CERTIFICATE-----\n")
    (folder / "random.pem").write_bytes(os.urandom(3000))
    (folder / "empty.pem").write_bytes(b"")
    return {p.stem: p for p in folder.iterdir()} | {"cert": cert, "key": key}


@pytest.mark.parametrize(
    ("ca", "cert", "key", "named"),
    [
        ("garbage", "cert", "key", "--tls-ca-file"),
        ("random", "cert", "key", "--tls-ca-file"),
        ("empty", "cert", "key", "--tls-ca-file"),
        ("cert", "garbage", "key", "--tls-cert"),
        ("cert", "empty", None, "--tls-cert"),
        ("cert", "cert", "cert", "--tls-key"),  # a certificate given as the key
        ("cert", "cert", None, "--tls-cert"),  # no key anywhere
        ("cert", "cert", "random", "--tls-key"),
    ],
)
def test_an_unusable_tls_file_is_named_in_one_line(pems, capsys, ca, cert, key, named):
    argv = ["--tls-ca-file", str(pems[ca]), "--tls-cert", str(pems[cert])]
    argv += ["--tls-key", str(pems[key])] if key else []
    assert main(["benchmark", "m.tflite", "--on", "tls://127.0.0.1:9", *argv]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    file = {"--tls-ca-file": ca, "--tls-cert": cert, "--tls-key": key}[named]
    assert f"{named} '{pems[file]}'" in lines[0]


def test_a_file_named_in_dasks_configuration_is_checked_too(pems, tmp_path):
    env = {**os.environ, "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": str(tmp_path / "gone.pem")}
    argv = ["--on", "tls://127.0.0.1:9", "--tls-cert", str(pems["cert"])]
    done = subprocess.run(
        [sys.executable, "-m", "tfcompress", "benchmark", "m.tflite", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"tfcompress benchmark: error: distributed.comm.tls.ca-file (Dask's configuration) "
        f"'{tmp_path / 'gone.pem'}': no such file; give the PEM file."
    ]


def test_a_huge_address_is_quoted_cut_with_its_length(capsys):
    host = "h" * 100_000
    assert main(["benchmark", "m.tflite", "--on", f"tcp://{host}:1{'9' * 5000}"]) == 2
    line = capsys.readouterr().err.strip()
    assert "... (105,008 characters)" in line and len(line) < 1_000


# -- devices that leave: the worker list is Dask's word, and a momentary empty one is not --


class _Done:
    """A future that is back already."""

    status = "finished"

    def __init__(self, value) -> None:
        self.value = value

    def done(self) -> bool:
        return True

    def result(self):
        return self.value

    def cancel(self) -> None:
        self.status = "cancelled"


class _Client:
    """Takes the payload and answers every task at once, as two devices that never fail."""

    def scatter(self, payload, **_):
        return payload

    def submit(self, fn, *args, **_):
        if fn is _on_device.describe:
            return _Done({"hostname": "device"})
        _, name, backend = args
        return _Done(([BenchmarkRow(name, backend, 1, 1, "ok")], 0))


def _run(monkeypatch, lists: list[set[str]]) -> list[BenchmarkRow]:
    """Rows of two devices, ``a`` and ``b``, with the worker list reading ``lists`` in turn."""
    looks = iter(lists)
    last = lists[-1]
    monkeypatch.setattr(devices, "workers_now", lambda _: dict.fromkeys(next(looks, last)))
    monkeypatch.setattr(devices, "POLL_SECONDS", 0.01)
    monkeypatch.setattr(devices, "GONE_AFTER_SECONDS", 0.05)
    runs = [devices._DeviceRun(name, name, devices.deque()) for name in ("a", "b")]
    prepared = {"m.tflite": SimpleNamespace(size=None)}
    routes = {"m.tflite": [Route("litert"), Route("onnxruntime"), Route("cpu")]}
    for run in runs:
        run.jobs.extend(devices._jobs(prepared, routes))
    devices._run_all(_Client(), runs, prepared, routes, plan=None, on_row=lambda _: None)
    devices._say_who_went_on(runs)
    return [row for run in runs for row in run.rows]


def test_a_momentarily_empty_worker_list_is_no_departure(monkeypatch):
    rows = _run(monkeypatch, [{"a", "b"}, set(), {"a", "b"}])
    assert [row.status for row in rows] == ["ok"] * 6


def test_a_worker_gone_for_good_costs_its_rows_and_the_other_went_on(monkeypatch):
    rows = _run(monkeypatch, [{"a", "b"}, {"a"}])
    assert [row.ok for row in rows if row.device == "a"] == [True] * 3
    left = [row.status for row in rows if row.device == "b" and not row.ok]
    assert left and all(
        s.endswith(
            "left the scheduler (it died or lost its connection), before "
            "this row; the other devices went on"
        )
        for s in left
    )


def test_when_every_worker_left_no_row_says_the_others_went_on(monkeypatch):
    left = [row.status for row in _run(monkeypatch, [{"a", "b"}, set()]) if not row.ok]
    assert {s.split(" (")[0] for s in left} == {"error: device a", "error: device b"}
    assert all(s.endswith("; no other device finished either") for s in left)


def test_a_worker_missing_from_one_look_is_not_gone():
    absence = devices.Absence()
    assert not absence.gone(present=False)  # first look without it
    assert not absence.gone(present=True)  # it is back: the clock restarts
    assert not absence.gone(present=False)


def test_too_long_options_are_cut_and_read_in_linear_time(capsys):
    from tfcompress.cli.common import duration, parse_size

    for parse in (parse_size, duration):
        with pytest.raises(Exception, match="is not"):
            parse("1" * 200_000 + "!")  # quadratic regex backtracking took minutes
    assert main(["benchmark", "m.tflite", "--input-value", "n" * 100_000 + "=x"]) == 2
    line = capsys.readouterr().err.strip()
    assert "... (100,004 characters) is not NAME=VALUE" in line and len(line) < 1_300


def test_a_host_no_dns_name_spells_and_a_folder_for_a_pem_are_one_line(capsys, tmp_path):
    assert main(["benchmark", "m.tflite", "--on", f"tcp://{'h' * 300}:1"]) == 2
    assert "is not a name DNS can look up" in capsys.readouterr().err
    argv = ["--on", "tls://127.0.0.1:9", "--tls-ca-file", str(tmp_path), "--tls-cert", "c.pem"]
    assert main(["benchmark", "m.tflite", *argv]) == 2
    assert f"--tls-ca-file '{tmp_path}': not a file;" in capsys.readouterr().err
