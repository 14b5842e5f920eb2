"""Gates for tests and CI, and the pytest plugin that runs them.

:func:`check_gate`/:func:`assert_gate` judge every output of a model (task metrics against
labels, fidelity to the reference without them); :func:`check_accuracy_drop`/
:func:`assert_accuracy_drop` are the single-output classifier gate.

Importing this package imports no TensorFlow and, since pytest imports the plugin module
inside it on every run, nothing heavy at all: the names below load on first use (PEP 562).

Example:
    >>> from tfcompress.testing import assert_gate
    >>> assert_gate(model, "int8.tflite", "test.npz", max_drop=0.01)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfcompress._lazy import lazy_exports

__all__ = [
    "GATE_MODES",
    "AccuracyGateError",
    "Check",
    "ClassChange",
    "GateConfig",
    "GateError",
    "GateReport",
    "GateSettings",
    "PairedDifference",
    "Verdict",
    "assert_accuracy_drop",
    "assert_gate",
    "bootstrap_interval",
    "build_checks",
    "check_accuracy_drop",
    "check_gate",
    "clopper_pearson",
    "judge_outputs",
    "judge_outputs_by_name",
    "mcnemar_exact",
    "paired_difference",
]
__getattr__, __dir__ = lazy_exports(__name__)

if TYPE_CHECKING:
    from tfcompress.testing.config import GateConfig
    from tfcompress.testing.gates import (
        AccuracyGateError,
        assert_accuracy_drop,
        check_accuracy_drop,
        judge_outputs,
    )
    from tfcompress.testing.judge import Check, build_checks, judge_outputs_by_name
    from tfcompress.testing.output_gates import GateError, assert_gate, check_gate
    from tfcompress.testing.report import ClassChange, GateReport, Verdict
    from tfcompress.testing.settings import GATE_MODES, GateSettings
    from tfcompress.testing.stats import (
        PairedDifference,
        bootstrap_interval,
        clopper_pearson,
        mcnemar_exact,
        paired_difference,
    )
