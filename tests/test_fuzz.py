"""A seeded fuzz campaign over the CLI: every hostile input ends in exit 0 or one clean error.

The campaign lives in ``fuzzing/`` (beside the package, not installed with it). This is its
short share: every fast strategy a few times; `benchmarks/fuzz.py` runs the long campaign
(>= 2,000 cases, the slow strategies too: hostile compilers, resumed selections) and records
its totals.
"""

from __future__ import annotations

import pytest

from fuzzing import all_strategies, run_campaign
from fuzzing.cases import ENTRY_POINTS

SEED = 20261123
CASES = len(all_strategies(include_slow=False))  # every fast strategy once: about a minute


@pytest.mark.slow
def test_fuzz_campaign_keeps_the_untrusted_input_contract(tmp_path):
    result = run_campaign(tmp_path / "fuzz", cases=CASES, seed=SEED, include_slow=False)
    assert len(result.outcomes) == CASES
    assert {o.case.strategy for o in result.outcomes} == set(all_strategies(include_slow=False))
    assert {o.case.entry for o in result.outcomes} == set(ENTRY_POINTS)
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
