"""The gate flags shared by ``gate``, ``quantize``, ``qat``, ``prune`` and ``cluster``.

One definition, so ``--max-drop`` or ``--min-snr`` means the same wherever it appears; the
commands that compress a model judge their artifact with the same check as
``tfcompress gate`` (and the pytest plugin) on the same data.
"""

from __future__ import annotations

import argparse
from typing import Any

from tfcompress.bench.thresholds import threshold_names, thresholds
from tfcompress.cli._choices import GATE_MODES, METRICS
from tfcompress.cli.common import csv_of


def add_gate_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--output``, ``--metric``, the thresholds and ``--mode`` to ``parser``.

    Every flag defaults to None: the gate's config owns the defaults (``mode`` strict) and
    checks every value (a threshold by the threshold table: one message, any way in).
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
        help=f"{'|'.join(METRICS)}, comma list or repeated (default: chosen per output "
        "from its shape and the data)",
    )
    for row in thresholds():  # one flag per threshold: --max-drop, --min-snr...
        parser.add_argument(row.flag, type=float, metavar=row.metavar, help=row.help)
    parser.add_argument(
        "--mode",
        choices=GATE_MODES,
        help="strict: the measured value decides; tolerant: fail only when the interval says "
        "so; proven: pass only when the whole interval is within (default strict)",
    )


def gate_requested(args: argparse.Namespace) -> bool:
    """Whether any threshold was given (the optional gate of the compressing commands)."""
    return any(getattr(args, name, None) is not None for name in threshold_names())


def gate_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--output``, ``--metric``, the thresholds and ``--mode`` as a gate config's keywords.

    None where not given: the config keeps its default (``GateConfig.from_options``).
    """
    return {
        "outputs": flat(args.output) or None,
        "metrics": flat(args.metric) or None,
        "mode": args.mode,
        **{name: getattr(args, name, None) for name in threshold_names()},
    }


def flat(values: list[list[str]] | None) -> list[str]:
    """Values of a repeated comma-list flag, in order."""
    return [value for group in values or [] for value in group]
