"""Round 4 (issue 43): the microcontroller check, the C array, and the device connection.

The surfaces added after round 3, tried as an attacker would: ``mcu`` on hostile int8 files
(a builtin's options made impossible, an input type no kernel takes, a declared input of
10,000x10,000, hundreds of ops TFLM lacks), ``export-c`` with names C++ reserves and output
places it cannot write, ``--target mcu``/``gpu`` with batch options, ``--on`` addresses, TLS
files and fake servers, replayed reports with huge values, values echoed back, Dask's
environment, and signals during these runs. Each strategy belongs to one class
(:data:`ROUND4`), so ``benchmarks/fuzz.py --round 4`` or ``--classes on,echo`` runs them
apart from rounds 1-3.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
from pathlib import Path

import numpy as np

from fuzzing.invocations import (
    FAST_BENCHMARK,
    SERVERS,
    Invocation,
    _closed_port,
    _pick,
    _seed_inputs,
    invocation,
)
from fuzzing.mutations import load_all
from fuzzing.mutations_tflite import _edit_tflite
from fuzzing.seeds import Seeds

#: Bytes of data segment a round-4 process case may use (``mcu`` once took 4 GB in the CLI
#: for a 500-byte file): past it the allocation fails there, and the judge sees how.
CALLER_MEMORY = 3 * 2**30

ROUND4: dict[str, list[str]] = {}


def _round4(name: str, *, slow: bool = False):
    """Register ``name`` (``CLASS.kind``) as a round-4 invocation strategy of ``CLASS``."""
    ROUND4.setdefault(name.split(".")[0], []).append(name)
    return invocation(name, slow=slow)


# --- mcu on hostile int8 files --------------------------------------------------------------


def _mcu(path: Path, seeds: Seeds, rng: np.random.Generator, **expect: object) -> Invocation:
    argv: tuple[str, ...] = ("mcu", str(path))
    if rng.random() < 0.5:
        argv += ("--data", str(seeds.data_npz), "--samples", "4")
    return Invocation(
        "mcu",
        argv,
        (*_seed_inputs(seeds), str(path)),
        None,
        bool(expect.get("must_fail", False)),
        runner="process",
        memory_cap=CALLER_MEMORY,
    )


@_round4("mcu.mutated_file")
def _mcu_mutated(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    """Every round 1-3 ``.tflite`` mutation, now through ``mcu``."""
    names = sorted(n for n in load_all() if n.startswith(("tflite.", "bytes.tflite")))
    mutant = load_all()[str(_pick(rng, names))](rng, seeds, folder)
    return _mcu(mutant.path, seeds, rng)


def _options_edit(kind: str, rng: np.random.Generator):
    def edit(model: object) -> None:
        graph = model.subgraphs[0]  # type: ignore[attr-defined]
        ops = graph.operators
        if kind == "stride0":  # a CONV_2D with stride 0: LiteRT's reference kernel refuses
            for op in ops:
                options = op.builtinOptions
                if options is not None and hasattr(options, "strideW"):
                    options.strideW = options.strideH = 0
        elif kind == "input_type":  # a type no kernel reads (INT4, STRING, RESOURCE, INT2...)
            graph.tensors[graph.inputs[0]].type = int(_pick(rng, [17, 5, 20, 18, 9, 16]))
        elif kind == "output_rank0":
            tensor = graph.tensors[graph.outputs[0]]
            tensor.shape, tensor.shapeSignature = np.array([], np.int32), None
        elif kind == "declared_huge":  # 500 bytes declaring 10,000 x 10,000 inputs
            tensor = graph.tensors[graph.inputs[0]]
            tensor.shape = np.array([1, 10_000, 10_000, 1], np.int32)
            tensor.shapeSignature = tensor.shape.copy()
        elif kind == "batch":
            tensor = graph.tensors[graph.inputs[0]]
            tensor.shape[0] = int(_pick(rng, [2, 7, 64]))
            tensor.shapeSignature = tensor.shape.copy()
        elif kind == "custom_ops":  # hundreds of ops TFLM has no kernel for
            _custom_ops(model, int(rng.integers(20, 300)))
        elif kind == "options_type":  # an options table of another op's type
            for op in ops:
                op.builtinOptionsType = int(rng.integers(1, 120))
        elif kind == "while_self":  # a WHILE whose body is its own condition
            _while_self(model)

    return edit


def _custom_ops(model: object, count: int) -> None:
    from tfcompress._compat.litert import flatbuffer_utils

    schema = flatbuffer_utils().schema_fb
    codes = model.operatorCodes  # type: ignore[attr-defined]
    graph = model.subgraphs[0]  # type: ignore[attr-defined]
    first = graph.inputs[0]
    for number in range(count):
        code = schema.OperatorCodeT()
        code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.CUSTOM
        code.customCode = f"Fuzz{number}".encode()
        code.version = 1
        codes.append(code)
        tensor = copy.deepcopy(graph.tensors[first])
        tensor.name = f"fuzz_{number}".encode()
        graph.tensors.append(tensor)
        op = schema.OperatorT()
        op.opcodeIndex, op.inputs = len(codes) - 1, [first]
        op.outputs = [len(graph.tensors) - 1]
        graph.operators.append(op)


def _while_self(model: object) -> None:
    from tfcompress._compat.litert import flatbuffer_utils

    schema = flatbuffer_utils().schema_fb
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.WHILE
    code.version = 1
    model.operatorCodes.append(code)  # type: ignore[attr-defined]
    graph = model.subgraphs[0]  # type: ignore[attr-defined]
    op = schema.OperatorT()
    op.opcodeIndex = len(model.operatorCodes) - 1  # type: ignore[attr-defined]
    op.inputs, op.outputs = [graph.inputs[0]], [graph.inputs[0]]
    options = schema.WhileOptionsT()
    options.condSubgraphIndex = options.bodySubgraphIndex = 0
    op.builtinOptionsType, op.builtinOptions = schema.BuiltinOptions.WhileOptions, options
    graph.operators.insert(0, op)


_MCU_EDITS = (
    "stride0",
    "input_type",
    "output_rank0",
    "declared_huge",
    "batch",
    "custom_ops",
    "options_type",
    "while_self",
)


def _mcu_edit(kind: str) -> None:
    @_round4(f"mcu.{kind}", slow=kind == "custom_ops")
    def make(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
        return _mcu(_edit_tflite(seeds, folder, _options_edit(kind, rng)), seeds, rng)

    del make


for _kind in _MCU_EDITS:
    _mcu_edit(_kind)


# --- export-c: names C++ reserves, output places it cannot write ------------------------------

_NAMES = ["while", "int", "class", "main", "std", "__FILE__", "_Bool", "8bit", "a-b", "ñame"]
_NAMES += ["__cplusplus", "NULL", "errno", "assert", "_Reserved", "x" * 300, "export"]
_OUTS = ["8bit", 'q"b', "nl\n#error injected\n//", "a b", "class", "*/ int x; /*", "\\"]


@_round4("export_c.names")
def _export_c_names(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    name = str(_pick(rng, _NAMES))
    model = seeds.tflite_int8
    argv: tuple[str, ...] = ("export-c",)
    if rng.random() < 0.5:  # the file is named so, and the identifier comes from it
        model = folder / f"{name.replace('/', '_')[:240]}.tflite"  # a name fits in 255 bytes
        shutil.copyfile(seeds.tflite_int8, model)
        argv += (str(model),)
    else:
        argv += (str(model), "--name", name)
    out = folder / str(_pick(rng, _OUTS) if rng.random() < 0.5 else "model_data")
    return Invocation(
        "export-c",
        (*argv, "--out", str(out)),
        (*_seed_inputs(seeds), str(model)),
        None,
        False,
        compiles=str(out),
    )


@_round4("export_c.places")
def _export_c_places(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    # Never a real device's name: with .cc appended, /dev/null wrote /dev/null.cc as root.
    fifo = folder / "piped"
    os.mkfifo(fifo.with_name("piped.cc"))
    out = str(_pick(rng, [".", "", "/proc/x", "/", "/dev/full/x", "/sys/x", str(fifo)]))
    argv = ("export-c", str(seeds.tflite_int8), "--out", out)
    # A process of its own, in the case folder: "." and "" name the folder it runs in.
    return Invocation("export-c", argv, _seed_inputs(seeds), None, True, runner="process")


# --- --target mcu/gpu with batch options ---------------------------------------------------


@_round4("target.batch")
def _target_batch(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    out = folder / "out.tflite"
    target = str(_pick(rng, ["mcu", "gpu"]))
    batch = str(_pick(rng, ["0", "1", "2", "7", "-1", "99999999", "1e3", "x"]))
    argv = (
        "quantize",
        str(seeds.keras),
        "--data",
        str(seeds.data_npz),
        "--calibration-samples",
        "8",
    )
    argv += ("--target", target, "--static-batch", batch, "--out", str(out))
    return Invocation("quantize", argv, _seed_inputs(seeds), str(out), False)


# --- --on: addresses, TLS files, fake servers -------------------------------------------------

_ON_ENTRIES = ("benchmark", "gate", "compress")


def _on_argv(rng: np.random.Generator, seeds: Seeds, folder: Path, *extra: str):
    entry = str(_pick(rng, list(_ON_ENTRIES)))
    if entry == "benchmark":
        argv: tuple[str, ...] = ("benchmark", str(seeds.tflite_int8), *FAST_BENCHMARK)
        output = None
    elif entry == "gate":
        argv = ("gate", str(seeds.keras), str(seeds.tflite_int8), "--eval", str(seeds.data_npz))
        output = None
    else:
        out = folder / "out.tflite"
        argv = ("compress", str(seeds.keras), "--data", str(seeds.data_npz))
        argv += ("--eval", str(seeds.data_npz), "--out", str(out))
        output = str(out)
    return entry, (*argv, *extra), output


_ADDRESSES = [
    "tcp://" + "h" * 100_000 + ":1",
    "tcp://127.0.0.1:" + "9" * 5_000,
    "tcp://127.0.0.1:0",
    "tcp://127.0.0.1:-1",
    "tcp://\x00:8786",
    "tcp://ünïcode.invalid:8786",
    "tcp://[::1",
    "tcp://256.256.256.256:8786",
    "tls://127.0.0.1:8786",
    "inproc://x",
    "ucx://127.0.0.1:8786",
    "tcp://127.0.0.1:8786/path",
    " tcp://127.0.0.1:8786",
    "tcp://127.0.0.1:8786\n",
]


@_round4("on.address")
def _on_address(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    address = str(_pick(rng, [*_ADDRESSES, f"tcp://127.0.0.1:{_closed_port()}"]))
    entry, argv, output = _on_argv(rng, seeds, folder, "--on", address)
    return Invocation(entry, argv, _seed_inputs(seeds), output, True)


@_round4("on.fake_server")
def _on_fake_server(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    port = SERVERS.port(str(_pick(rng, ["garbage", "short_frame", "huge_frame", "closes"])))
    entry, argv, output = _on_argv(rng, seeds, folder, "--on", f"tcp://127.0.0.1:{port}")
    return Invocation(entry, argv, _seed_inputs(seeds), output, True)


def _pem(kind: str, folder: Path, rng: np.random.Generator, number: int = 0) -> Path:
    path = folder / f"{number}_{kind}.pem"
    if kind == "garbage":
        path.write_text("-----BEGIN CERTIFICATE-----\nnot base64 !!\n-----END CERTIFICATE-----\n")
    elif kind == "random":
        path.write_bytes(rng.bytes(int(rng.integers(1, 5000))))
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "key_as_cert":
        key = "-----BEGIN PRIVATE KEY-----\nMIIBVQIBADANBg==\n-----END PRIVATE KEY-----\n"
        path.write_text(key)
    elif kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "huge_line":
        path.write_text("-----BEGIN CERTIFICATE-----\n" + "A" * 2_000_000 + "\n")
    return path  # "missing": never written


_PEMS = ("garbage", "random", "empty", "key_as_cert", "folder", "fifo", "huge_line", "missing")


@_round4("on.tls_files")
def _on_tls_files(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    files = [_pem(str(_pick(rng, list(_PEMS))), folder, rng, number) for number in range(3)]
    flags = ("--tls-ca-file", "--tls-cert", "--tls-key")
    chosen = [i for i in range(3) if rng.random() < 0.7] or [0]
    extra = [part for i in chosen for part in (flags[i], str(files[i]))]
    entry, argv, output = _on_argv(rng, seeds, folder, "--on", "tls://127.0.0.1:9", *extra)
    inputs = (*_seed_inputs(seeds), *(str(f) for f in files if f.is_file()))
    return Invocation(entry, argv, inputs, output, True)


_DASK_ENV = [
    ("DASK_DISTRIBUTED__COMM__TLS__CA_FILE", "/nonexistent/ca.pem"),
    ("DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT", "/nonexistent/c.pem"),
    ("DASK_DISTRIBUTED__COMM__TLS__MIN_VERSION", "1.0"),
    ("DASK_DISTRIBUTED__COMM__TLS__MIN_VERSION", "garbage"),
    ("DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT", "garbage"),
    ("DASK_DISTRIBUTED__COMM__SHARD", "-1"),
    ("DASK_CONFIG", "/nonexistent"),
    ("DASK_DISTRIBUTED__COMM__TLS__CA_FILE", "x" * 100_000),
]


@_round4("env.dask")
def _env_dask(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    variable, value = _DASK_ENV[int(rng.integers(0, len(_DASK_ENV)))]
    pems = (("--tls-ca-file", str(_pem("empty", folder, rng))),) if rng.random() < 0.3 else ()
    extra = [part for pair in pems for part in pair]
    scheme = "tls" if "TLS" in variable or pems else str(_pick(rng, ["tcp", "tls"]))
    entry, argv, output = _on_argv(
        rng, seeds, folder, "--on", f"{scheme}://127.0.0.1:{_closed_port()}", *extra
    )
    return Invocation(
        entry, argv, _seed_inputs(seeds), output, True, env=((variable, value),), runner="process"
    )


# --- replayed reports with huge values, and values echoed in messages --------------------------

_HUGE = "9" * 200_000


@_round4("replay.huge_values")
def _replay_huge(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    field = str(_pick(rng, ["seconds", "name", "technique", "status", "why", "index", "size"]))
    value: object = _pick(rng, [_HUGE, "x " * 100_000, [_HUGE], {"k" * 100_000: 1}, 1e308])
    attempt = {"index": 1, "name": "int8", "technique": "ptq", "status": "passed", "why": "ok"}
    attempt |= {"recipe": {"recipe": {"name": "int8"}}, field: value}
    if rng.random() < 0.3:  # the value inside the recipe
        attempt["recipe"] = {"recipe": {"name": value if rng.random() < 0.5 else _HUGE}}
    report = folder / "compress.json"
    report.write_text(json.dumps({"attempts": [attempt], "chosen": attempt}))
    out = folder / "out.tflite"
    argv = ("compress", str(seeds.keras), "--data", str(seeds.data_npz), "--replay", str(report))
    argv += ("--eval", str(seeds.data_npz))
    inputs = (*_seed_inputs(seeds), str(report))
    return Invocation("compress", (*argv, "--out", str(out)), inputs, str(out), False)


_LONG = "7" * 100_000
# (entry, options, whether they are refused while the arguments are read: within 30 s)
_ECHOES = [
    ("benchmark", ("--input-value", "n" * 100_000 + "=1"), True),
    ("benchmark", ("--input-value", "x=" + _LONG + "!"), True),
    ("benchmark", ("--batch-dim", "n" * 100_000 + "=1"), True),
    ("benchmark", ("--input-shape", "x=" + "1x" * 50_000), False),
    ("benchmark", ("--backends", "b" * 100_000), True),
    ("mcu", ("--max-arena", _LONG + "!"), True),
    ("mcu", ("--max-flash", "1" + " " * 100_000 + "!"), True),
    ("mcu", ("--timeout", _LONG + "!"), True),
    ("mcu", ("--max-arena", "1" + "0" * 5_000 + "KB"), True),
    ("compress", ("--max-slowdown", _LONG + "x!"), True),
    ("compress", ("--time-budget", "1." + _LONG + "x"), True),
    ("compress", ("--time-budget", "1" + "0" * 5_000 + "!"), True),
    ("quantize", ("--recipe", "r" * 100_000), True),
    ("quantize", ("--float-node", "\x1b[2J" * 20_000), False),
    ("gate", ("--max-drop", _LONG), True),
]


@_round4("echo.long_values")
def _echo(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    entry, extra, at_parse = _ECHOES[int(rng.integers(0, len(_ECHOES)))]
    out = folder / "out.tflite"
    base = {
        "benchmark": ("benchmark", str(seeds.tflite_int8), *FAST_BENCHMARK),
        "mcu": ("mcu", str(seeds.tflite_int8)),
        "compress": ("compress", str(seeds.keras), "--data", str(seeds.data_npz)),
        "quantize": ("quantize", str(seeds.keras), "--data", str(seeds.data_npz)),
        "gate": ("gate", str(seeds.keras), str(seeds.tflite_int8), "--eval", str(seeds.data_npz)),
    }[entry]
    writes = entry in {"compress", "quantize"}
    argv = (*base, *extra, *(("--out", str(out)) if writes else ()))
    output = str(out) if writes else None
    within = 30.0 if at_parse else None
    return Invocation(entry, argv, _seed_inputs(seeds), output, True, within_s=within)


# --- signals during the new surfaces -------------------------------------------------------


def _signal_round4(name: str) -> None:
    @_round4(f"signal.round4_{name.lower()}")
    def make(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
        delay = float(rng.uniform(0.2, 3.0))
        if rng.random() < 0.5:
            argv: tuple[str, ...] = ("mcu", str(seeds.tflite_int8))
            argv += ("--data", str(seeds.data_npz)) if rng.random() < 0.5 else ()
        else:  # connecting: a server that accepts and never answers
            silent = f"tcp://127.0.0.1:{SERVERS.port('silent')}"
            argv = ("benchmark", str(seeds.tflite_int8), *FAST_BENCHMARK, "--on", silent)
        return Invocation(
            argv[0],
            argv,
            _seed_inputs(seeds),
            None,
            False,
            runner="process",
            interrupt=(name, delay),
            exit_codes=(0, 128 + int(signal.Signals[name])),
        )

    del make


for _name in ("SIGTERM", "SIGHUP", "SIGINT"):
    _signal_round4(_name)
