"""The gate flags shared by ``gate``, ``quantize``, ``qat``, ``prune`` and ``cluster``.

One definition, so ``--max-drop`` or ``--min-snr`` means the same wherever it appears; the
commands that compress a model judge their artifact with the same check as
``tfcompress gate`` (and the pytest plugin) on the same data.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from tfcompress.cli.common import csv_of
from tfcompress.testing.settings import GATE_MODES

THRESHOLDS = ("max_drop", "min_snr", "min_cosine", "max_abs", "min_agreement")


def add_gate_options(parser: argparse.ArgumentParser, *, default_mode: str | None) -> None:
    """Add ``--output``, ``--metric``, the thresholds and ``--mode`` to ``parser``.

    Args:
        parser: The subcommand's parser.
        default_mode: ``"strict"`` for ``tfcompress gate``; None where the gate is optional
            (``--mode`` alone is then refused).
    """
    parser.add_argument(
        "--output",
        action="append",
        type=csv_of(str, "--output"),
        metavar="NAME",
        help="output(s) to judge, comma list or repeated (default: every output)",
    )
    parser.add_argument(
        "--metric",
        action="append",
        type=csv_of(str, "--metric"),
        metavar="NAME",
        help="accuracy|topK|binary_accuracy|mse|mae|rmse|miou|snr|cosine|max_abs|agreement, "
        "comma list or repeated (default: chosen per output from its shape and the data)",
    )
    parser.add_argument(
        "--max-drop",
        type=_non_negative,
        metavar="X",
        help="allowed worsening of task metrics in their unit: a fraction for accuracy-like "
        "ones (0.01 = one point, their default), e.g. 0.001 for mse",
    )
    parser.add_argument("--min-snr", type=_finite, metavar="DB", help="smallest SNR (default 20)")
    parser.add_argument(
        "--min-cosine", type=_finite, metavar="C", help="smallest cosine similarity (default 0.99)"
    )
    parser.add_argument(
        "--max-abs", type=_non_negative, metavar="E", help="largest absolute difference"
    )
    parser.add_argument(
        "--min-agreement", type=_finite, metavar="A", help="smallest top-1 agreement (0.99)"
    )
    parser.add_argument(
        "--mode",
        choices=GATE_MODES,
        default=default_mode,
        help="strict: the measured value decides; tolerant: fail only when the interval says "
        "so; proven: pass only when the whole interval is within (default strict)",
    )


def gate_requested(args: argparse.Namespace) -> bool:
    """Whether any threshold was given (the optional gate of the compressing commands)."""
    return any(getattr(args, name) is not None for name in THRESHOLDS)


def threshold_options(args: argparse.Namespace) -> dict[str, Any]:
    """The threshold flags as keyword options of :func:`tfcompress.testing.check_gate`."""
    return {name: getattr(args, name) for name in THRESHOLDS}


def flat(values: list[list[str]] | None) -> list[str]:
    """Values of a repeated comma-list flag, in order."""
    return [value for group in values or [] for value in group]


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from error
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def _non_negative(text: str) -> float:
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value
