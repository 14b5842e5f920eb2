"""Accuracy-drop gates for tests and CI, and the pytest plugin that runs them.

Importing this package imports no TensorFlow; models load only when a gate runs.

Example:
    >>> from tfcompress.testing import assert_accuracy_drop
    >>> assert_accuracy_drop(model, "int8.tflite", "test.npz", max_drop=0.01)  # doctest: +SKIP
"""

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
