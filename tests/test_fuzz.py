"""A seeded fuzz campaign over the CLI: every hostile input ends in exit 0 or one clean error.

The campaign lives in ``fuzzing/`` (beside the package, not installed with it). This is its
short share: every fast strategy of rounds 1-3 once; `benchmarks/fuzz.py` runs the long
campaign (the slow strategies too: hostile compilers, resumed selections) and records its
totals, and `--classes round4` every case class of round 4. Cases that set `TFCOMPRESS_*`
limits, send SIGTERM/SIGHUP/SIGINT or run the pytest plugin get a process of their own
(fuzzing/processes.py).
"""

from __future__ import annotations

import shutil

import pytest

from fuzzing import all_strategies, run_campaign
from fuzzing.campaign import MAX_LINE, _judge_c, _judge_exit
from fuzzing.cases import ENTRY_POINTS, Case
from tfcompress._files import check_output_path
from tfcompress._limits import CHILD_MEMORY
from tfcompress.errors import InvalidInputError, OutputLocationError

SEED = 20261123
# Every fast strategy of rounds 1-3 once: about a minute. Round 4's classes run in
# benchmarks/fuzz.py --classes round4; their reproducers are tests of their own
# (test_device_connection.py, test_untrusted_mcu.py, test_export_c.py, test_compress_replay.py).
STRATEGIES = all_strategies(include_slow=False)
CASES = len(STRATEGIES)


@pytest.mark.slow
def test_fuzz_campaign_keeps_the_untrusted_input_contract(tmp_path):
    result = run_campaign(tmp_path / "fuzz", cases=CASES, seed=SEED, strategies=STRATEGIES)
    assert len(result.outcomes) == CASES
    assert {o.case.strategy for o in result.outcomes} == set(STRATEGIES)
    entries = {o.case.entry for o in result.outcomes}
    assert set(ENTRY_POINTS) - {"mcu", "export-c"} <= entries <= set(ENTRY_POINTS)
    report = "\n".join(
        f"case {o.case.index} {o.case.strategy} via {o.case.entry}: {'; '.join(o.violations)}"
        f" | argv {' '.join(o.case.argv)} | stderr {o.stderr.strip()[-400:]}"
        for o in result.violations
    )
    assert not result.violations, report
    totals = result.totals()
    assert sum(row["crashes"] + row["hangs"] for row in totals.values()) == 0
    # The campaign is not vacuous: most mutants are refused, and some are fine.
    assert sum(row["clean_errors"] for row in totals.values()) > CASES // 2
    assert sum(row["accepted"] for row in totals.values()) > 0


def _case(**fields) -> Case:
    base = {"index": 0, "entry": "quantize", "strategy": "s", "argv": (), "inputs": ()}
    return Case(**{**base, "output": None, "must_fail": False, "folder": "/nonexistent", **fields})


def test_the_judge_accepts_128_plus_n_for_signal_cases_only():
    line = "tfcompress: interrupted (SIGTERM); nothing partial was left behind\n"
    signalled = _case(runner="process", interrupt=("SIGTERM", 1.0), exit_codes=(0, 143))
    assert _judge_exit(signalled, 143, line) == []
    assert _judge_exit(signalled, 143, line + line)  # one line, not two
    assert _judge_exit(signalled, 130, line)  # another signal's code
    assert _judge_exit(_case(), 143, line)  # a case no one signalled


def test_a_line_that_echoes_a_value_unbounded_is_a_violation():
    line = "tfcompress benchmark: error: --on 'tcp://" + "h" * MAX_LINE + "' is not HOST:PORT\n"
    assert _judge_exit(_case(entry="benchmark"), 2, line) == [
        f"a stderr line of {len(line) - 1:,} characters (a value echoed unbounded)"
    ]
    assert _judge_exit(_case(entry="benchmark"), 2, line[:900] + "\n") == []


def test_export_c_output_must_compile_and_hold_nothing_of_out(tmp_path):
    if shutil.which("g++") is None:
        pytest.skip("no g++ to compile with")
    out = tmp_path / "m"
    out.with_suffix(".h").write_text("extern const unsigned char m[];\n")
    out.with_suffix(".cc").write_text('#include "m.h"\nconst unsigned char m[] = {1};\n')
    assert _judge_c(out) == []
    out.with_suffix(".cc").write_text('#include "m.h"\nconst unsigned char while[] = {1};\n')
    assert _judge_c(out)[0].startswith("wrote C++ that does not compile")
    out.with_suffix(".h").unlink()
    assert _judge_c(out) == [f"exit 0 without {out}.h"]


def test_pytest_cases_are_judged_by_their_exit_code_and_internal_errors():
    usage = _case(entry="pytest", runner="pytest", exit_codes=(4,))
    assert _judge_exit(usage, 4, "ERROR: --tfc-backend: unknown backend\n") == []
    assert _judge_exit(usage, 1, "1 failed\n")
    assert _judge_exit(usage, 4, "INTERNALERROR> Traceback\n")


# Reproducers of what the fuzz strategies found (each was exit 3).


def test_a_memory_limit_of_1e308_is_a_usage_error(monkeypatch):
    # env.memory_limit: it passed the check and overflowed setrlimit in the child.
    monkeypatch.setenv("TFCOMPRESS_MEMORY_LIMIT", "1e308")
    with pytest.raises(InvalidInputError, match="at most 1 EiB"):
        CHILD_MEMORY.value()


def test_an_output_folder_past_path_max_is_one_location_error(tmp_path):
    # out.hostile.long_path: Path.is_dir raised ENAMETOOLONG.
    path = tmp_path.joinpath(*["d" * 200] * 30, "out.tflite")
    with pytest.raises(OutputLocationError, match="choose a shorter path"):
        check_output_path(path)
