"""Accuracy-drop gates for tests and CI, and the pytest plugin that runs them.

Importing this package imports no TensorFlow and, since pytest imports the plugin module
inside it on every run, nothing heavy at all: the names below load on first use (PEP 562).

Example:
    >>> from tfcompress.testing import assert_accuracy_drop
    >>> assert_accuracy_drop(model, "int8.tflite", "test.npz", max_drop=0.01)  # doctest: +SKIP
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
    "ClassChange": "tfcompress.testing.result",
    "GateResult": "tfcompress.testing.result",
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
    "ClassChange",
    "GateResult",
    "GateSettings",
    "PairedDifference",
    "assert_accuracy_drop",
    "bootstrap_interval",
    "check_accuracy_drop",
    "clopper_pearson",
    "judge_outputs",
    "mcnemar_exact",
    "paired_difference",
]

if TYPE_CHECKING:
    from tfcompress.testing.gates import (
        AccuracyGateError,
        assert_accuracy_drop,
        check_accuracy_drop,
        judge_outputs,
    )
    from tfcompress.testing.result import ClassChange, GateResult
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
