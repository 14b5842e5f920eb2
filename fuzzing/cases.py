"""Turn mutants into CLI invocations of ``inspect``, ``benchmark``, ``quantize`` and ``gate``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fuzzing.invocations import INVOCATIONS, SLOW, load_invocations
from fuzzing.mutations import load_all
from fuzzing.seeds import Seeds

ENTRY_POINTS = (
    "inspect",
    "benchmark",
    "quantize",
    "gate",
    "compress",
    "select",
    "zoo",
    "pytest",  # the gate plugin, through `python -m pytest`
    "mcu",
    "export-c",
)
FAST_BENCHMARK = ("--runs", "1", "--min-seconds", "0", "--warmup-seconds", "0")
# Where each kind of mutant can be fed.
_ENTRIES_BY_ROLE = {
    "tflite": ("inspect", "benchmark", "gate"),
    "onnx": ("inspect", "benchmark", "gate"),
    "model": ("inspect", "quantize", "gate", "benchmark"),
    "data": ("quantize", "benchmark", "gate"),
    "labels": ("benchmark", "gate"),  # quantize ignores labels
}


@dataclass(frozen=True)
class Case:
    """One invocation and what the contract expects of it.

    Attributes:
        index: Position in the campaign.
        entry: The subcommand.
        strategy: The mutation (or output/option abuse) that made the input.
        argv: Arguments for ``tfcompress.cli.main``.
        inputs: Paths that must be byte-identical after the run.
        output: A path that must not exist after a failed run (None when none is written).
        must_fail: Every correct run exits 2.
        folder: The case's own folder (holds the mutant and the would-be output).
        env: Variables set for this run only (see :class:`~fuzzing.invocations.Invocation`).
        runner: ``"cli"`` (in the worker), ``"process"`` or ``"pytest"`` (a process of its own).
        interrupt: ``(signal name, seconds)`` to send it after, or None.
        exit_codes: The allowed exit codes when not the usual ones, or None.
        memory_cap: A process run's data segment limit in bytes, or None.
        compiles: ``export-c``'s ``--out``, whose ``.cc`` must compile after exit 0.
        within_s: Seconds the run must end within, or None.
    """

    index: int
    entry: str
    strategy: str
    argv: tuple[str, ...]
    inputs: tuple[str, ...]
    output: str | None
    must_fail: bool
    folder: str
    env: tuple[tuple[str, str], ...] | None = None
    runner: str = "cli"
    interrupt: tuple[str, float] | None = None
    exit_codes: tuple[int, ...] | None = None
    memory_cap: int | None = None
    compiles: str | None = None
    within_s: float | None = None

    @property
    def own_process(self) -> bool:
        """Whether it runs in a process of its own instead of the fuzz worker."""
        return self.runner != "cli" or self.env is not None or self.interrupt is not None


def _output_abuses(seeds: Seeds, folder: Path, rng: np.random.Generator) -> dict[str, Path]:
    dangling = folder / "link.tflite"
    dangling.symlink_to(folder / "missing.tflite")
    fifo = folder / "fifo.tflite"
    os.mkfifo(fifo)
    return {
        "out.proc": Path("/proc/tfcompress-fuzz.tflite"),
        "out.sys": Path("/sys/tfcompress-fuzz.tflite"),
        "out.long_name": folder / ("m" * int(rng.integers(256, 400)) + ".tflite"),
        "out.dangling_symlink": dangling,
        "out.fifo_with_force": fifo,
        "out.is_input": seeds.keras,
        "out.missing_folder": folder / "no" / "such" / "out.tflite",
    }


OUTPUT_ABUSES = (
    "out.proc",
    "out.sys",
    "out.long_name",
    "out.dangling_symlink",
    "out.fifo_with_force",
    "out.is_input",
    "out.missing_folder",
)
OPTION_ABUSES: dict[str, tuple[str, tuple[str, ...]]] = {
    "option.samples_zero": ("quantize", ("--calibration-samples", "0")),
    "option.unknown_recipe": ("quantize", ("--recipe", "int3")),
    "option.max_drop_range": ("gate", ("--max-drop", "7")),
    "option.confidence_range": ("gate", ("--confidence", "2")),
    "option.threads_zero": ("benchmark", ("--threads", "0")),
    "option.unknown_backend": ("benchmark", ("--backends", "tpu9")),
    "option.batch_huge": ("benchmark", ("--batch", "1000000000000")),
}


def all_strategies(*, include_slow: bool = True, classes: Sequence[str] = ()) -> list[str]:
    """Every strategy name a campaign cycles through, in a stable order.

    Args:
        include_slow: Also the strategies that compile or select (seconds per case), and
            round 4's (:data:`~fuzzing.invocations_round4.ROUND4`); the test suite's short
            campaign leaves them to ``benchmarks/fuzz.py``.
        classes: Only the strategies of these classes (a strategy's class is its name up to
            the first dot: ``on`` for ``on.tls_files``); ``round4`` stands for every strategy
            of round 4 (issue 43), in whichever class. Default: every class.
    """
    from fuzzing.invocations_round4 import ROUND4

    round4 = {name for names in ROUND4.values() for name in names}
    invocations = sorted(
        n for n in load_invocations() if include_slow or (n not in SLOW and n not in round4)
    )
    names = sorted(load_all()) + list(OUTPUT_ABUSES) + sorted(OPTION_ABUSES) + invocations
    if not classes:
        return names
    chosen = round4 if "round4" in classes else set()
    return [n for n in names if n in chosen or strategy_class(n) in classes]


def strategy_class(name: str) -> str:
    """The class of a strategy: its name up to the first dot (``on.tls_files`` -> ``on``)."""
    return name.split(".")[0]


def make_case(index: int, name: str, seeds: Seeds, root: Path, rng: np.random.Generator) -> Case:
    """Build case ``index`` with strategy ``name`` in its own folder under ``root``."""
    folder = root / f"case{index:05d}"
    folder.mkdir(parents=True)
    if name in OUTPUT_ABUSES:
        out = _output_abuses(seeds, folder, rng)[name]
        argv = ["quantize", str(seeds.keras), "--data", str(seeds.data_npz), "--out", str(out)]
        argv += ["--force"] if name in {"out.fifo_with_force", "out.is_input"} else []
        return Case(index, "quantize", name, tuple(argv), _inputs(seeds), None, True, str(folder))
    if name in OPTION_ABUSES:
        entry, extra = OPTION_ABUSES[name]
        argv, output = _argv(entry, seeds, folder, model=None, data=None)
        return Case(index, entry, name, (*argv, *extra), _inputs(seeds), output, True, str(folder))
    if name in load_invocations():
        made = INVOCATIONS[name](rng, seeds, folder)
        return Case(
            index,
            made.entry,
            name,
            made.argv,
            made.inputs,
            made.output,
            made.must_fail,
            str(folder),
            made.env,
            made.runner,
            made.interrupt,
            made.exit_codes,
            made.memory_cap,
            made.compiles,
            made.within_s,
        )
    mutant = load_all()[name](rng, seeds, folder)
    entries = _ENTRIES_BY_ROLE[mutant.role]
    entry = entries[int(rng.integers(0, len(entries)))]
    is_data = mutant.role in {"data", "labels"}
    model = None if is_data else mutant.path
    data = mutant.path if is_data else None
    argv, output = _argv(entry, seeds, folder, model=model, data=data)
    inputs = (*_inputs(seeds), str(mutant.path))
    return Case(index, entry, name, tuple(argv), inputs, output, mutant.must_fail, str(folder))


def _argv(
    entry: str, seeds: Seeds, folder: Path, *, model: Path | None, data: Path | None
) -> tuple[list[str], str | None]:
    data_arg = str(data or seeds.data_npz)
    if entry == "inspect":
        return ["inspect", str(model or seeds.tflite_int8)], None
    if entry == "benchmark":
        argv = ["benchmark", str(model or seeds.tflite_int8), *FAST_BENCHMARK]
        return argv + (["--data", data_arg] if data is not None else []), None
    if entry == "quantize":
        out = folder / "out.tflite"
        argv = ["quantize", str(model or seeds.keras), "--data", data_arg, "--out", str(out)]
        return [*argv, "--calibration-samples", "8"], str(out)
    reference, candidate = str(seeds.keras), str(seeds.tflite_int8)
    if model is not None and model.suffix == ".tflite":
        candidate = str(model)
    elif model is not None:
        reference = str(model)
    return ["gate", reference, candidate, "--eval", data_arg], None


def _inputs(seeds: Seeds) -> tuple[str, ...]:
    return (str(seeds.keras), str(seeds.data_npz), str(seeds.tflite_int8))
