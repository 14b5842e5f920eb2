"""Moved to :mod:`tfcompress.samples.xception`; kept so old imports go on working.

The names load on first use, so ``tfcompress.models`` imports nothing of the samples.
"""

from typing import Any

_MOVED = ["mini_xception"]


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        from tfcompress.samples import xception

        return getattr(xception, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
