"""Run a seeded fuzz campaign against the CLI and judge every case by the input contract.

The contract, for every input a stranger can hand tfcompress: exit 0 (it was fine), 1 only
for a gate that failed, or 2 with exactly one stderr line ``tfcompress CMD: error: ...``; never
a traceback, a signal, a hang, an internal error (exit 3), an output left behind by a failed
run, a changed input, or code from the file run without ``--unsafe``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fuzzing.cases import ENTRY_POINTS, Case, all_strategies, make_case, strategy_class
from fuzzing.invocations import SERVERS, SLOW
from fuzzing.processes import run_process
from fuzzing.seeds import Seeds, build_seeds

SLOW_TIMEOUT_FACTOR = 5  # slow strategies (compiles, selections) get 5x the case time limit
#: Characters an error line may have: a quoted value is cut past 1,000 (docs/security.md).
MAX_LINE = 4_500


@dataclass(frozen=True)
class Outcome:
    """What one case did, and which promises it broke (``violations``, empty when none)."""

    case: Case
    exit_code: int | None
    signal: str | None
    hung: bool
    stderr: str
    seconds: float
    violations: tuple[str, ...]

    @property
    def clean_error(self) -> bool:
        """A refusal that kept the contract: exit 2, or pytest's usage error (4)."""
        refused = self.exit_code == 2 or (self.case.entry == "pytest" and self.exit_code == 4)
        return refused and not self.violations

    @property
    def interrupted(self) -> bool:
        """Stopped by the case's signal, and it kept the contract (128+N, one line)."""
        return self.exit_code is not None and self.exit_code >= 128 and not self.violations


@dataclass(frozen=True)
class CampaignResult:
    """Every case's outcome, with totals per entry point."""

    seed: int
    outcomes: tuple[Outcome, ...]
    seconds: float

    @property
    def violations(self) -> list[Outcome]:
        """The cases that broke the contract."""
        return [o for o in self.outcomes if o.violations]

    def totals(self) -> dict[str, dict[str, int]]:
        """Per entry point that ran: cases, clean errors (exit 2), successes, crashes..."""
        totals = self._count(lambda outcome: outcome.case.entry)
        return {entry: totals[entry] for entry in ENTRY_POINTS if entry in totals}

    def totals_by_class(self) -> dict[str, dict[str, int]]:
        """The same counts per strategy class (``on`` for ``on.tls_files``), by name."""
        totals = self._count(lambda outcome: strategy_class(outcome.case.strategy))
        return dict(sorted(totals.items()))

    def _count(self, key: Any) -> dict[str, dict[str, int]]:
        table: dict[str, Counter[str]] = {}
        for outcome in self.outcomes:
            row = table.setdefault(key(outcome), Counter())
            row["cases"] += 1
            row["clean_errors"] += outcome.clean_error
            row["interrupted"] += outcome.interrupted
            row["accepted"] += outcome.exit_code == 0 and not outcome.violations
            row["gate_failed"] += outcome.exit_code == 1 and not outcome.violations
            row["crashes"] += outcome.signal is not None
            row["hangs"] += outcome.hung
            row["violations"] += bool(outcome.violations)
        return {name: dict(counts) for name, counts in table.items()}

    def to_dict(self) -> dict[str, Any]:
        """Plain data for a JSON record."""
        return {
            "seed": self.seed,
            "cases": len(self.outcomes),
            "seconds": round(self.seconds, 1),
            "strategies": dict(Counter(o.case.strategy for o in self.outcomes)),
            "totals": self.totals(),
            "classes": self.totals_by_class(),
            "violations": [
                {**asdict(o.case), "violations": list(o.violations), "stderr": o.stderr[-2000:]}
                for o in self.violations
            ],
        }


def run_campaign(
    root: Path,
    *,
    cases: int,
    seed: int = 0,
    case_timeout_s: float = 120.0,
    include_slow: bool = True,
    strategies: Sequence[str] = (),
    classes: Sequence[str] = (),
) -> CampaignResult:
    """Build seeds in ``root``, run ``cases`` mutated invocations, judge each one.

    Strategies are used in turn (every one at least once when ``cases`` allows), each with
    its own random draw from the seeded generator, so a campaign is reproducible.

    Args:
        root: An empty work folder (seeds, one folder per case; passing cases are removed).
        cases: How many invocations to run.
        seed: Seeds the generator of mutations and the seed models.
        case_timeout_s: A case running longer than this is a hang (5x that for the slow
            strategies, which compile or train).
        include_slow: Also run the strategies that compile or select (see
            :func:`~fuzzing.cases.all_strategies`).
        strategies: Only these strategies (to replay a finding); default all.
        classes: Only the strategies of these classes (``on``, ``mcu``; ``round4`` for all of
            round 4's; see :func:`~fuzzing.cases.all_strategies`); default all.

    Returns:
        The outcomes.

    Example:
        >>> result = run_campaign(Path("/tmp/fuzz"), cases=200)  # doctest: +SKIP
        >>> assert not result.violations
    """
    start = time.perf_counter()
    (root / "seeds").mkdir(parents=True, exist_ok=True)
    seeds = build_seeds(root / "seeds", seed=seed)
    rng = np.random.default_rng(seed)
    names = list(strategies) or all_strategies(include_slow=include_slow, classes=classes)
    outcomes: list[Outcome] = []
    worker = _Worker(root / "worker.log")
    try:
        for index in range(cases):
            case = make_case(index, names[index % len(names)], seeds, root / "cases", rng)
            # A selection trains and converts models: minutes on a loaded machine, not a hang.
            slow = case.strategy in SLOW
            timeout = case_timeout_s * (SLOW_TIMEOUT_FACTOR if slow else 1)
            outcomes.append(_run_one(case, seeds, worker, timeout))
            if not outcomes[-1].violations:
                _remove(Path(case.folder))
    finally:
        worker.close()
        SERVERS.close()
    return CampaignResult(seed, tuple(outcomes), time.perf_counter() - start)


