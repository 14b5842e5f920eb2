"""``tfcompress select --train TRAIN.npz --eval EVAL.npz --max-size 500KB --max-latency 5ms``."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import IO, Any

from tfcompress.cli._devices import (
    add_device_flag,
    add_on_flags,
    add_tls_flags,
    connect_on,
    tls_files,
)
from tfcompress.cli._options import add_config_flags, config_values
from tfcompress.cli._targets import add_budget_arguments, budget_names, target_choices
from tfcompress.cli.common import (
    add_shared_flags,
    emit_json,
    positive_float,
    positive_int,
    show_progress,
)

logger = logging.getLogger(__name__)

#: The Budgets fields that are flags (a target adds its own: add_budget_arguments).
_BUDGETS = ("selection.budgets", "Budgets", "max_size", "max_latency", "threads", "min_accuracy")
#: The SelectionConfig fields that are flags.
_CONFIG = (
    "selection.config",
    "SelectionConfig",
    "families",
    "width_multipliers",
    "resolutions",
    "epochs",
    "objective",
    "seed",
    "batch_size",
    "learning_rate",
    "calibration_samples",
    "latency_runs",
    "latency_seconds",
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        "select",
        help="pick the most accurate zoo model within size/latency/accuracy budgets",
        description="Measure every zoo candidate (family x width x resolution) as an untrained "
        "int8 .tflite, train only those within the size and latency budgets, score their int8 "
        "artifacts and pick the best. Exit 1 when no candidate meets the budgets.",
    )
    parser.add_argument(
        "--train", required=True, help="images + labels to train each candidate on (.npz: x, y)"
    )
    parser.add_argument(
        "--eval",
        dest="eval_data",
        required=True,
        help="images + labels to score each trained candidate's int8 .tflite on (.npz: x, y)",
    )
    add_config_flags(parser, *_BUDGETS)
    parser.add_argument(
        "--target",
        choices=target_choices(),
        help="the device: latency and int8 accuracy are measured on its backend (default: "
        "Budgets', cpu)",
    )
    add_budget_arguments(parser, value_type=positive_float)  # what each target adds (Edge TPU)
    add_config_flags(parser, *_CONFIG)
    parser.add_argument("--workdir", help="folder of per-candidate results; a re-run resumes")
    parser.add_argument(
        "--scheduler",
        help="Dask scheduler address (tcp://HOST:PORT, or tls://HOST:PORT with the files "
        "below) whose workers (TensorFlow installs) build, convert and train the candidates; "
        "latency is measured on the worker that built each one unless --on names a device",
    )
    tls_group = add_tls_flags(
        parser, title="a tls:// --scheduler or --on (docs/devices.md, security)"
    )
    add_on_flags(
        parser,
        what="measure each candidate's int8 latency (what --max-latency judges; this machine "
        "or --scheduler still builds and trains them)",
        group=tls_group,
    )
    add_device_flag(parser, what="times every candidate")
    parser.add_argument(
        "--workers",
        type=positive_int,
        help="processes of the local pool (default 1; not with --scheduler)",
    )
    parser.add_argument("--report", help="write selection.json, selection.md, pareto.png here")
    parser.add_argument("--force", action="store_true", help="replace an existing --report")
    add_shared_flags(parser, "json")
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Check every input, run the selection, print the table or JSON, write the report.

    Returns:
        0 when a candidate meets every budget, 1 when none does (the closest are shown).

    Raises:
        InvalidInputError: Impossible budgets, an unknown family, a resolution a family
            cannot take, a report folder holding a report (without --force), an
            unreachable scheduler; all before any candidate is measured.
        InvalidDataError: Data without class labels.
    """
    from tfcompress.errors import InvalidInputError
    from tfcompress.selection import Budgets, connect_scheduler, select_model
    from tfcompress.selection.config import SelectionConfig
    from tfcompress.selection.report import check_selection_report_dir, pick_line

    config = SelectionConfig.from_options(  # every option checked before any work
        budgets=Budgets(
            target_limits=_target_limits(args),
            **{
                k: v
                for k, v in config_values(args, ("target", *_BUDGETS[2:])).items()
                if v is not None
            },
        ),
        **config_values(args, _CONFIG[2:]),
    )
    if args.scheduler and args.workers:
        raise InvalidInputError("--workers sizes the local pool; drop it with --scheduler.")
    report = Path(args.report) if args.report else None
    if report is not None:
        check_selection_report_dir(report, overwrite=args.force)
    if config.budgets.target == "edgetpu" and not args.scheduler:
        from tfcompress.runtime.edgetpu import find_library

        find_library()  # the Edge TPU runtime must be here before any candidate is built
    tls = tls_files(args)
    if tls.given and not (args.scheduler or args.on):
        raise InvalidInputError(
            "--tls-ca-file/--tls-cert/--tls-key secure a tls:// --scheduler or --on; give one, "
            "or drop them."
        )
    if args.device and not args.on:
        raise InvalidInputError("--device names a worker of --on's scheduler; give --on.")
    if args.on and not str(args.scheduler or "tls://").startswith("tls://"):
        tls = type(tls)()  # the files secure --on, not a tcp:// --scheduler
    # Unreachable addresses are one line (exit 2) before any work.
    device = connect_on(args, shared_tls=True)
    try:
        client = connect_scheduler(args.scheduler, tls=tls) if args.scheduler else None
    except BaseException:
        if device is not None:
            device.close()
        raise
    try:
        result = select_model(
            train_data=args.train,
            eval_data=args.eval_data,
            config=config,
            executor=client,
            workdir=args.workdir,
            progress=show_progress(),
            workers=args.workers or 1,
            on=device,
            device=args.device,
        )
    finally:
        for opened in (client, device):
            if opened is not None:
                opened.close()
    files = result.write_report(report, overwrite=args.force) if report is not None else ()
    if args.json:
        emit_json(out, {**result.to_dict(), "report_files": [str(f) for f in files]})
    else:
        out.write(f"{result}\n")
    if result.best is None:
        logger.error("%s", pick_line(result))
        return 1
    return 0


def _target_limits(args: argparse.Namespace) -> dict[str, float]:
    """The target budget flags given (``--max-edgetpu-segments 1``), by budget name.

    Budgets refuses a budget of another target than ``--target`` (one check, one message).
    """
    given = {name: getattr(args, name, None) for _, name, _ in budget_names()}
    return {name: value for name, value in given.items() if value is not None}
