"""``tfcompress gate REF CAND --eval E.npz [--output NAME] [--metric M] [--max-drop X ...]``.

One verdict per (output, metric); exit 1 when one fails.
"""

from __future__ import annotations

import argparse
import logging
from typing import IO, Any

from tfcompress.cli._devices import add_on_flags, connect_on
from tfcompress.cli._gating import add_gate_options, gate_options
from tfcompress.cli._options import add_config_flags, config_values
from tfcompress.cli.common import add_feeding_flags, add_shared_flags, emit_json, feeding_options

logger = logging.getLogger(__name__)

#: The GateSettings fields that are flags made from their declarations.
_SETTINGS = ("testing.settings", "GateSettings", "backend", "confidence", "interval")


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
    add_config_flags(parser, *_SETTINGS)
    # An integer here; GateConfig checks its range (one message, whichever way it came in).
    parser.add_argument("--threads", type=int, help="LiteRT CPU threads (default 1)")
    add_feeding_flags(parser)
    add_shared_flags(parser, "unsafe", "custom_objects", "timeout")
    add_on_flags(parser, what="run the candidate")
    parser.add_argument(
        "--device",
        metavar="NAME",
        help="with --on: the worker that runs the candidate (default: each of them in turn, "
        "one verdict table per device; exit 1 when one fails)",
    )
    add_shared_flags(parser, "json")
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Build the config, run the gate; print every verdict (table or JSON); 1 when one fails."""
    from tfcompress.bench.device_gate import DeviceRunError
    from tfcompress.cli._custom_objects import load_cli_models
    from tfcompress.errors import InvalidInputError
    from tfcompress.testing.config import GateConfig
    from tfcompress.testing.output_gates import check_gate

    if args.device and not args.on:
        raise InvalidInputError("--device names a worker of --on's scheduler; give --on.")
    config = GateConfig.from_options(  # checked before any model is read
        **gate_options(args),
        **config_values(args, _SETTINGS[2:]),
        threads=args.threads,
        **feeding_options(args),
    )
    refused: dict[str, Any] = {}  # a file its runtime crashed, hung or refused on: its row
    reference, candidate = load_cli_models(args, [args.reference, args.candidate], refused)
    if refused:
        return _report(args, out, {None: refused})
    client = connect_on(args)  # an unreachable scheduler is one line (exit 2) before any work
    # Per device: its report, or (the run failed there) the candidate's error, as a row.
    outcomes: dict[str | None, Any] = {}
    try:
        devices: list[str | None] = [None]
        if client is not None:
            from tfcompress.bench.devices import workers_of

            devices = [args.device] if args.device else [name for _, name in workers_of(client)]
        for device in devices:
            try:
                outcomes[device] = check_gate(
                    reference, candidate, args.eval_data, config=config, on=client, device=device
                )
            except DeviceRunError as error:  # a crash there: the other devices go on
                outcomes[device] = {args.candidate: error}
    finally:
        if client is not None:
            client.close()
    return _report(args, out, outcomes)


def _report(args: argparse.Namespace, out: IO[str], outcomes: dict[str | None, Any]) -> int:
    """Print each report, or each file's row that its runtime could not run; the exit code.

    A file its runtime crashed, hung or refused on (at the probe, or on a device) leaves
    nothing to judge there: its row says which file failed and why, and the command ends as
    an error (its one line, exit 2), never as a failed gate (exit 1); the devices that
    judged still print their reports.
    """
    from pathlib import Path

    roles = {args.reference: "reference", args.candidate: "candidate"}

    def shown(outcome: Any) -> tuple[dict[str, Any], str]:
        if not isinstance(outcome, dict):
            return outcome.to_dict(), outcome.explain()
        rows = [
            {"role": roles[path], "artifact": Path(path).name, "status": f"error: {error}"}
            for path, error in outcome.items()
        ]
        lines = "".join(f"\n{row['role']} {row['artifact']}: {row['status']}" for row in rows)
        document = {"passed": False, "backend": args.backend, "checks": [], "errors": rows}
        return document, "gate ERROR: nothing judged" + lines

    views = {device: shown(outcome) for device, outcome in outcomes.items()}
    if args.json:  # one report per device, by name
        by_device = {"devices": {name: view[0] for name, view in views.items()}}
        emit_json(out, views[None][0] if None in views else by_device)
    else:
        for device, (_, text) in views.items():
            out.write(("" if device is None else f"on device {device}:\n") + text + "\n")
    reports = {device: r for device, r in outcomes.items() if not isinstance(r, dict)}
    failed = [device for device, report in reports.items() if not report.passed]
    for device, report in reports.items():
        where = "" if device is None else f"on {device}: "
        logger.log(
            logging.ERROR if device in failed else logging.INFO, "%s", where + report.headline()
        )
    errors = [e for o in outcomes.values() if isinstance(o, dict) for e in o.values()]
    if errors:
        raise errors[0]
    return 1 if failed else 0
