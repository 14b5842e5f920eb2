"""A seeded fuzz campaign that holds tfcompress to its contract for untrusted input.

Mutated models (``.tflite``, ``.keras``, ``.h5``, SavedModel), data files, special files,
hostile outputs and impossible options go through the real CLI (``inspect``, ``benchmark``,
``quantize``, ``gate``); each case must end in a clean success or one clear error line with
exit code 2, with no crash, hang, traceback, leftover output, changed input or code run.
Cases that set ``TFCOMPRESS_*`` limits, send SIGTERM/SIGHUP/SIGINT mid-run (exit 128+N, one
line) or run the pytest plugin (usage error, exit 4) get a process, session and TMPDIR of
their own (:mod:`fuzzing.processes`).
The test suite runs a short campaign; ``benchmarks/fuzz.py`` a long one.

Example:
    >>> from fuzzing import run_campaign
    >>> result = run_campaign(Path("/tmp/fuzz"), cases=200, seed=0)  # doctest: +SKIP
    >>> result.violations  # doctest: +SKIP
    []
"""

from fuzzing.campaign import CampaignResult, Outcome, run_campaign
from fuzzing.cases import Case, all_strategies

__all__ = ["CampaignResult", "Case", "Outcome", "all_strategies", "run_campaign"]