def _run_one(case: Case, seeds: Seeds, worker: _Worker, timeout: float) -> Outcome:
    before = {path: _fingerprint(Path(path)) for path in case.inputs}
    seeds.marker.unlink(missing_ok=True)
    reply = run_process(case, timeout) if case.own_process else worker.run(case, timeout)
    violations: list[str] = []
    code = reply.get("exit_code")
    stderr = str(reply.get("stderr", ""))
    if reply.get("signal"):
        violations.append(f"crashed with {reply['signal']}")
    if reply.get("hung"):
        violations.append(f"hung (no answer in {timeout:.0f} s)")
    if code is not None:
        violations += _judge_exit(case, int(code), stderr)
    if code == 0 and case.compiles:
        violations += _judge_c(Path(case.compiles))
    seconds = float(reply.get("seconds", timeout))
    if case.within_s is not None and seconds > case.within_s:
        violations.append(f"took {seconds:.1f} s (at most {case.within_s:g} s: a linear parse)")
    if seeds.marker.exists():
        violations.append("code from the file ran without --unsafe")
    changed = [p for p, print_ in before.items() if _fingerprint(Path(p)) != print_]
    violations += [f"input changed: {p}" for p in changed]
    if code not in (0, None) and case.output:
        output = Path(case.output)
        compiled = output.with_name(f"{output.stem}_edgetpu{output.suffix}")
        left = [str(p) for p in (output, compiled) if os.path.lexists(p)]
        violations += [f"a failed run left {p}" for p in left]
    violations += [f"left process {pid} running" for pid in _stray_processes(Path(case.folder))]
    violations += [f"left process {pid} running" for pid in reply.get("left_processes", ())]
    violations += [f"left in its TMPDIR: {name}" for name in reply.get("left_temp", ())]
    leftovers = [p.name for p in Path(case.folder).glob(".tfcompress-*")]
    violations += [f"temporary file left: {name}" for name in leftovers]
    return Outcome(
        case=case,
        exit_code=None if code is None else int(code),
        signal=reply.get("signal"),
        hung=bool(reply.get("hung")),
        stderr=stderr,
        seconds=seconds,
        violations=tuple(violations),
    )


_LOG_RECORD = re.compile(r"^(DEBUG|INFO|WARNING) tfcompress(\.[\w.]+)?: ")


