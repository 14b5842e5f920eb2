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

import importlib
from typing import TYPE_CHECKING, Any

# public name -> module that defines it
_LAZY = {
    "AccuracyGateError": "tfcompress.testing.gates",
    "assert_accuracy_drop": "tfcompress.testing.gates",
    "check_accuracy_drop": "tfcompress.testing.gates",
    "judge_outputs": "tfcompress.testing.gates",
    "Check": "tfcompress.testing.judge",
    "GateConfig": "tfcompress.testing.config",
    "build_checks": "tfcompress.testing.judge",
    "judge_outputs_by_name": "tfcompress.testing.judge",
    "GateError": "tfcompress.testing.output_gates",
    "assert_gate": "tfcompress.testing.output_gates",
    "check_gate": "tfcompress.testing.output_gates",
    "ClassChange": "tfcompress.testing.report",
    "GateReport": "tfcompress.testing.report",
    "Verdict": "tfcompress.testing.report",
    "GATE_MODES": "tfcompress.testing.settings",
    "GateSettings": "tfcompress.testing.settings",
    "PairedDifference": "tfcompress.testing.stats",
    "bootstrap_interval": "tfcompress.testing.stats",
    "clopper_pearson": "tfcompress.testing.stats",
    "mcnemar_exact": "tfcompress.testing.stats",
    "paired_difference": "tfcompress.testing.stats",
}

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


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tfcompress.testing' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
