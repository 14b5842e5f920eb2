"""Invocation strategies for hostile option values: rules, engines, limits, outputs, replays.

Issue 29's surfaces that a command line alone reaches: ``quantize --rules`` text built to
blow up a regex engine or a JSON reader, ``--engine``/``--methods`` pairs that no recipe
makes, time and memory limits from the environment that are no limits (each in a fresh
``python -m tfcompress``, where the variable is read as a user sets it), ``--out`` and
``--report`` naming things that are not a writable path, and replay reports with JSON a
reader must refuse without recursing or parsing forever.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from fuzzing.invocations import FAST_BENCHMARK, Invocation, _attempt, _seed_inputs, invocation
from fuzzing.seeds import Seeds

# --- quantize --rules: patterns and JSON built to be expensive -------------------------------


def _hostile_rules(rng: np.random.Generator) -> list[tuple[str, bool]]:
    """``(rule, must_fail)``: a valid pattern may match an op and quantize (fine) or none."""
    depth = int(rng.integers(1_000, 1_500))
    nesting = int(rng.integers(3_000, 4_000))
    digits = int(rng.integers(5_000, 6_000))
    control = "".join(chr(int(c)) for c in rng.integers(1, 32, 8))
    return [
        ("(.*)*;x=float", False),  # nested quantifiers: a backtracking engine never ends
        ("(a|a)*(.*)*;=float", False),
        (".*.*.*.*.*.*.*.*x=float", False),
        ("CONV_2D:(.*)*=weights", False),
        ("=float", False),
        ("(" * depth + "a" + ")" * depth + "=float", True),
        ('{"pattern": ' + "[" * nesting + "]" * nesting + "}", True),
        ('{"pattern": ' + '{"a": ' * nesting + "1" + "}" * nesting + "}", True),
        ('{"pattern": "a", "mode": "int8", "weight_bits": ' + "9" * digits + "}", True),
        ('{"pattern": "a", "mode": "int8", "weight_bits": 1.' + "9" * digits + "}", True),
        ("9" * digits + "=float", True),
        ("a" * 20_000 + "=float", True),
        ("x" * int(rng.integers(10_001, 30_000)) + "=float", True),
        ("dense" + control + "=float", True),
        ("dense=" + control, True),
        ("\x00conv=float", True),
        ("conv\x1b[31m\r\nFAKE LINE=float", True),
        ("(?=conv)=float", True),
        ("(?P<n>a)(?P=n)=float", True),
        ('{"pattern": "a", "mode": "' + "m" * 50_000 + '"}', True),
        ('{"pattern": "a", "mode": "int8", "granularity": {"a": [1e999]}}', True),
        ('{"pattern": NaN, "mode": "float"}', True),
        ("conv=", True),
    ]


@invocation("rules.hostile")
def _hostile_rule(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    rules = _hostile_rules(rng)
    rule, must_fail = rules[int(rng.integers(0, len(rules)))]
    # A float .tflite goes straight to LiteRT Quantizer; the Keras seed converts first.
    model = seeds.tflite_float if rng.random() < 0.7 else seeds.keras
    recipe = "dynamic" if rng.random() < 0.5 else "int8"
    out = folder / "out.tflite"
    argv = ["quantize", str(model), "--recipe", recipe, "--rules", rule, "--out", str(out)]
    argv += ["--data", str(seeds.data_npz), "--calibration-samples", "8"]
    if rng.random() < 0.3:  # a benign rule after it: later ones win, but both are read
        argv += ["--rules", "CONV_2D:.*=float"]
    return Invocation("quantize", tuple(argv), _seed_inputs(seeds), str(out), must_fail)


# --- quantize --engine/--methods pairs that no recipe makes ----------------------------------

_REFUSED_COMBINATIONS = [
    ("--engine", "litert-quantizer", "--methods", "equalize"),
    ("--engine", "litert-quantizer", "--methods", "auto"),
    ("--engine", "converter", "--recipe", "int4-weights"),
    ("--engine", "converter", "--recipe", "int4-dynamic"),
    ("--engine", "converter", "--block-size", "32"),
    ("--engine", "litert-quantizer", "--recipe", "int8", "--block-size", "64"),
    ("--methods", "bogus"),
    ("--methods", "equalize,equalize"),
    ("--methods", "percentile-ranges,mse-ranges"),
    ("--methods", "auto,equalize"),
    ("--methods", "none,adaround"),
    ("--methods", ""),
    ("--methods", ","),
    ("--methods", "equalize\x1b[2J"),
    ("--methods", "e" * 5_000),
    ("--recipe", "float16", "--methods", "adaround"),
    ("--recipe", "dynamic", "--methods", "mse-ranges"),
    ("--recipe", "float32", "--methods", "bias-correction"),
    ("--recipe", "int16x8", "--methods", "auto"),
    ("--recipe", "int4-weights", "--methods", "equalize"),
    ("--format", "onnx", "--methods", "equalize"),
    ("--format", "onnx", "--engine", "litert-quantizer"),
    ("--format", "onnx", "--recipe", "int16x8"),
    ("--engine", "bogus"),
]


@invocation("engine.refused_combinations")
def _refused_combination(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    extra = _REFUSED_COMBINATIONS[int(rng.integers(0, len(_REFUSED_COMBINATIONS)))]
    onnx = "--format" in extra and "onnx" in extra
    out = folder / ("out.onnx" if onnx else "out.tflite")
    model = seeds.keras if rng.random() < 0.7 else seeds.tflite_float
    argv = ["quantize", str(model), "--data", str(seeds.data_npz), "--calibration-samples", "8"]
    argv += [*extra, "--out", str(out)]
    return Invocation("quantize", tuple(argv), _seed_inputs(seeds), str(out), True)


# --- limits from the environment: each in a fresh process ---------------------------------

# Blank is unset (the default) and float("٣") is 3: neither is here.
_BAD_LIMITS = ["inf", "-inf", "nan", "1e308", "-1", "0", "garbage", "1e999", "0x10", "-0"]
_BAD_LIMITS += ["9" * 5_000, "1e", "3600s", "1\x1b[2J", "604801"]
_BAD_MEMORY = ["inf", "nan", "1e308", "-1", "0", "garbage", "1e999", "9" * 30, "12", "0.5GB"]
_BAD_MEMORY += ["8XB", "GiB", "-8GiB", "nanGB", "1e19GiB"]


def _limit_case(variable: str, values: list[str]) -> None:
    """A bad value of one of the limits every child runs under, met by a random one of them.

    The one time limit and the one memory limit bound a conversion, the load probe and the
    Edge TPU compiler alike: each is checked before its child starts.
    """

    # A fresh process each (seconds): the long campaign's. The suite refuses every value of
    # both lists in-process (tests/test_untrusted_options.py, each limit's hostile values).
    @invocation(f"env.{variable.removeprefix('TFCOMPRESS_').lower()}", slow=True)
    def make(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
        value = values[int(rng.integers(0, len(values)))]
        kind = ("child", "probe", "compiler")[int(rng.integers(0, 3))]
        out = folder / "out.tflite"
        if kind == "probe":  # the probe of a .tflite reads it: inspect or benchmark
            if rng.random() < 0.5:
                argv: tuple[str, ...] = ("inspect", str(seeds.tflite_int8))
            else:
                argv = ("benchmark", str(seeds.tflite_int8), *FAST_BENCHMARK)
            output = None
        else:
            argv = ("quantize", str(seeds.keras), "--data", str(seeds.data_npz))
            argv += ("--calibration-samples", "8", "--out", str(out))
            if kind == "compiler":
                argv += ("--target", "edgetpu", "--compiler", str(_copying_compiler(folder)))
            output = str(out)
        return Invocation(
            argv[0],
            argv,
            _seed_inputs(seeds),
            output,
            True,
            env=((variable, value),),
            runner="process",
        )

    del make


def _copying_compiler(folder: Path) -> Path:
    """A stand-in ``edgetpu_compiler`` that copies its model and says it compiled it."""
    import stat
    import sys

    from fuzzing.invocations import _ARGS, _LOG

    script = folder / "edgetpu_compiler"
    code = f"target.write_bytes(model.read_bytes())\nprint({_LOG!r})"
    script.write_text(f"#!{sys.executable}\nimport sys, time, pathlib\n{_ARGS}\n{code}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


_limit_case("TFCOMPRESS_TIMEOUT", _BAD_LIMITS)
_limit_case("TFCOMPRESS_MEMORY_LIMIT", _BAD_MEMORY)


# --- --out and --report naming what is no writable path -------------------------------------


def _hostile_path(kind: str, folder: Path, rng: np.random.Generator, suffix: str) -> Path:
    """A path of ``kind`` in ``folder``: it exists as something else, or cannot exist."""
    if kind == "symlink_loop":
        first, second = folder / f"loop_a{suffix}", folder / f"loop_b{suffix}"
        first.symlink_to(second)
        second.symlink_to(first)
        return first
    if kind == "dangling_symlink":
        link = folder / f"dangling{suffix}"
        link.symlink_to(folder / "nowhere" / f"gone{suffix}")
        return link
    if kind == "fifo":
        fifo = folder / f"fifo{suffix}"
        os.mkfifo(fifo)
        return fifo
    if kind == "directory":
        directory = folder / f"directory{suffix}"
        directory.mkdir()
        (directory / "keep.txt").write_text("a file the run must not touch")
        return directory
    if kind == "under_file":
        plain = folder / "plain_file"
        plain.write_text("a file, not a folder")
        return plain / f"out{suffix}"
    if kind == "long_name":
        return folder / ("n" * int(rng.integers(5_000, 5_200)) + suffix)
    if kind == "long_path":  # every part short, the whole far past PATH_MAX
        return folder.joinpath(*["d" * 200] * int(rng.integers(25, 40)), f"out{suffix}")
    raise ValueError(kind)


_PATH_KINDS = (
    "symlink_loop",
    "dangling_symlink",
    "fifo",
    "directory",
    "under_file",
    "long_name",
    "long_path",
)


def _path_inputs(path: Path, folder: Path) -> tuple[str, ...]:
    """The hostile path's own files: a run must leave them as they were."""
    return tuple(str(p) for p in folder.iterdir() if p.name != "edgetpu_compiler") or (str(path),)


