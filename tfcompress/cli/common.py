"""Argument helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from typing import IO, Any

MAX_SECONDS = 3600.0
"""The longest minimum measuring time a command accepts, per measurement."""
MAX_SEED = 2**32 - 1


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    """``--json``: print one JSON object on stdout instead of the human table."""
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object on stdout (logs stay on stderr)"
    )


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
        default=100,
        metavar="N",
        help="compare at most N samples of --data (default 100)",
    )


def add_force_flag(parser: argparse.ArgumentParser) -> None:
    """``--force``: allow replacing an existing output file."""
    parser.add_argument("--force", action="store_true", help="replace OUT if it exists")


def add_unsafe_flag(parser: argparse.ArgumentParser) -> None:
    """``--unsafe``: load Keras files with Lambda layers (arbitrary code)."""
    parser.add_argument(
        "--unsafe",
        action="store_true",
        help="load Keras files holding Lambda layers (they can run arbitrary code)",
    )


def add_custom_objects_flag(parser: argparse.ArgumentParser) -> None:
    """``--custom-objects FILE.py``: the model's custom Keras classes, by running that file."""
    parser.add_argument(
        "--custom-objects",
        metavar="FILE.py",
        help="a Python file defining the model's custom Keras classes (its CUSTOM_OBJECTS "
        "dict, else its public classes); tfcompress imports it, which runs its code",
    )


def load_cli_model(args: argparse.Namespace, path: str | None = None) -> Any:
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
    from tfcompress.models import load_model

    objects = getattr(args, "custom_objects", None) or None
    path = args.model if path is None else path
    return load_model(path, safe_mode=not args.unsafe, custom_objects=objects)


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
    parser.add_argument(
        "--batch-dim",
        action="append",
        type=argument_type("tfcompress.models.feeding:parse_batch_dim"),
        default=[],
        metavar="NAME=DIM",
        help="the dimension of input NAME that is the batch, when its signature cannot tell "
        "(e.g. h=1 for a (layers, N, units) state); repeat per input. Where outputs are "
        "compared (gate, --eval), an output's NAME too (e.g. stateN=1)",
    )
    parser.add_argument(
        "--input-value",
        action="append",
        type=argument_type("tfcompress.models.feeding:parse_input_value"),
        default=[],
        metavar="NAME=VALUE",
        help="one value fed to input NAME on every call (a scalar such as sr=16000, or an "
        "input the data does not hold, e.g. h=0 for a zero state); repeat per input",
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


def seconds(text: str) -> float:
    """An argparse ``type`` for a duration in seconds: finite, from 0 to an hour.

    Example:
        >>> seconds("0.5")
        0.5
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and 0 <= value <= MAX_SECONDS):
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds from 0 to {MAX_SECONDS:g}, got {text}"
        )
    return value


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


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """An argparse ``type`` for a finite number > 0.

    Example:
        >>> positive_float("0.35")
        0.35
    """
    value = _finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """An argparse ``type`` for a finite number >= 0 (seconds of warm-up, say).

    Example:
        >>> non_negative_float("0")
        0.0
    """
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


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


def add_timeout_flag(parser: argparse.ArgumentParser, *, what: str | None = None) -> None:
    """``--timeout``: the time limit of each native step in a child process.

    It sets ``TFCOMPRESS_TIMEOUT`` for the run (:func:`tfcompress.cli.main` restores it), the
    one variable every child call and measurement worker reads. ``what`` says what it bounds
    where that is not each step (``mcu``: the whole check).
    """
    bounds = what or (
        "each native step, run in a child process (a conversion, a calibration, a fine-tune, "
        "a measurement)"
    )
    parser.add_argument(
        "--timeout",
        type=time_limit,
        metavar="SECONDS",
        help=f"time limit of {bounds}: 90s, 10m or 2h, at most a week "
        "(default: TFCOMPRESS_TIMEOUT, else 6h)",
    )


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


def named_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """An argparse ``type`` for ``NAME=1x43844x1`` (a shape for one named input).

    Example:
        >>> named_shape("audio=1x16000")
        ('audio', (1, 16000))
    """
    from tfcompress.bench.inputs import parse_input_shape
    from tfcompress.errors import InvalidInputError

    try:
        return parse_input_shape(text)
    except InvalidInputError as error:
        raise argparse.ArgumentTypeError(str(error)) from error
