"""Argument helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from typing import IO, Any

MAX_SEED = 2**32 - 1


def add_sample_flags(parser: argparse.ArgumentParser, *, compared: str) -> None:
    """``--data`` and ``--samples``: the float samples a check runs two runtimes on."""
    parser.add_argument(
        "--data",
        help=f"float samples to compare {compared} on (.npz with x or one array per input "
        "name, .npy); default: 8 seeded random inputs",
    )
    parser.add_argument(
        "--samples",
        type=positive_int,
        metavar="N",
        help="compare at most N samples of --data (default: the check's own cap)",
    )


def sample_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--samples`` as the check's ``max_samples``, where given (else the check's default)."""
    return {} if args.samples is None else {"max_samples": args.samples}


def load_cli_model(
    args: argparse.Namespace, path: str | None = None, *, in_child: bool = False
) -> Any:
    """``args.model`` (or ``path``) loaded with ``--unsafe`` and ``--custom-objects``.

    The ``--custom-objects`` file is imported by the loader once it knows which Keras saved
    the model (its ``tf.keras`` is tf-keras for a tf-keras ``.h5``), and refused for a file
    that is not a Keras model. Several models (``gate``, ``benchmark``):
    :func:`tfcompress.cli._custom_objects.load_cli_models`.

    Raises:
        ModelLoadError: The model cannot be loaded (the message names the way out).
        InvalidInputError: The ``--custom-objects`` file cannot be imported, or the model
            is not a Keras file.
    """
    from tfcompress.models.loading import load_model, open_model

    objects = getattr(args, "custom_objects", None) or None
    path = args.model if path is None else path
    load = open_model if in_child else load_model  # in_child: see open_model
    return load(path, safe_mode=not args.unsafe, custom_objects=objects)


def warm_converter(model: object) -> None:
    """Start the converter's child first, before this process imports its own modules.

    TensorFlow's import there is a converting command's longest step, and this process
    needs none of it (numpy and the verb's modules take it half a second): the two overlap.
    A ``.tflite`` or ``.onnx`` input needs no converter. A command refused after this ends
    the child at exit (it is killed, not waited for).
    """
    if not str(model).lower().endswith((".tflite", ".onnx")):
        from tfcompress._child.warm import CONVERTER, prestart

        prestart(CONVERTER)


def argument_type(parse: Callable[[str], Any] | str) -> Callable[[str], Any]:
    """An argparse ``type`` from a parser that raises :class:`InvalidInputError`.

    argparse prints the message as the usage error (exit 2, one line).

    Args:
        parse: The parser, or where it lives (``"tfcompress.models.feeding:parse_batch_dim"``),
            imported when the first value is converted: building the parser (``--help``)
            then imports nothing of the library.
    """

    def convert(text: str) -> Any:
        from tfcompress.errors import InvalidInputError

        try:
            return _resolve(parse)(text)
        except InvalidInputError as error:
            raise argparse.ArgumentTypeError(str(error)) from error

    return convert


def registered_backend(text: str) -> str:
    """An argparse ``type``: the name of a backend registered now (built-in or the caller's).

    The registry is read when a value is converted, not when the parser is built (``--help``
    imports no runtime); a backend a program registered before calling the CLI is accepted.

    Example:
        >>> registered_backend("cpu")
        'cpu'
    """
    from tfcompress.runtime.base import list_backends

    names = list_backends()
    if text not in names:
        shown = ", ".join(repr(name) for name in names)
        raise argparse.ArgumentTypeError(f"invalid choice: {text[:60]!r} (choose from {shown})")
    return text


