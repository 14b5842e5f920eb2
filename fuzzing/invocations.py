"""Strategies that build a whole invocation: hostile compilers, reports, options, servers.

Where a mutation strategy makes one input file and lets the campaign pick the command, these
make the command line too (``quantize --target edgetpu --compiler STAND-IN``, ``compress
--replay``, ``select``, ``zoo``, ``benchmark --report``/``--input-shape``). Each is
``fn(rng, seeds, folder) -> Invocation``; ``slow`` ones (a compile, a selection) are left
out of the test suite's short campaign.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fuzzing.seeds import Seeds

FAST_BENCHMARK = ("--runs", "1", "--min-seconds", "0", "--warmup-seconds", "0")


@dataclass(frozen=True)
class Invocation:
    """One command line and what the contract expects of it.

    Attributes:
        entry: The subcommand.
        argv: Its arguments.
        inputs: Files that must be byte-identical afterwards.
        output: A path that must not exist after a failed run.
        must_fail: Every correct run exits 2.
        env: Environment variables set for this run only (it then runs as a process of its
            own, like ``runner="process"``); None: the campaign's environment.
        runner: ``"cli"``: ``tfcompress.cli.main`` in the fuzz worker; ``"process"``: a fresh
            ``python -m tfcompress`` with a TMPDIR of its own that must be left empty;
            ``"pytest"``: ``python -m pytest ARGV`` in the case folder (the gate plugin).
        interrupt: ``(signal name, seconds)``: send that signal that long after the start
            (a process run; never before the CLI installed its handlers).
        exit_codes: The exit codes the contract allows, when not the usual ones (0, 1 for a
            failed check, 2): 128+N for an interrupt, pytest's 4 for a usage error.
        memory_cap: A process run's data segment limit in bytes (``RLIMIT_DATA``), or None.
        compiles: ``export-c``'s ``--out``: after exit 0, ``OUT.cc`` must compile as C++11
            (``g++ -fsyntax-only``) with nothing of ``--out`` written raw into it.
        within_s: The run must end within this many seconds (a parse linear in its input).
    """

    entry: str
    argv: tuple[str, ...]
    inputs: tuple[str, ...]
    output: str | None
    must_fail: bool
    env: tuple[tuple[str, str], ...] | None = None
    runner: str = "cli"
    interrupt: tuple[str, float] | None = None
    exit_codes: tuple[int, ...] | None = None
    memory_cap: int | None = None
    compiles: str | None = None
    within_s: float | None = None


Builder = Callable[[np.random.Generator, Seeds, Path], Invocation]
INVOCATIONS: dict[str, Builder] = {}
SLOW: set[str] = set()


def invocation(name: str, *, slow: bool = False) -> Callable[[Builder], Builder]:
    """Register an invocation strategy under ``name``."""

    def register(fn: Builder) -> Builder:
        INVOCATIONS[name] = fn
        if slow:
            SLOW.add(name)
        return fn

    return register


def _pick(rng: np.random.Generator, options: list) -> object:
    return options[int(rng.integers(0, len(options)))]


def _seed_inputs(seeds: Seeds) -> tuple[str, ...]:
    return (str(seeds.keras), str(seeds.data_npz), str(seeds.tflite_int8))


# --- Edge TPU compiler stand-ins ------------------------------------------------------------

_LOG = (
    "Edge TPU Compiler version 16.0.384591198\n"
    "Model compiled successfully in 12 ms.\n"
    "Number of operations that will run on Edge TPU: 3\n"
    "Number of operations that will run on CPU: 0\n"
)
_ARGS = """
args = sys.argv[1:]
out = pathlib.Path(args[args.index("-o") + 1])
model = pathlib.Path(args[-1])
target = out / (model.stem + "_edgetpu.tflite")
"""
_DAEMON = """
import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        pathlib.Path({pid!r}).write_text(str(os.getpid()))
        time.sleep(3600)
    os._exit(0)
while not pathlib.Path({pid!r}).exists():
    time.sleep(0.01)
