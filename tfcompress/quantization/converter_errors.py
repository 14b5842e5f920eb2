"""What the TFLite converter's failures mean to the user, in one line each.

The converter (in its child, :mod:`tfcompress.quantization.converter`) raises MLIR's
multi-line errors with locations that mean nothing to a user, and warns through Python
warnings and TensorFlow's logs. Here: the op without an integer kernel and its fix, the
static batch an RNN needs, the first error line without its location, a crash at the
static batch asked for, and the warnings collected per conversion.

Example:
    >>> first_error(RuntimeError("<frozen runpy>:198:1: error: 'tf.X' op failed"))
    "'tf.X' op failed"
"""

from __future__ import annotations

import contextlib
import logging
import re
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from tfcompress.errors import NativeCrashError

__all__ = [
    "DYNAMIC_LIST",
    "Captured",
    "capture_warnings",
    "explain",
    "first_error",
    "saved_model_rnn",
    "static_batch_crash",
]

# What the TF 2.21 quantizer says about an op it has no integer kernel for, e.g.
# "Quantization to 16x8-bit not yet supported for op: 'NEG'."
NO_KERNEL = re.compile(
    r"Quantization (?:to (?P<bits>\S+) )?not yet supported for op: '(?P<op>[A-Za-z0-9_]+)'"
)
# An RNN whose batch is dynamic: "'tf.TensorListReserve' op requires element_shape to be
# static during TF Lite transformation pass"; a static batch (Recipe.static_batch) fixes it.
DYNAMIC_LIST = re.compile(r"TensorList\w*'? op requires element_shape to be static")
# Where MLIR says an error happened, which means nothing to the user: "<frozen runpy>:198:1: ",
# "/path/to/file.py:12:3: " (and 'loc(callsite(...)): ', see _strip_location).
_LOCATION = re.compile(r"^(?:<[^>]*>|[^\s:]+\.py)(?::\d+)*:\s*")
# ... and when an integer input/output was asked of a model whose first/last op stayed float:
# "Unsupported input type INT16 for input tensor 0 of type FLOAT32."
FLOAT_IO = re.compile(
    r"Unsupported (?P<kind>input|output) type (?P<dtype>\w+) for (?:input|output) tensor"
)


def saved_model_rnn(name: str, static_batch: int | None) -> str:
    """The fix that works for a SavedModel's recurrent layers: a static batch of 1."""
    given = (
        "needs a static batch"
        if static_batch is None
        else f"cannot take a static batch of {static_batch}"
    )
    return (
        f"the TFLite converter {given} for the recurrent layers of the SavedModel {name!r} "
        "('tf.TensorListReserve' op requires element_shape to be static): their tensor lists "
        "keep the exported dynamic batch, which only a batch of 1 replaces; pass "
        "--static-batch 1 (static_batch=1), or convert the Keras model, which is re-traced at "
        "any batch."
    )


def static_batch_crash(
    crash: NativeCrashError, name: str, configures: Sequence[Any], static_batch: int
) -> NativeCrashError:
    """A converter crash at the static batch asked for: the flag named, not the data."""
    from tfcompress._child.answers import retold
    from tfcompress._lifetime import signal_name

    made = {"float32" if c is None else c.recipe.name for c in configures}
    n = static_batch  # re-tracing a dynamic batch at it is what changed
    return retold(
        crash, f"the TFLite converter on {name!r}",
        cause=f"crashed in native code ({signal_name(crash.signal_number)}) "
        f"converting to {' and '.join(sorted(made))} at the static batch "
        f"--static-batch {n} asked for (static_batch={n}: the model re-traced "
        f"with a batch of {n})",
        fix=f"convert at the model's own batch (drop --static-batch), or export "
        f"the model with a batch of {n} and convert that",
    )  # fmt: skip


def explain(error: Exception, name: str) -> str:
    """One line: the op without an integer kernel and the fix, or the converter's error."""
    found = NO_KERNEL.search(str(error))
    if found:
        kernel = f"{found['bits']} " if found["bits"] else "integer "
        return (
            f"the TFLite converter has no {kernel}kernel for op {found['op']} in {name!r} and "
            "the recipe is integer-only; replace the layer that makes it, or drop "
            "--integer-only (integer_only=True) to keep it in float (the result lists the ops "
            "that stayed float)."
        )
    if DYNAMIC_LIST.search(str(error)):
        return (
            f"the TFLite converter needs a static batch for the recurrent layers of {name!r} "
            f"({first_error(error)}); pass --static-batch 1 (static_batch=1), or the "
            "batch size the device will run."
        )
    io = FLOAT_IO.search(str(error))
    if io:
        kind, dtype = io["kind"], io["dtype"].lower()
        return (
            f"the TFLite converter cannot give {name!r} an {dtype} {kind}: the op next to it has "
            f"no integer kernel and stays float; use --{kind}-type float32 "
            f"({kind}_type='float32')."
        )
    return (
        f"the TFLite converter rejected {name!r}: {first_error(error)}; check the model's "
        "ops are TFLite built-ins (see docs/quantization.md)."
    )


def first_error(error: Exception) -> str:
    """The converter's first error line, without MLIR's location prefixes.

    Example:
        >>> first_error(RuntimeError("<frozen runpy>:198:1: error: 'tf.X' op failed"))
        "'tf.X' op failed"
        >>> first_error(RuntimeError('<unknown>:0: error: loc(callsite("a" at "b")): boom'))
        'boom'
    """
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    found = next((line for line in lines if "error:" in line.lower()), None)
    if found is not None:  # what precedes "error:" is where MLIR was: "<unknown>:0: "
        line = found[found.lower().index("error:") + len("error:") :].strip()
    else:
        line = lines[0] if lines else type(error).__name__
    while (stripped := _strip_location(line)) != line:
        line = stripped
    return line


def _strip_location(line: str) -> str:
    """``line`` without one leading location: ``loc(callsite(...)): ``, ``file.py:12:3: ``."""
    if line.startswith("loc("):
        depth = 0
        for index, char in enumerate(line[3:], start=3):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0:
                return line[index + 1 :].lstrip(": ")
        return line
    return _LOCATION.sub("", line)


class Captured:
    """Warnings collected so far, taken (and cleared) one conversion at a time."""

    def __init__(self, caught: list[warnings.WarningMessage]) -> None:
        self.logged: list[str] = []
        self.caught = caught

    def take(self) -> tuple[str, ...]:
        """The warnings since the last take, cleared."""
        messages = (*self.logged, *(str(w.message).strip() for w in self.caught))
        self.logged.clear()
        self.caught.clear()
        return messages


@contextlib.contextmanager
def capture_warnings() -> Iterator[Captured]:
    """Collect Python warnings and TensorFlow/absl WARNING logs emitted during conversion."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        captured = Captured(caught)

        class _Collector(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                captured.logged.append(record.getMessage().strip())

        collector = _Collector(level=logging.WARNING)
        loggers = [logging.getLogger(name) for name in ("tensorflow", "absl")]
        for lg in loggers:
            lg.addHandler(collector)
        try:
            yield captured
        finally:
            for lg in loggers:
                lg.removeHandler(collector)
