"""Arguments and output shared by the ``qat``, ``prune`` and ``cluster`` subcommands."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from typing import IO, Any

from tfcompress.cli.common import add_force_flag, add_json_flag, add_unsafe_flag, emit_json
from tfcompress.cli.common import positive_int as _positive_int

logger = logging.getLogger(__name__)

EXPORTS = ("float32", "float16", "dynamic", "int8")


def add_training_arguments(
    parser: argparse.ArgumentParser, *, epochs: int, learning_rate: float
) -> None:
    """MODEL, --train/--data, --val, --out, --epochs, --lr, --batch-size, --seed, common flags."""
    parser.add_argument("model", help="Keras Sequential/Functional model (.keras or .h5)")
    parser.add_argument(
        "--train",
        "--data",
        dest="train",
        required=True,
        help="training data (.npz: x, or one array per input name; labels optional: y, or "
        "y_<output name> per output; outputs without labels are fitted to the float model's "
        "own outputs, i.e. self-distillation)",
    )
    parser.add_argument(
        "--val",
        help="validation data to score the models on, like --train (labels optional); "
        "default: 20%% of the training data held out",
    )
    parser.add_argument("--out", required=True, help="output .tflite path")
    parser.add_argument(
        "--epochs",
        type=_positive_int,
        default=epochs,
        help=f"fine-tuning epochs (default {epochs})",
    )
    parser.add_argument(
        "--lr",
        type=float,
        default=learning_rate,
        help=f"Adam learning rate (default {learning_rate:g})",
    )
    parser.add_argument("--batch-size", type=_positive_int, default=32, help="default 32")
    parser.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    add_force_flag(parser)
    add_unsafe_flag(parser)
    add_json_flag(parser)


def add_export_arguments(parser: argparse.ArgumentParser, *, what: str) -> None:
    """--then, --qat-epochs and --skip-layer for pruning and clustering."""
    parser.add_argument(
        "--then",
        choices=EXPORTS,
        default="float32",
        help=f"export precision (default float32); int8 runs {what}-preserving QAT",
    )
    parser.add_argument(
        "--qat-epochs",
        type=int,
        default=1,
        help="epochs of the preserving QAT with --then int8 (0: post-training int8; default 1)",
    )
    parser.add_argument(
        "--skip-layer",
        action="append",
        default=[],
        metavar="NAME",
        help="leave this layer untouched (repeatable)",
    )


def run_training(
    args: argparse.Namespace, out: IO[str], train: Callable[..., Any], **options: Any
) -> int:
    """Check the output path, train with ``train(model, ...)``, write atomically, report."""
    from tfcompress.models import check_output_path, load_model

    inputs = [path for path in (args.model, args.train, args.val) if path is not None]
    check_output_path(args.out, overwrite=args.force, inputs=inputs)
    model = load_model(args.model, safe_mode=not args.unsafe)
    result = train(
        model,
        train_data=args.train,
        val_data=args.val,
        epochs=args.epochs,
        learning_rate=args.lr,
        batch_size=args.batch_size,
        seed=args.seed,
        **options,
    )
    saved = result.save(args.out, overwrite=args.force)
    logger.info("wrote %s (%s bytes)", saved, f"{result.size_bytes:,}")
    if args.json:
        emit_json(out, {"output": str(saved), **result.to_dict()})
    else:
        out.write(f"{result}\n\nwrote {saved}\n")
    return 0