def _stray_processes(folder: Path) -> list[int]:
    """Processes a compiler stand-in recorded (``*.pid``) that are still alive; killed."""
    stray = []
    for record in folder.glob("*.pid"):
        try:
            pid = int(record.read_text())
            with open(f"/proc/{pid}/stat") as handle:
                alive = handle.read().split(") ", 1)[1][0] != "Z"
        except (OSError, ValueError, IndexError):
            continue
        if alive:
            stray.append(pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return stray


def _remove(folder: Path) -> None:
    """Remove a passed case's folder, read-only subfolders included."""
    for path in folder.rglob("*"):
        if path.is_dir() and not path.is_symlink():
            with contextlib.suppress(OSError):
                path.chmod(0o755)
    shutil.rmtree(folder, ignore_errors=True)


_INTERRUPTED = re.compile(r"^tfcompress: interrupted \((SIGINT|SIGTERM|SIGHUP)\); ")


def _judge_exit(case: Case, code: int, stderr: str) -> list[str]:
    problems = []
    # 1 is "a check the user asked for failed": a gate, or a selection's budgets.
    allowed = {0, 2} | ({1} if case.entry in {"gate", "select"} else set())
    if case.exit_codes is not None:  # an interrupt's 128+N, pytest's usage error
        allowed = set(case.exit_codes)
    if code not in allowed:
        problems.append(f"exit code {code} (allowed: {', '.join(map(str, sorted(allowed)))})")
    if case.must_fail and code != 2:
        problems.append(f"accepted an input every correct run must refuse (exit {code})")
    if "Traceback" in stderr:
        problems.append("printed a traceback")
    if case.runner == "pytest":
        if "INTERNALERROR" in stderr:
            problems.append("pytest reported an INTERNALERROR")
        return problems
    # tfcompress's own log records (progress of work done before a late failure) may come
    # first; then exactly one error line, and nothing after it.
    lines = [line for line in stderr.splitlines() if line.strip() and not _LOG_RECORD.match(line)]
    if code >= 128:  # stopped by a signal: its one line, after progress logs only
        if len(lines) != 1 or not _INTERRUPTED.match(lines[0]):
            problems.append(f"exit {code} without exactly one 'interrupted' line ({len(lines)})")
        return problems
    if code == 2:
        prefix = f"tfcompress {case.entry}: error: "
        last = stderr.strip().splitlines()[-1:] if stderr.strip() else []
        if len(lines) != 1 or not lines[0].startswith(prefix) or last != lines:
            problems.append(f"exit 2 without exactly one '{prefix}' line ({len(lines)} lines)")
    longest = max((len(line) for line in stderr.splitlines()), default=0)
    if longest > MAX_LINE:
        problems.append(f"a stderr line of {longest:,} characters (a value echoed unbounded)")
    return problems


def _judge_c(out: Path) -> list[str]:
    """``export-c``'s files after exit 0: both there, and the source compiles as C++11."""
    source, header = out.with_name(out.name + ".cc"), out.with_name(out.name + ".h")
    missing = [str(p) for p in (source, header) if not p.is_file()]
    if missing:
        return [f"exit 0 without {', '.join(missing)}"]
    compiler = shutil.which("g++")
    if compiler is None:
        return []
    done = subprocess.run(
        [compiler, "-std=c++11", "-fsyntax-only", "-Wall", "-Werror", "-x", "c++", str(source)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode:
        said = " ".join(done.stderr.split())[:300]
        return [f"wrote C++ that does not compile ({said})"]
    if "\n" in out.name and any(
        part and part in source.read_text() + header.read_text()
        for part in out.name.split("\n")[1:]
    ):
        return ["wrote lines of --out into the C++ source"]
    return []


def _fingerprint(path: Path) -> str:
    """A digest of what a path holds, without ever reading a pipe or a device."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return "missing"
    except OSError as error:  # a name too long, a link loop on the way: nothing was there
        return f"unreachable:{error.errno}"
    if stat.S_ISLNK(info.st_mode):
        return f"link:{os.readlink(path)}"
    if stat.S_ISDIR(info.st_mode):
        parts = [f"{p.relative_to(path)}={_fingerprint(p)}" for p in sorted(path.rglob("*"))]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()
    if not stat.S_ISREG(info.st_mode):
        return f"special:{stat.S_IFMT(info.st_mode)}"
    return hashlib.sha256(path.read_bytes()).hexdigest()


class _Worker:
    """A ``fuzzing.worker`` process, restarted after a crash or a hang."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None
        self.results: Any = None

    def _start(self) -> None:
        read_fd, write_fd = os.pipe()
        with self.log.open("ab") as log:
            root = str(Path(__file__).resolve().parents[1])
            path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
            env = {
                **os.environ,
                "PYTHONPATH": path,  # fuzzing/ is beside the package, not installed
            }
            self.process = subprocess.Popen(
                [sys.executable, "-m", "fuzzing.worker", str(write_fd)],
                env=env,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=log,
                pass_fds=(write_fd,),
                start_new_session=True,  # a hang is killed with all its children
            )
        os.close(write_fd)
        self.results = os.fdopen(read_fd, "r")
        ready = self._read(600.0)
        if ready is None or not ready.get("ready"):
            raise RuntimeError(f"the fuzz worker did not start; see {self.log}")

    def _read(self, timeout: float) -> dict[str, Any] | None:
        readable, _, _ = select.select([self.results], [], [], timeout)
        if not readable:
            return None
        line = self.results.readline()
        return json.loads(line) if line else {}

    def run(self, case: Case, timeout: float) -> dict[str, Any]:
        if self.process is None:
            self._start()
        process = self.process
        if process is None or process.stdin is None:
            raise RuntimeError("the fuzz worker is not running")
        try:
            process.stdin.write((json.dumps(asdict(case)) + "\n").encode())
            process.stdin.flush()
        except BrokenPipeError:
            pass  # it died between cases; the read below reports how
        reply = self._read(timeout)
        if reply:
            return reply
        if reply is None:
            self.close()
            return {"hung": True}
        code = process.wait()
        self.close()
        name = signal.Signals(-code).name if code < 0 else f"exit {code}"
        return {"signal": name}

    def close(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            if self.process.stdin is not None:
                with contextlib.suppress(BrokenPipeError):
                    self.process.stdin.close()
            self.results.close()
        self.process = None