def _register_outputs() -> None:
    for kind in _PATH_KINDS:

        @invocation(f"out.hostile.{kind}")
        def out_case(
            rng: np.random.Generator, seeds: Seeds, folder: Path, kind: str = kind
        ) -> Invocation:
            path = _hostile_path(kind, folder, rng, ".tflite")
            argv = ["quantize", str(seeds.keras), "--data", str(seeds.data_npz)]
            argv += ["--calibration-samples", "8", "--out", str(path)]
            force = rng.random() < 0.5
            argv += ["--force"] if force else []
            inputs = (*_seed_inputs(seeds), *_path_inputs(path, folder))
            if force and kind == "dangling_symlink":  # --force replaces a link: documented
                return Invocation("quantize", tuple(argv), _seed_inputs(seeds), None, False)
            return Invocation("quantize", tuple(argv), inputs, None, True)

        @invocation(f"report.hostile.{kind}")
        def report_case(
            rng: np.random.Generator, seeds: Seeds, folder: Path, kind: str = kind
        ) -> Invocation:
            path = _hostile_path(kind, folder, rng, "")
            argv = ("benchmark", str(seeds.tflite_int8), *FAST_BENCHMARK, "--report", str(path))
            inputs = (*_seed_inputs(seeds), *_path_inputs(path, folder))
            # An existing folder is where a report may go; the run may write beside its file.
            if kind == "directory":
                inputs = _seed_inputs(seeds)
            return Invocation("benchmark", argv, inputs, None, kind != "directory")

        del out_case, report_case


