"""Arguments and output shared by the ``qat``, ``prune`` and ``cluster`` subcommands."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from tfcompress.cli._choices import EXPORT_RECIPES
from tfcompress.cli._gating import add_gate_options, flat, gate_requested, threshold_options
from tfcompress.cli.common import (
    add_custom_objects_flag,
    add_force_flag,
    add_json_flag,
    add_timeout_flag,
    add_unsafe_flag,
    csv_of,
    emit_json,
    load_cli_model,
)
from tfcompress.training.configs import TrainingConfig  # no numpy: the defaults' one home

if TYPE_CHECKING:
    from tfcompress.testing.judge import Check
    from tfcompress.testing.settings import GateSettings

logger = logging.getLogger(__name__)


def add_training_arguments(
    parser: argparse.ArgumentParser, *, config: type[TrainingConfig]
) -> None:
    """MODEL, --train, --eval, --out, --epochs/--learning-rate/--batch-size/--seed, gate flags...

    Also ``--no-freeze-batchnorm`` (BatchNorm statistics train; frozen by default) and
    ``--no-isolate`` (no child process; see :mod:`tfcompress.training.isolation`). Every
    option flag defaults to None, "not given": :func:`training_config` leaves it to the
    ``config`` class, whose defaults the help shows and whose checks judge every value.

    The gate flags (``--max-drop``, ``--min-snr``, ``--min-cosine``, ``--max-abs``,
    ``--min-agreement``, ``--output``, ``--metric``, ``--mode``) are those of
    ``tfcompress gate`` (:func:`tfcompress.cli._gating.add_gate_options`): a threshold judges
    the exported ``.tflite`` against the original float model on the eval data.
    """
    default = config.defaults()
    parser.add_argument("model", help="Keras Sequential/Functional model (.keras or .h5)")
    parser.add_argument(
        "--train",
        required=True,
        help="samples to fine-tune on (.npz: x, or one array per input name; labels optional: "
        "y, or y_<output name> per output; outputs without labels are fitted to the float "
        "model's own outputs, i.e. self-distillation)",
    )
    parser.add_argument(
        "--eval",
        dest="eval_data",
        help="samples to score the models on, like --train (labels optional); default: 20%% "
        "of the training samples held out",
    )
    parser.add_argument("--out", required=True, help="output .tflite path")
    parser.add_argument(
        "--epochs", type=int, help=f"fine-tuning epochs (default {default['epochs']})"
    )
    parser.add_argument(
        "--learning-rate",
        type=float,
        metavar="X",
        help=f"Adam learning rate (default {default['learning_rate']:g})",
    )
    parser.add_argument(
        "--batch-size", type=int, help=f"samples per step (default {default['batch_size']})"
    )
    parser.add_argument("--seed", type=int, help=f"training seed (default {default['seed']})")
    parser.add_argument(
        "--freeze-batchnorm",
        action=argparse.BooleanOptionalAction,
        help="keep BatchNormalization statistics frozen (the default, so fine-tuning on data "
        "unlike the training set cannot move them); --no-freeze-batchnorm lets them train, for "
        "a real training set",
    )
    parser.add_argument(
        "--isolate",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="fine-tune in a child process (the default); --no-isolate fine-tunes in this "
        "process (saves the child's TensorFlow import; a native crash then ends the command "
        "with no message)",
    )
    # A threshold judges the exported .tflite against the original float model on the
    # eval data; the artifact is written either way and the command exits 1 on failure.
    add_gate_options(parser)
    add_force_flag(parser)
    add_unsafe_flag(parser)
    add_custom_objects_flag(parser)
    add_timeout_flag(parser)
    add_json_flag(parser)


def add_export_arguments(
    parser: argparse.ArgumentParser, *, config: type[TrainingConfig], what: str
) -> None:
    """--then, --qat-epochs and --skip-layers for pruning and clustering (``config``'s)."""
    default = config.defaults()
    parser.add_argument(
        "--then",
        choices=EXPORT_RECIPES,
        help=f"export precision (default float32); int8 runs {what}-preserving QAT",
    )
    parser.add_argument(
        "--qat-epochs",
        type=int,
        help="epochs of the preserving QAT with --then int8 (0: post-training int8; default "
        f"{default['qat_epochs']})",
    )
    parser.add_argument(
        "--skip-layers",
        type=csv_of(str, "--skip-layers"),
        metavar="NAME,NAME",
        help="leave these layers untouched (comma-separated)",
    )


def training_config(
    args: argparse.Namespace, config: type[TrainingConfig], **options: Any
) -> TrainingConfig:
    """The config the flags ask for; a flag not given (None) leaves the config's default.

    Args:
        args: The parsed flags of :func:`add_training_arguments` (and
            :func:`add_export_arguments`, where the command has them).
        config: The technique's config class.
        **options: The command's own flags, by config field (None: not given).

    Raises:
        InvalidInputError: A value the config refuses (the message the Python keyword and a
            compress report give too).

    Example:
        >>> training_config(parse(["qat", "m.keras", "--train", "t.npz", "--out", "q.tflite",
        ...                        "--epochs", "2"]), QATConfig).epochs  # doctest: +SKIP
        2
    """
    given: dict[str, Any] = {
        "epochs": args.epochs,
        "learning_rate": args.learning_rate,
        "batch_size": args.batch_size,
        "seed": args.seed,
        "freeze_batchnorm": args.freeze_batchnorm,
        **options,
    }
    if hasattr(args, "then"):  # prune, cluster: float32 is the config's None
        given["then"] = None if args.then == "float32" else args.then
        given["qat_epochs"] = args.qat_epochs
        given["skip_layers"] = None if args.skip_layers is None else tuple(args.skip_layers)
    return config(**{name: value for name, value in given.items() if value is not None})


def run_training(
    args: argparse.Namespace, out: IO[str], train: Callable[..., Any], config: TrainingConfig
) -> int:
    """Check the gate flags and the output path, train with ``config``, write atomically, report.

    Args:
        args: The parsed flags of :func:`add_training_arguments` (and the command's own).
        out: Where the report or the JSON object (``result.to_dict()`` and ``output``, the
            path written) goes (stdout).
        train: :func:`tfcompress.qat`, :func:`tfcompress.prune` or :func:`tfcompress.cluster`.
        config: What to run (:func:`training_config`).

    Returns:
        0, or 1 when the gate failed (the ``.tflite`` is written either way).

    Raises:
        InvalidInputError: Gate flags that contradict each other or cannot apply (checked
            before loading anything; those that depend on the data, before training).

    Example:
        >>> main(["prune", "m.keras", "--train", "t.npz", "--out", "p.tflite",
        ...       "--max-drop", "0.01"])  # doctest: +SKIP
        1
    """
    from tfcompress.models import check_output_path

    checks, settings = _gate_options(args)
    inputs = [path for path in (args.model, args.train, args.eval_data) if path is not None]
    check_output_path(args.out, overwrite=args.force, inputs=inputs)
    model = load_cli_model(args)
    result = train(
        model,
        config=config,
        train_data=args.train,
        eval_data=args.eval_data,
        gate=checks,
        gate_settings=settings,
        isolate=args.isolate,
    )
    for sentence in result.worse_than_baseline:
        logger.warning("%s; %s is better", sentence, result.baseline_name)
    saved = result.save(args.out, overwrite=args.force)
    logger.info("wrote %s (%s bytes)", saved, f"{result.size_bytes:,}")
    if args.json:
        emit_json(out, {"output": str(saved), **result.to_dict()})
    else:
        out.write(f"{result}\n\nwrote {saved}\n")
    if result.gate is not None and not result.gate.passed:
        logger.error("%s; %s was still written", result.gate.headline(), saved)
        return 1
    return 0


def _gate_options(args: argparse.Namespace) -> tuple[tuple[Check, ...] | None, GateSettings | None]:
    """The gate the flags ask for (None, None without a threshold); refused before any work.

    Raises:
        InvalidInputError: ``--mode``, ``--output`` or ``--metric`` without a threshold, a
            threshold no requested metric uses, an unknown metric, a threshold out of range.
    """
    from tfcompress.errors import InvalidInputError
    from tfcompress.testing.judge import build_checks
    from tfcompress.testing.settings import GateSettings

    if not gate_requested(args):
        if args.mode is not None:
            raise InvalidInputError(
                "--mode sets how the gate judges; pass a threshold too (--max-drop with "
                "labels, --min-agreement or --min-snr without)."
            )
        if args.output or args.metric:
            raise InvalidInputError(
                "--output and --metric choose what the gate checks; pass a threshold too "
                "(--max-drop, --min-snr, --min-cosine, --max-abs or --min-agreement)."
            )
        return None, None
    checks = build_checks(flat(args.output), flat(args.metric), **threshold_options(args))
    mode = {} if args.mode is None else {"mode": args.mode}  # GateSettings owns the default
    return checks, GateSettings(**mode)
