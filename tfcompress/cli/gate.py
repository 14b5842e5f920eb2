"""``tfcompress gate REF CAND --eval E.npz [--output NAME] [--metric M] [--max-drop X ...]``.

One verdict per (output, metric); exit 1 when one fails.
"""

from __future__ import annotations

import argparse
import logging
from typing import IO, Any

from tfcompress.cli._choices import BACKENDS
from tfcompress.cli._devices import add_on_flags, connect_on
from tfcompress.cli._gating import add_gate_options, flat, threshold_options
from tfcompress.cli._options import add_config_flags
from tfcompress.cli.common import (
    add_custom_objects_flag,
    add_feeding_flags,
    add_json_flag,
    add_timeout_flag,
    add_unsafe_flag,
    emit_json,
    registered_backend,
)

logger = logging.getLogger(__name__)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        "gate",
        help="fail (exit 1) when a compressed model lost more than allowed, output by output",
        description="Run REFERENCE and CANDIDATE on the same samples (the candidate through "
        "--backend), match their outputs by name and judge one verdict per (output, metric): "
        "task metrics against labels (y, or y_<output> per output) on the paired drop, "
        "fidelity metrics (snr, cosine, max_abs, agreement) against the reference, no labels "
        "needed. Without --metric each output gets a metric chosen from its shape and the "
        "data, and the table says why. Exit 0 pass, 1 fail, 2 bad input or unavailable "
        "backend.",
    )
    parser.add_argument("reference", help="model to match: .keras, .h5, SavedModel, .tflite, .onnx")
    parser.add_argument("candidate", help="deployed artifact, usually a .tflite")
    parser.add_argument(
        "--eval",
        dest="eval_data",
        required=True,
        help="samples to score both models on: .npz with x (or one array per input name) and "
        "optional labels y (or y_<output name>)",
    )
    add_gate_options(parser)
    parser.add_argument(
        "--backend",
        type=registered_backend,  # built-ins and backends a program registered
        metavar="{" + ",".join(BACKENDS) + "}",
        help="runtime of a .tflite candidate (default cpu)",
    )
    add_config_flags(parser, "testing.settings", "GateSettings", "confidence", "interval")
    # An integer here; GateConfig checks its range (one message, whichever way it came in).
    parser.add_argument("--threads", type=int, help="LiteRT CPU threads (default 1)")
    add_feeding_flags(parser)
    add_unsafe_flag(parser)
    add_custom_objects_flag(parser)
    add_timeout_flag(parser)
    add_on_flags(parser, what="run the candidate")
    parser.add_argument(
        "--device",
        metavar="NAME",
        help="with --on: the worker that runs the candidate (default: each of them in turn, "
        "one verdict table per device; exit 1 when one fails)",
    )
    add_json_flag(parser)
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Build the config, run the gate; print every verdict (table or JSON).

    0 when all pass, 1 when one fails.
    """
    from tfcompress.cli._custom_objects import load_cli_models
    from tfcompress.errors import InvalidInputError
    from tfcompress.testing.config import GateConfig
    from tfcompress.testing.output_gates import check_gate

    if args.device and not args.on:
        raise InvalidInputError("--device names a worker of --on's scheduler; give --on.")
    config = GateConfig.from_options(  # checked before any model is read
        outputs=flat(args.output),
        metrics=flat(args.metric),
        **threshold_options(args),
        mode=args.mode,
        backend=args.backend,
        confidence=args.confidence,
        interval=args.interval,
        threads=args.threads,
        batch_dims=dict(args.batch_dim),
        input_values=dict(args.input_value),
    )
    refused: dict[str, Any] = {}  # a file its runtime crashed, hung or refused on: its row
    reference, candidate = load_cli_models(args, [args.reference, args.candidate], refused)
    if refused:
        return _refused(args, out, refused)
    client = connect_on(args)  # an unreachable scheduler is one line (exit 2) before any work
    try:
        devices: list[str | None] = [None]
        if client is not None:
            from tfcompress.bench.device_gate import device_names

            devices = [args.device] if args.device else list(device_names(client))
        reports = {
            device: check_gate(
                reference,
                candidate,
                args.eval_data,
                config=config,
                on=client,
                device=device,
            )
            for device in devices
        }
    finally:
        if client is not None:
            client.close()
    if args.json:
        if client is None:
            emit_json(out, reports[None].to_dict())
        else:  # one report per device, by name
            emit_json(out, {"devices": {name: r.to_dict() for name, r in reports.items()}})
    else:
        for device, report in reports.items():
            heading = "" if device is None else f"on device {device}:\n"
            out.write(heading + report.explain() + "\n")
    failed = [device for device, report in reports.items() if not report.passed]
    for device, report in reports.items():
        where = "" if device is None else f"on {device}: "
        logger.log(
            logging.ERROR if device in failed else logging.INFO, "%s", where + report.headline()
        )
    return 1 if failed else 0


def _refused(args: argparse.Namespace, out: IO[str], refused: dict[str, Any]) -> int:
    """The row of each file its runtime cannot run (the probe's cause), then its one line.

    Nothing can be judged without both models' outputs: the report says which file failed
    and why, and the command ends as an error (exit 2), never as a failed gate (exit 1).
    """
    from pathlib import Path

    roles = {args.reference: "reference", args.candidate: "candidate"}
    rows = [
        {"role": roles[path], "artifact": Path(path).name, "status": f"error: {error}"}
        for path, error in refused.items()
    ]
    if args.json:
        emit_json(out, {"passed": False, "backend": args.backend, "checks": [], "errors": rows})
    else:
        out.write("gate ERROR: nothing judged\n" + "".join(
            f"{row['role']} {row['artifact']}: {row['status']}\n" for row in rows))  # fmt: skip
    raise next(iter(refused.values()))