"""
_STAND_INS = {
    "sleeps": ("time.sleep(3600)", True),
    "floods": (
        "chunk = 'x' * (1 << 20) + chr(10)\n"
        "for _ in range(200): sys.stdout.write(chunk)\n"
        "sys.exit(1)",
        True,
    ),
    "daemon": (_DAEMON + "target.write_bytes(model.read_bytes())\nprint({log!r})", False),
    "daemon_hangs": (_DAEMON + "time.sleep(3600)", True),
    "symlink_out": ("target.symlink_to('/etc/passwd')\nprint({log!r})", True),
    "garbage_out": ("target.write_bytes(b'garbage' * 100)\nprint({log!r})", True),
    "writes_outside": (
        "(pathlib.Path({folder!r}) / target.name).write_bytes(model.read_bytes())\nprint({log!r})",
        True,
    ),
    "exits_at_once": ("sys.exit(0)", True),
}


def _stand_in(kind: str) -> Builder:
    body, must_fail = _STAND_INS[kind]

    def make(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
        script = folder / "edgetpu_compiler"
        code = body.format(pid=str(folder / "daemon.pid"), log=_LOG, folder=str(folder))
        script.write_text(f"#!{sys.executable}\nimport sys, time, pathlib\n{_ARGS}\n{code}\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        out = folder / "out.tflite"
        argv = [
            "quantize",
            str(seeds.keras),
            "--data",
            str(seeds.data_npz),
            "--calibration-samples",
            "8",
        ]
        argv += ["--target", "edgetpu", "--compiler", str(script), "--out", str(out)]
        # The one time limit bounds the conversion too: a minute stops a hanging stand-in
        # well inside the case's own limit and leaves the conversion room on a busy machine.
        return Invocation(
            "quantize",
            tuple(argv),
            _seed_inputs(seeds),
            str(out),
            must_fail,
            env=(("TFCOMPRESS_TIMEOUT", "60"),),
        )

    return make


for _kind in _STAND_INS:
    invocation(f"compiler.{_kind}", slow=True)(_stand_in(_kind))


# --- compress --replay with hostile reports ---------------------------------------------------


def _attempt(technique: str, recipe: object, **fields: object) -> dict:
    return {
        "index": 1,
        "name": technique,
        "technique": technique,
        "status": "passed",
        "why": "ok",
        "recipe": recipe,
        **fields,
    }


_HOSTILE_REPORTS = [
    {"attempts": [], "chosen": _attempt("qat", {"epochs": 10**9})},
    {"attempts": [], "chosen": _attempt("qat", {"epochs": 1e9})},
    {"attempts": [], "chosen": _attempt("qat", {"epochs": 1, "safe_mode": False})},
    {"attempts": [], "chosen": _attempt("prune", {"skip_layers": "dense", "epochs": 1})},
    {"attempts": [], "chosen": _attempt("cluster", {"clusters": [16]})},
    {"attempts": [], "chosen": _attempt("ptq", {"recipe": {"name": "int8"}, "seed": -1})},
    {"attempts": [], "chosen": _attempt("ptq", {"recipe": {"name": 7}})},
    {"attempts": [], "chosen": _attempt("ptq", {"recipe": {"name": "int8", "x": 1}})},
    {"attempts": [], "chosen": _attempt("exec", {})},
    {"attempts": [], "chosen": _attempt("qat", "epochs=1")},
    {"attempts": [], "chosen": ["qat"]},
    {"attempts": "all", "chosen": None},
    {"attempts": [1, None, "x"]},
    [],
]


@invocation("replay.hostile_report")
def _hostile_report(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    report = folder / "compress.json"
    choice = int(rng.integers(0, len(_HOSTILE_REPORTS) + 2))
    if choice < len(_HOSTILE_REPORTS):
        report.write_text(json.dumps(_HOSTILE_REPORTS[choice]))
    elif choice == len(_HOSTILE_REPORTS):
        report.write_bytes(rng.bytes(int(rng.integers(0, 200))))
    else:
        report.write_text('{"attempts": [' * 50_000)
    out = folder / "out.tflite"
    argv = ["compress", str(seeds.keras), "--data", str(seeds.data_npz), "--replay", str(report)]
    inputs = (*_seed_inputs(seeds), str(report))
    return Invocation("compress", (*argv, "--out", str(out)), inputs, str(out), True)


# --- select: options, schedulers, resume files ------------------------------------------------


def _select_argv(seeds: Seeds, *extra: str) -> tuple[str, ...]:
    data = str(seeds.select_train)
    base = ["select", "--train", data, "--eval", data, "--max-size", "10MB"]
    tiny = ["--families", "mobilenet_v2", "--width-multipliers", "0.35", "--resolutions", "32"]
    fast = ["--epochs", "1", "--latency-runs", "1", "--latency-seconds", "0"]
    return (*base, *tiny, *fast, *extra)


_SELECT_OPTIONS = [
    ("--max-size", "1e999"),
    ("--max-size", "-5KB"),
    ("--max-latency", "inf"),
    ("--max-latency", "nan"),
    ("--min-accuracy", "7"),
    ("--latency-seconds", "inf"),
    ("--latency-seconds", "nan"),
    ("--seed", "-1"),
    ("--seed", str(2**70)),
    ("--threads", "0"),
    ("--width-multipliers", "nan"),
    ("--resolutions", "99999999"),
    ("--families", "nosuchnet"),
    ("--report", "/proc/tfcompress-fuzz"),
]


@invocation("select.options")
def _select_options(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    extra = _pick(rng, _SELECT_OPTIONS)
    return Invocation("select", _select_argv(seeds, *extra), (str(seeds.select_train),), None, True)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again: nothing listens there


@invocation("select.scheduler_junk")
def _scheduler_junk(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    address = _pick(
        rng,
        [
            "tls://127.0.0.1:8786",
            "ws://127.0.0.1:8786",
            "tcp://127.0.0.1:" + "9" * 50,
            "tcp://127.0.0.1:0",
            "tcp://:8786",
            "garbage",
            "tcp://[::1",
            f"tcp://127.0.0.1:{_closed_port()}",
        ],
    )
    argv = _select_argv(seeds, "--scheduler", str(address))
    return Invocation("select", argv, (str(seeds.select_train),), None, True)


@invocation("select.scheduler_silent", slow=True)
def _scheduler_silent(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    port = SERVERS.port("silent")
    argv = _select_argv(seeds, "--scheduler", f"tcp://127.0.0.1:{port}")
    return Invocation("select", argv, (str(seeds.select_train),), None, True)


@invocation("select.scheduler_garbage")
def _scheduler_garbage(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    port = SERVERS.port("garbage")
    argv = _select_argv(seeds, "--scheduler", f"tcp://127.0.0.1:{port}")
    return Invocation("select", argv, (str(seeds.select_train),), None, True)


class _Servers:
    """Loopback servers that are not Dask schedulers, alive for the whole campaign."""

    def __init__(self) -> None:
        self._sockets: dict[str, socket.socket] = {}
        self._stop = threading.Event()

    def port(self, kind: str) -> int:
        """The port of a loopback server of ``kind``, started on first use.

        ``silent`` never accepts (the kernel's backlog does), ``garbage`` sends 8 bytes,
        ``short_frame`` a frame Dask's msgpack cannot read, ``huge_frame`` announces 6e9
        bytes then sends zeros for 6 s, ``closes`` hangs up at once.
        """
        if kind not in self._sockets:
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen(64)
            self._sockets[kind] = listener
            if kind != "silent":
                threading.Thread(target=self._serve, args=(listener, kind), daemon=True).start()
        return self._sockets[kind].getsockname()[1]

    def _serve(self, listener: socket.socket, kind: str) -> None:
        listener.settimeout(0.5)
        held = []
        while not self._stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            held.append(connection)
            reply = {"garbage": _garbage, "short_frame": _short_frame, "huge_frame": _zeros}
            if kind == "closes":
                connection.close()
            else:
                threading.Thread(target=reply[kind], args=(connection,), daemon=True).start()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def close(self) -> None:
        self._stop.set()
        for listener in self._sockets.values():
            listener.close()
        self._sockets.clear()


def _garbage(connection: socket.socket) -> None:
    connection.sendall(b"\x00\xffgarbag")


def _short_frame(connection: socket.socket) -> None:
    body = b"\x00" * 8 + b"\x93\x01\x02"  # length-prefixed, as Dask frames are; not msgpack
    with contextlib.suppress(OSError):
        connection.sendall(struct.pack("Q", len(body)) + body)


def _zeros(connection: socket.socket) -> None:
    deadline = time.monotonic() + 6
    with contextlib.suppress(OSError):  # the client hung up
        connection.sendall(struct.pack("Q", 6 * 10**9))
        while time.monotonic() < deadline and not SERVERS.stopped:
            connection.sendall(b"\0" * 65536)
    connection.close()


SERVERS = _Servers()


@invocation("select.resume_files", slow=True)
def _resume_files(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    """A work folder from a real run, one stored result made hostile: it must be redone."""
    work = Path(folder / "work")
    _selection_workdir(seeds).copy_to(work)
    record = next(work.glob("*.json"))
    edits = [
        lambda d: d["costs"]["result"].update(latency_ms=float("nan")),
        lambda d: d["costs"]["result"].update(size_bytes="4000"),
        lambda d: d["training"]["result"].update(accuracy=2.0),
        lambda d: d["training"]["result"].update(extra=[1, 2]),
        lambda d: d.update(costs=[1]),
        lambda d: d.update(format=7),
    ]
    choice = int(rng.integers(0, len(edits) + 1))
    if choice == len(edits):
        text = record.read_text()
        record.write_text(text[: int(rng.integers(0, len(text)))])
    else:
        data = json.loads(record.read_text())
        edits[choice](data)
        record.write_text(json.dumps(data))  # NaN goes in as the NaN token
    argv = _select_argv(seeds, "--workdir", str(work), "--json")
    return Invocation("select", argv, (str(seeds.select_train),), None, False)


class _Workdir:
    def __init__(self, path: Path) -> None:
        self.path = path

    def copy_to(self, target: Path) -> None:
        import shutil

        shutil.copytree(self.path, target)


_WORKDIRS: dict[str, _Workdir] = {}


def _selection_workdir(seeds: Seeds) -> _Workdir:
    """One real selection run's work folder, made once per campaign (in its own process)."""
    key = str(seeds.root)
    if key not in _WORKDIRS:
        import subprocess

        path = seeds.root / "select_work"
        argv = _select_argv(seeds, "--workdir", str(path))
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        subprocess.run(
            [sys.executable, "-m", "tfcompress", *argv],
            check=False,
            capture_output=True,
            timeout=900,
            env=env,
        )
        if not any(path.glob("*.json")):
            raise RuntimeError(f"the seed selection run made no work folder in {path}")
        _WORKDIRS[key] = _Workdir(path)
    return _WORKDIRS[key]


# --- zoo, benchmark's --input-shape and --report ------------------------------------------------


@invocation("zoo.absurd_sizes")
def _zoo(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    extra = _pick(
        rng,
        [
            ("--input-shape", "100000x100000x3"),
            ("--input-shape", "224x224x100000"),
            ("--input-shape", "0x0x0"),
            ("--num-classes", str(10**12)),
            ("--width", "1e300"),
            ("--width", "nan"),
        ],
    )
    return Invocation("zoo", ("zoo", "mobilenet_v2", "--no-macs", *extra), (), None, True)


@invocation("benchmark.input_shape")
def _input_shape(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    text = _pick(
        rng,
        [
            "x",
            "=1x8",
            "x=1xx8",
            "x=-1x8x8x1",
            "x=1x8x8x1x",
            "nosuch=1x8x8x1",
            "x=1x99999999999999x8x1",
            "x=" + "9" * 400,
            "x=1e3x8x8x1",
            "\x00=1",
        ],
    )
    argv = ("benchmark", str(seeds.tflite_int8), *FAST_BENCHMARK, "--input-shape", str(text))
    return Invocation("benchmark", argv, _seed_inputs(seeds), None, True)


@invocation("benchmark.report_folder")
def _report_folder(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    choice = int(rng.integers(0, 5))
    must_fail = True
    if choice == 0:
        report = folder / "a_file"
        report.write_text("not a folder")
    elif choice == 1:
        report = Path("/proc/tfcompress-fuzz-report")
    elif choice == 2:
        report = folder / "dangling"
        report.symlink_to(folder / "gone")
    elif choice == 3:
        report = folder / ("r" * int(rng.integers(256, 400)))
    else:  # read-only: root writes there anyway, anyone else is refused; both are fine
        report = folder / "read_only"
        report.mkdir()
        report.chmod(0o555)
        must_fail = False
    argv = ("benchmark", str(seeds.tflite_int8), *FAST_BENCHMARK, "--report", str(report))
    return Invocation("benchmark", argv, _seed_inputs(seeds), None, must_fail)


def load_invocations() -> dict[str, Builder]:
    """Import every invocation module (each registers itself) and return the registry."""
    from fuzzing import invocations_options, invocations_round4, invocations_runs

    del invocations_options, invocations_round4, invocations_runs  # imported for registration
    return INVOCATIONS