def _resolve(parse: Callable[[str], Any] | str) -> Callable[[str], Any]:
    if callable(parse):
        return parse
    import importlib

    module, _, name = parse.partition(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def add_feeding_flags(parser: argparse.ArgumentParser) -> None:
    """``--batch-dim NAME=D`` and ``--input-value NAME=V``: how a model's inputs are fed.

    See :mod:`tfcompress.models.feeding` for the rules they complete (imported when a value
    is read, not when the parser is built).
    """
    add_batch_dim_flag(
        parser,
        "the dimension of input NAME that is the batch, when its signature cannot tell "
        "(e.g. h=1 for a (layers, N, units) state); repeat per input. Where outputs are "
        "compared (gate, --eval), an output's NAME too (e.g. stateN=1)",
    )
    add_per_input_flag(
        parser,
        "--input-value",
        "NAME=VALUE",
        "tfcompress.models.feeding:parse_input_value",
        "one value fed to input NAME on every call (a scalar such as sr=16000, or an "
        "input the data does not hold, e.g. h=0 for a zero state); repeat per input",
    )


def add_batch_dim_flag(parser: argparse.ArgumentParser, help: str) -> None:
    """``--batch-dim NAME=D`` alone, with the verb's own ``help``."""
    parse = "tfcompress.models.feeding:parse_batch_dim"
    add_per_input_flag(parser, "--batch-dim", "NAME=DIM", parse, help)


def add_per_input_flag(
    parser: argparse.ArgumentParser, flag: str, metavar: str, parse: str, help: str
) -> None:
    """``flag METAVAR``, given once per input: a list of values, each read by ``parse``.

    ``parse`` is ``"module:function"``, imported when a value is read (:func:`argument_type`).
    """
    parser.add_argument(
        flag, action="append", type=argument_type(parse), default=[], metavar=metavar, help=help
    )


def feeding_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--batch-dim`` and ``--input-value`` as the keywords (and config fields) they fill.

    Example:
        >>> feeding_options(argparse.Namespace(batch_dim=[("h", 1)], input_value=[]))
        {'batch_dims': {'h': 1}, 'input_values': {}}
    """
    return {"batch_dims": dict(args.batch_dim), "input_values": dict(args.input_value)}


def emit_json(out: IO[str], payload: dict[str, Any]) -> None:
    """Write ``payload`` as one line of standard JSON to ``out``.

    NaN and infinities (an unmeasured value) are written as ``null`` (:mod:`tfcompress._json`).
    """
    from tfcompress._json import dumps

    out.write(dumps(payload) + "\n")


def emit(out: IO[str], report: Any, as_json: bool) -> None:
    """``report.to_dict()`` as JSON (``--json``), else ``report`` as text, to ``out``."""
    if as_json:
        emit_json(out, report.to_dict())
    else:
        out.write(f"{report}\n")


def seed(text: str) -> int:
    """An argparse ``type`` for a seed: an integer NumPy and Keras accept (0 to 2**32-1).

    Example:
        >>> seed("7")
        7
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer seed") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be an integer from 0 to {MAX_SEED}, got {value}")
    return value


def show_progress() -> bool:
    """Progress bars only when a person watches stderr."""
    return sys.stderr.isatty()


def csv_of(kind: Callable[[str], Any], what: str) -> Callable[[str], list[Any]]:
    """An argparse ``type`` for comma-separated values, e.g. ``--threads 1,2``."""

    def parse(text: str) -> list[Any]:
        try:
            values = [kind(part) for part in text.split(",") if part.strip()]
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"{what}: {error}") from error
        if not values:
            raise argparse.ArgumentTypeError(f"{what}: give at least one value")
        return values

    return parse


# -- argument types shared by the commands -----------------------------------------------
# Numbers, sizes, durations and shapes are read here once, so ``5ms`` or ``500KB`` means the
# same in every command, and a value no computation can use (inf, nan, 1e999) is refused at
# the flag, not after minutes of work.

# Each character can be read one way only (no \d+\.?\d*, no \s* on both sides of an empty
# unit), so a refused value costs time linear in its length, not quadratic; the text is
# stripped first.
_NUMBER = r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?)\s*([a-z]*)"
_SIZE_UNITS = {"": 1, "b": 1, "kb": 1000, "kib": 1024, "mb": 1000**2, "mib": 1024**2}
_SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_MAX_BYTES = 10**12  # 1 TB: no edge model is larger, and the bound keeps arithmetic exact


def positive_int(text: str) -> int:
    """An argparse ``type`` for integers >= 1.

    Example:
        >>> positive_int("4")
        4
    """
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _number(text: str, wanted: str, accepts: Callable[[float], bool]) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    if not accepts(value):
        raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """An argparse ``type`` for a finite number > 0.

    Example:
        >>> positive_float("0.35")
        0.35
    """
    return _number(text, "a positive number", lambda value: value > 0)


def non_negative_float(text: str) -> float:
    """An argparse ``type`` for a finite number >= 0 (seconds of warm-up, say).

    Example:
        >>> non_negative_float("0")
        0.0
    """
    return _number(text, ">= 0", lambda value: value >= 0)


def parse_size(text: str) -> int:
    """Bytes from ``500KB`` (1000), ``500KiB`` (1024), ``1.5MB``, ``300000``.

    Example:
        >>> parse_size("500KB"), parse_size("1KiB")
        (500000, 1024)
    """
    match = re.fullmatch(_NUMBER, text.strip().lower())
    if not match or match.group(2) not in _SIZE_UNITS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size; write e.g. 500KB, 300KiB, 2MB or 250000 (bytes)"
        )
    value = float(match.group(1)) * _SIZE_UNITS[match.group(2)]
    if not (math.isfinite(value) and 1 <= value <= _MAX_BYTES):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size from 1 byte to 1 TB; write e.g. 500KB or 2MB"
        )
    return round(value)


