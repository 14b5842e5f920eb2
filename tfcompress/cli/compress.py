"""``tfcompress compress MODEL --data CALIB --eval TEST --max-drop 0.01 --out OUT.tflite``."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tfcompress.cli._devices import add_device_flag, add_on_flags, connect_on
from tfcompress.cli._gating import add_gate_options, gate_options, gate_requested
from tfcompress.cli._options import add_config_flags, config_values
from tfcompress.cli._targets import target_choices
from tfcompress.cli.common import (
    add_feeding_flags,
    add_shared_flags,
    emit_json,
    feeding_options,
    load_cli_model,
    positive_int,
    warm_converter,
)

if TYPE_CHECKING:
    from tfcompress.compression.config import CompressConfig

logger = logging.getLogger(__name__)

#: The CompressConfig fields that are flags (the gate's are the gate flags).
_CONFIG = (
    "compression.config",
    "CompressConfig",
    "objective",
    "time_budget",
    "measure_latency",
    "max_slowdown",
    "static_batch",
    "batch_size",
    "freeze_batchnorm",
    "seed",
    "threads",
)

EXIT_INTERRUPTED = 130


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        "compress",
        help="the smallest (or fastest) .tflite that passes the accuracy gate",
        description="Try int8, more calibration, the post-training methods, 16-bit "
        "activations on the worst tensors (int8 weights), selective float layers, int16x8 "
        "(and with --train QAT, pruning, clustering) cheapest first; keep the best artifact "
        "that passes the gate on --eval and runs no slower than float32 (--max-slowdown); "
        "stop when nothing left can beat it.",
    )
    parser.add_argument("model", help=".keras, .h5 or SavedModel directory (the float model)")
    parser.add_argument("--data", required=True, help="calibration samples (.npz with x, .npy)")
    parser.add_argument(
        "--eval",
        dest="eval_data",
        help="gate data (.npz; labels y or y_<output> for task metrics, none for fidelity)",
    )
    parser.add_argument("--out", required=True, help="output .tflite (the chosen artifact)")
    parser.add_argument(
        "--target",
        choices=target_choices(),
        help="the device: its gate and latency backends, the rungs it admits, its check "
        "(gpu: float16/float32/int8 at a static batch, gated on the GPU; where LiteRT finds no "
        "GPU, gated on the CPU and ranked by size, said in the notes; default cpu)",
    )
    parser.add_argument("--train", help="training samples: enables QAT, pruning and clustering")
    add_config_flags(parser, *_CONFIG)
    parser.add_argument("--report", metavar="DIR", help="write compress.json/.md and plots here")
    parser.add_argument(
        "--replay",
        metavar="REPORT.json",
        help="make the chosen attempt of a compress report again (same recipe, same bytes)",
    )
    parser.add_argument(
        "--attempt", type=positive_int, metavar="N", help="with --replay: attempt N, not the chosen"
    )
    add_gate_options(parser)
    add_feeding_flags(parser)  # --data, --eval and --train read in the model's layout
    add_shared_flags(parser, "force", "unsafe", "timeout", "custom_objects")
    add_on_flags(parser, what="time every attempt")
    add_device_flag(parser, what="times every attempt")
    add_shared_flags(parser, "json")
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Search, write the chosen artifact atomically and the report, print the attempts.

    Returns:
        0 when an artifact passed; 1 when none did (the attempts and what to try next are
        printed); 130 when Ctrl-C stopped the search (the best so far is written).

    Raises:
        InvalidInputError: A gate outside [0, 1], --eval missing, options the gate refuses,
            an output or report folder that cannot be written (all before any conversion).
        InvalidDataError: Data that does not fit the model, a task metric without labels.
        BackendUnavailableError: ``--target gpu`` with no usable GPU.
    """
    warm_converter(args.model)  # its child imports TensorFlow while this one works
    from tfcompress.compression.api import check_on, compress
    from tfcompress.compression.report import check_compress_report_dir, report_paths
    from tfcompress.errors import InvalidInputError
    from tfcompress.models import check_output_path

    inputs = [p for p in (args.model, args.data, args.eval_data, args.train, args.replay) if p]
    if args.replay is not None:
        return _replay(args, out, inputs)
    if args.attempt is not None:
        raise InvalidInputError("--attempt picks an attempt of --replay REPORT.json; pass both.")
    if args.eval_data is None:
        raise InvalidInputError("compress judges every attempt: pass --eval TEST.npz.")
    check_output_path(args.out, overwrite=args.force, inputs=inputs)
    if args.report:
        check_compress_report_dir(args.report, overwrite=args.force)
    if args.freeze_batchnorm is not None and args.train is None:
        raise InvalidInputError(
            "--[no-]freeze-batchnorm sets how --train fine-tunes; pass --train."
        )
    if args.batch_size is not None and args.train is None:
        raise InvalidInputError(
            "--batch-size is the fine-tuning batch of --train; pass --train (a static batch "
            "in the file is --static-batch N)."
        )
    config = compress_config(args)  # every option checked before the model is read
    check_on(config, bool(args.on), args.device)
    client = connect_on(args)  # an unreachable scheduler is one line (exit 2) before any work
    try:
        model = load_cli_model(args, in_child=True)
        result = compress(
            model,
            config=config,
            representative_data=args.data,
            eval_data=args.eval_data,
            train_data=args.train,
            progress=True,
            on=client,
            device=args.device,
        )
    finally:
        if client is not None:
            client.close()
    # The artifact first, the report after it: a report never names an artifact that was not
    # written. If either fails, or a signal stops the run anywhere in between, every file of
    # the two that was not there before is taken back: both are written, or neither.
    folder = Path(args.report) if args.report else None
    ours = [Path(args.out), *(report_paths(folder) if folder else [])]
    existed = {p for p in ours if os.path.lexists(p)}
    made = []  # the report folder and its parents that do not exist yet, innermost first
    above = folder
    while above is not None and not os.path.exists(above) and above != above.parent:
        made.append(above)
        above = above.parent
    try:
        saved = result.save(args.out, overwrite=args.force) if result.passed else None
        written = result.write_report(folder, overwrite=args.force) if folder else []
    except BaseException:
        for path in ours:  # what is there now and was not before is ours, written or not
            if path not in existed:
                path.unlink(missing_ok=True)
        for made_folder in made:
            with contextlib.suppress(OSError):  # not empty: something else wrote there
                made_folder.rmdir()
        raise
    if args.json:
        payload = result.to_dict()
        if payload["chosen"] is not None:
            payload["chosen"]["output"] = str(saved)
        payload["report"] = [str(p) for p in written]
        emit_json(out, payload)
    else:
        out.write(f"{result}\n")
        if saved is not None:
            out.write(f"wrote {saved}\n")
        for path in written:
            out.write(f"report: {path}\n")
    if result.interrupted:
        kept = f"wrote the best artifact so far to {saved}" if saved else "nothing passed yet"
        logger.warning("compress was interrupted (Ctrl-C): %s", kept)
        return EXIT_INTERRUPTED
    return 0 if result.passed else 1


