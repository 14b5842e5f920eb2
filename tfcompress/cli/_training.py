"""Arguments and output shared by the ``qat``, ``prune`` and ``cluster`` subcommands."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from importlib import import_module
from typing import IO, TYPE_CHECKING, Any

from tfcompress._config_fields import declared_options
from tfcompress.cli._gating import add_gate_options, gate_options, gate_requested
from tfcompress.cli._options import add_config_flags, config_values
from tfcompress.cli.common import add_shared_flags, emit_json, load_cli_model
from tfcompress.training.configs import TrainingConfig  # no numpy: the defaults' one home

if TYPE_CHECKING:
    from tfcompress.testing.judge import Check
    from tfcompress.testing.settings import GateSettings

logger = logging.getLogger(__name__)


def add_training_arguments(
    parser: argparse.ArgumentParser, *, config: type[TrainingConfig]
) -> None:
    """MODEL, --train, --eval, --out, one flag per option of ``config``, gate flags...

    The option flags are made from ``config``'s fields (:mod:`tfcompress.cli._options`):
    each defaults to None, "not given", so :func:`training_config` leaves it to the config,
    whose defaults the help shows and whose checks judge every value. Also ``--no-isolate``
    (no child process; see :mod:`tfcompress.training.isolation`).

    The gate flags (``--max-drop``, ``--min-snr``, ``--min-cosine``, ``--max-abs``,
    ``--min-agreement``, ``--output``, ``--metric``, ``--mode``) are those of
    ``tfcompress gate`` (:func:`tfcompress.cli._gating.add_gate_options`): a threshold judges
    the exported ``.tflite`` against the original float model on the eval data.
    """
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
    declared = declared_options("training.configs", config.__name__)
    names = add_config_flags(parser, "training.configs", config.__name__, *declared)
    parser.set_defaults(config_flags=names)
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
    add_shared_flags(parser, "force", "unsafe", "custom_objects", "timeout", "json")


def training_verb(
    name: str, config: type[TrainingConfig], train: str, *, help: str, description: str
) -> tuple[Callable[[Any], argparse.ArgumentParser], Callable[..., int]]:
    """The ``add_parser`` and ``run`` of the fine-tuning subcommand ``name`` (qat, prune...).

    ``run`` builds ``config`` from the flags (every value checked), imports ``train``
    (``"tfcompress.training.prune:prune"``: tfmot only once a command runs), fine-tunes and
    writes the ``.tflite`` atomically (:func:`run_training`).
    """

    def add_parser(subparsers: Any) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(name, help=help, description=description)
        add_training_arguments(parser, config=config)
        return parser

    def run(args: argparse.Namespace, out: IO[str]) -> int:
        chosen = training_config(args, config)
        module, _, function = train.partition(":")
        return run_training(args, out, getattr(import_module(module), function), chosen)

    return add_parser, run


def training_config(args: argparse.Namespace, config: type[TrainingConfig]) -> TrainingConfig:
    """The config the flags ask for; a flag not given (None) leaves the config's default.

    Args:
        args: The parsed flags of :func:`add_training_arguments`.
        config: The technique's config class.

    Raises:
        InvalidInputError: A value the config refuses (the message the Python keyword and a
            compress report give too).
    """
    given = config_values(args, args.config_flags)
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
    from tfcompress.testing.config import GateConfig

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
    gate = GateConfig.from_options(**gate_options(args))
    return gate.checks_to_run, gate.settings
