"""Typed errors. Every message says what is wrong and what to do next.

The CLI maps :attr:`TFCompressError.exit_code` to its exit status: 2 for bad usage or
input, 1 for a check (gate, budget) that failed. A name a model or the user controls (a
tensor name, a ``--rules``) is shown through :func:`shown_name`: escaped and bounded, so a
message stays one readable line.
"""

from __future__ import annotations

import re

__all__ = [
    "BackendUnavailableError",
    "ChildTimeoutError",
    "ConversionError",
    "GateFailedError",
    "InvalidArgumentTypeError",
    "InvalidDataError",
    "InvalidInputError",
    "MissingDependencyError",
    "ModelLoadError",
    "NativeCrashError",
    "OutputExistsError",
    "OutputLocationError",
    "ResourceLimitError",
    "RuntimeRefusedError",
    "SettingUnavailableError",
    "TFCompressError",
    "UnknownNameError",
    "UnsupportedModelError",
    "bounded",
    "shown_name",
]

#: Characters of a name a message or a table shows at most (:func:`shown_name`).
SHOWN_NAME_LIMIT = 200
#: Characters of one quoted value a message keeps at most (:func:`bounded`); a message is
#: at most four times as long.
SHOWN_VALUE_LIMIT = 1000


class TFCompressError(Exception):
    """Base class of every error tfcompress raises on purpose.

    Its text is :func:`bounded`: a value the message quotes (a 200,000-character option or
    report field) is cut with its length, wherever the message was written.
    """

    exit_code: int = 2

    def __str__(self) -> str:
        return bounded(super().__str__())


class InvalidInputError(TFCompressError, ValueError):
    """An option or argument the user gave cannot be used (unknown recipe, bad range...)."""


class UnknownNameError(InvalidInputError):
    """A name no registry holds (a target, backend, method, metric, recipe...); lists them."""


class InvalidDataError(InvalidInputError):
    """Data does not fit the model: wrong shape or dtype, NaN/Inf, empty, missing labels."""


class InvalidArgumentTypeError(InvalidInputError, TypeError):
    """An argument of the wrong type (e.g. ``None`` where a model is expected)."""


class ModelLoadError(InvalidInputError):
    """A model file is missing, truncated, corrupt or not in the format its name claims."""


class RuntimeRefusedError(ModelLoadError):
    """A file that passed the structural checks crashed, hung or was refused by its runtime.

    The file's own verdict, not bad usage: a command measuring several artifacts reports
    it as that artifact's error row and goes on with the others.
    """


class UnsupportedModelError(InvalidInputError):
    """A valid model that this operation cannot handle (e.g. several inputs, subclassed)."""


class OutputExistsError(InvalidInputError):
    """The output path exists (pass overwrite/--force) or would overwrite an input."""


class OutputLocationError(InvalidInputError):
    """The output cannot be written there: missing or read-only folder, name too long."""


class ConversionError(TFCompressError):
    """The TFLite/ONNX converter rejected the model."""


class NativeCrashError(TFCompressError):
    """Native code crashed in the child process tfcompress ran it in (:mod:`tfcompress._child`).

    The caller survives: the message names the signal, the child's last words and what to
    try. Model and data bytes drive that code (a NaN weight, a huge calibration value), so it
    is the input's error: the CLI exits 2.

    Attributes:
        signal_number: The signal that ended the child (0: it exited without one).
        exit_status: How it ended: ``-N`` for signal N, else its exit status (None: unknown).
        said: What the child wrote on stderr during the call (its tail).
    """

    signal_number: int = 0
    exit_status: int | None = None
    said: bytes = b""


class ChildTimeoutError(TFCompressError):
    """Work in a child process ran past its time limit and was stopped (``TFCOMPRESS_TIMEOUT``).

    Attributes:
        seconds: The time limit that passed.
        said: What the child wrote on stderr during the call (its tail).
    """

    seconds: float = 0.0
    said: bytes = b""


class ResourceLimitError(TFCompressError):
    """A child process needed more memory than its limit, or could not be started.

    The limit is ``TFCOMPRESS_MEMORY_LIMIT`` (:data:`tfcompress._limits.CHILD_MEMORY`).
    """


class MissingDependencyError(TFCompressError, ImportError):
    """An optional dependency is not installed; the message names the pip command."""


class BackendUnavailableError(TFCompressError):
    """A runtime backend (GPU, Edge TPU, ONNX Runtime...) is not available here."""


class SettingUnavailableError(BackendUnavailableError):
    """The backend runs here, but not with this setting in this process.

    Raised instead of running with another setting than the one asked for, so that no report
    labels a row with a setting that did not happen. The benchmark harness turns it into an
    ``unavailable: <reason>`` row for that setting and measures the others.

    Example:
        >>> create_runner(model, backend="keras", threads=4)  # doctest: +SKIP
        Traceback (most recent call last):
        ...
        SettingUnavailableError: the keras backend cannot run with 4 thread(s) ...
    """


class GateFailedError(TFCompressError, AssertionError):
    """A compressed model lost more accuracy than allowed, or missed a budget."""

    exit_code = 1


def shown_name(name: object, limit: int = SHOWN_NAME_LIMIT) -> str:
    r"""``name`` as a terminal may show it: control characters escaped, length bounded.

    A model names its tensors as it likes: NUL, CR/LF and ANSI escape sequences would
    rewrite the terminal or split a one-line message, and a 100,000-character name would
    flood it. Control characters (C0, DEL, C1) are written as ``repr`` writes them
    (``\x1b``, ``\n``); a longer result is cut at ``limit`` characters with an ellipsis
    and the full length.

    Args:
        name: The name (anything else is shown as its ``str``).
        limit: Characters kept at most before the ellipsis.

    Returns:
        The text to print, without quotes.

    Example:
        >>> shown_name("conv\x1b[31m\n")
        'conv\\x1b[31m\\n'
        >>> shown_name("ab" * 300, limit=6)
        'ababab... (600 characters)'
    """
    text = name if isinstance(name, str) else str(name)
    if not text.isprintable():
        text = "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)
    if len(text) <= limit:
        return text
    full = len(name) if isinstance(name, str) else len(text)
    return f"{text[:limit]}... ({full:,} characters)"


def bounded(text: str, limit: int = SHOWN_VALUE_LIMIT) -> str:
    """``text`` with every run of more than ``limit`` non-space characters cut, with its length.

    A message quotes what the user or a file gave (an address, a report's field, a name), and
    the value may be any length; the one line stays readable. A message still longer than
    ``4 * limit`` (a long value with spaces in it) keeps its start and its end (what to do).
    Linear in the length of ``text``; a bounded text comes back unchanged.

    Example:
        >>> line = bounded("address tcp://" + "a" * 100_000 + ":1 is not HOST:PORT")
        >>> len(line), line[-48:]
        (1046, 'aaaaaaa... (100,008 characters) is not HOST:PORT')
    """
    cut = re.sub(
        rf"\S{{{limit + 1},}}", lambda m: f"{m[0][: limit - 3]}... ({len(m[0]):,} characters)", text
    )
    if len(cut) <= 4 * limit:
        return cut
    return f"{cut[: 2 * limit]} ... ({len(cut) - 3 * limit:,} characters cut) ... {cut[-limit:]}"
