"""Moved to :mod:`tfcompress.samples.cnn`; kept so old imports go on working.

The names load on first use, so ``tfcompress.models`` imports nothing of the samples.
"""

from typing import Any

_MOVED = ["residual_cnn", "small_cnn", "train_classifier"]


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        from tfcompress.samples import cnn

        return getattr(cnn, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