_register_outputs()


# --- compress --replay: JSON a reader must refuse without recursing ----------------------


def _chosen(technique: str, recipe: object) -> str:
    return json.dumps({"attempts": [], "chosen": _attempt(technique, recipe)})


def _extreme_report(rng: np.random.Generator) -> str:
    digits = "9" * int(rng.integers(5_000, 6_000))
    depth = int(rng.integers(100_000, 120_000))
    int8 = {"name": "int8"}
    choices = [
        '{"attempts": [], "chosen": ' + "[" * depth + "]" * depth + "}",
        '{"attempts": [], "chosen": ' + '{"a": ' * depth + "1" + "}" * depth + "}",
        "[" * depth + "]" * depth,
        '{"attempts": [], "chosen": {"index": ' + digits + "}}",
        '{"attempts": [], "chosen": {"index": 1.' + digits + "}}",
        '{"attempts": [], "chosen": {"index": 1e' + digits + "}}",
        _chosen("qat", {"epochs": 1}).replace('"epochs": 1', '"epochs": ' + digits),
        _chosen("ptq", {"recipe": int8, "methods": [{}]}),
        _chosen("ptq", {"recipe": {**int8, "methods": [{}]}}),
        _chosen("ptq", {"recipe": {**int8, "methods": {}}}),
        _chosen("ptq", {"recipe": {**int8, "static_batch": 2**64}}),
        _chosen("ptq", {"recipe": {**int8, "static_batch": -1}}),
        _chosen("qat", {"epochs": 1, "batch_size": 2**64}),
        _chosen("ptq", {"recipe": int8, "seed": 2**64}),
        '{"attempts": [], "chosen": {"index": NaN}}',
        '{"attempts": [], "chosen": {"index": Infinity}}',
        '{"attempts": [], "chosen": "' + "\\ud800" * 1000 + '"}',
        '{"attempts": [], "chosen": null, "chosen": 1}',
    ]
    return choices[int(rng.integers(0, len(choices)))]


@invocation("replay.extreme_json")
def _extreme_json(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    report = folder / "compress.json"
    report.write_text(_extreme_report(rng))
    out = folder / "out.tflite"
    argv = ["compress", str(seeds.keras), "--data", str(seeds.data_npz), "--replay", str(report)]
    inputs = (*_seed_inputs(seeds), str(report))
    return Invocation("compress", (*argv, "--out", str(out)), inputs, str(out), True)