def _duration_seconds(text: str, bare_unit: str, example: str) -> float:
    match = re.fullmatch(_NUMBER, text.strip().lower())
    unit = match.group(2) or bare_unit if match else ""
    if not match or unit not in _SECONDS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a positive duration; write e.g. {example}"
        )
    value = float(match.group(1)) * _SECONDS[unit]
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive, finite duration, got {text!r}")
    return value


def duration(text: str) -> float:
    """Seconds from ``90``, ``90s``, ``10m``, ``1.5h`` (a time budget; bare numbers are seconds).

    Example:
        >>> duration("10m")
        600.0
    """
    return _duration_seconds(text, "s", "90s, 10m or 1h")


def time_limit(text: str) -> float:
    """A time limit: a :func:`duration` of at most a week (what the OS can wait).

    Example:
        >>> time_limit("2h")
        7200.0
    """
    value = duration(text)
    week = 7 * 24 * 3600.0  # tfcompress._limits.MAX_TIMEOUT_S, without importing it here
    if value > week:
        raise argparse.ArgumentTypeError(f"must be at most a week ({week:g} s), got {text!r}")
    return value


def latency_ms(text: str) -> float:
    """Milliseconds from ``5ms``, ``0.5s``, ``800us`` or ``5`` (bare numbers are milliseconds).

    Example:
        >>> latency_ms("5ms"), latency_ms("0.01s")
        (5.0, 10.0)
    """
    return _duration_seconds(text, "ms", "5ms or 0.5s") * 1000.0


def fraction(text: str) -> float:
    """An accuracy as ``0.95`` or ``95%``, within [0, 1].

    Example:
        >>> fraction("95%")
        0.95
    """
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an accuracy; write 0.95 or 95%"
        ) from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not an accuracy in [0, 1] (0.95 or 95%)")
    return value


def image_shape(text: str) -> tuple[int, int, int]:
    """An argparse ``type`` for ``HxWxC``, e.g. ``224x224x3``.

    Example:
        >>> image_shape("32x32x1")
        (32, 32, 1)
    """
    parts = text.lower().split("x")
    try:
        values = tuple(int(part) for part in parts)
    except ValueError:
        values = ()
    if len(values) != 3 or min(values) < 1:
        raise argparse.ArgumentTypeError(
            f"expected HEIGHTxWIDTHxCHANNELS of positive integers (e.g. 224x224x3), got {text!r}"
        )
    return values  # type: ignore[return-value]


#: The flags several verbs share: name -> (flag, ``add_argument`` keywords).
_SHARED_FLAGS: dict[str, tuple[str, dict[str, Any]]] = {
    "json": (
        "--json",
        {"action": "store_true", "help": "print one JSON object on stdout (logs stay on stderr)"},
    ),
    "force": ("--force", {"action": "store_true", "help": "replace OUT if it exists"}),
    "unsafe": (
        "--unsafe",
        {
            "action": "store_true",
            "help": "load Keras files holding Lambda layers (they can run arbitrary code)",
        },
    ),
    "custom_objects": (
        "--custom-objects",
        {
            "metavar": "FILE.py",
            "help": "a Python file defining the model's custom Keras classes (its CUSTOM_OBJECTS "
            "dict, else its public classes); tfcompress imports it, which runs its code",
        },
    ),
    # The time limit of each native step in a child process: it sets TFCOMPRESS_TIMEOUT for
    # the run (tfcompress.cli.main restores it), the one variable every child call and
    # measurement worker reads. (benchmark --timeout means the same, held in its config; a
    # whole command's is --time-budget.)
    "timeout": (
        "--timeout",
        {
            "type": time_limit,
            "metavar": "SECONDS",
            "help": "time limit of each native step, run in a child process (a conversion, a "
            "calibration, a fine-tune, a measurement): 90s, 10m or 2h, at most a week "
            "(default: TFCOMPRESS_TIMEOUT, else 6h)",
        },
    ),
}


def add_shared_flags(parser: argparse.ArgumentParser, *names: str) -> None:
    """Add the shared flags ``names`` (keys of ``_SHARED_FLAGS``) to ``parser``, in order."""
    for name in names:
        flag, keywords = _SHARED_FLAGS[name]
        parser.add_argument(flag, **keywords)