def compress_config(args: argparse.Namespace) -> CompressConfig:
    """The :class:`~tfcompress.compression.config.CompressConfig` the flags describe.

    Raises:
        InvalidInputError: What the config refuses (a gate outside [0, 1], options the
            gate refuses, a static batch the target does not take).
    """
    from tfcompress.compression.config import CompressConfig

    return CompressConfig.from_options(
        target=args.target,
        **gate_options(args),
        **config_values(args, _CONFIG[2:]),
        **feeding_options(args),
    )


def _replay(args: argparse.Namespace, out: IO[str], inputs: list[str]) -> int:
    from tfcompress._files import write_bytes_atomic
    from tfcompress.compression.replay import read_attempt, replay
    from tfcompress.errors import InvalidInputError
    from tfcompress.models import check_output_path

    # A replay makes one recorded recipe again: the options of a search would do nothing.
    search_only = {
        "--target": args.target is not None,
        **{f"--{name.replace('_', '-')}": getattr(args, name) is not None for name in _CONFIG[2:]},
        "--report": args.report is not None,
        "the gate flags": gate_requested(args) or bool(args.mode or args.output or args.metric),
    }
    given = [flag for flag, present in search_only.items() if present]
    if given:
        raise InvalidInputError(
            f"--replay makes the recorded attempt again (its recipe fixes everything); "
            f"{', '.join(given)} apply to a search: drop them."
        )
    check_output_path(args.out, overwrite=args.force, inputs=inputs)
    attempt = read_attempt(args.replay, args.attempt)
    content = replay(
        load_cli_model(args),
        attempt,  # the report was read and checked once, above
        representative_data=args.data,
        train_data=args.train,
        eval_data=args.eval_data,
    )
    saved = write_bytes_atomic(args.out, content, overwrite=args.force)
    if args.json:
        emit_json(
            out,
            {
                "replayed": attempt.index,
                "name": attempt.name,
                "recipe": attempt.recipe,
                "output": str(saved),
                "size_bytes": len(content),
                "recorded_size_bytes": attempt.size_bytes,
            },
        )
    else:
        out.write(f"replayed attempt {attempt.index} ({attempt.name}): wrote {saved} ")
        out.write(f"({len(content):,} B, {_compared(attempt, content)})\n")
    return 0


def _compared(attempt: Any, content: bytes) -> str:
    """What the replayed bytes share with the recorded attempt: the report keeps sizes only."""
    from tfcompress.training.sparsity import gzip_size

    if attempt.size_bytes is None:  # a report edited or written by hand
        return "the report records no size to compare it with"
    if attempt.size_bytes != len(content):
        return f"recorded {attempt.size_bytes:,} B: not the recorded artifact"
    packed = gzip_size(content)
    if attempt.gzip_bytes is not None and attempt.gzip_bytes != packed:
        return (
            f"same size as recorded but other bytes: gzip {packed:,} B, "
            f"recorded {attempt.gzip_bytes:,} B"
        )
    return "same raw and gzip size as recorded; the report keeps no checksum to compare bytes"
