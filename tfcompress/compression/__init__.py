"""Compress to a target: the smallest or fastest artifact that passes the accuracy gate.

:func:`compress` tries a ladder of candidates (:mod:`.candidates`) cheapest first, judges
each with :func:`tfcompress.check_gate` (:mod:`.judging`), stops when nothing left can beat
the best passing one (:mod:`.search`) and returns a :class:`CompressionResult` with every
:class:`Attempt` (recipe as data, replayable with :func:`replay`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfcompress._lazy import lazy_exports

# public name -> the module that defines it, imported on first use (PEP 562).
_LAZY = {
    "compress": "tfcompress.compression.api",
    "CompressConfig": "tfcompress.compression.config",
    "Attempt": "tfcompress.compression.attempts",
    "Rung": "tfcompress.compression.candidates",
    "plan_ladder": "tfcompress.compression.candidates",
    "replay": "tfcompress.compression.replay",
    "CompressionResult": "tfcompress.compression.result",
}
__all__ = [
    "Attempt",
    "CompressConfig",
    "CompressionResult",
    "Rung",
    "compress",
    "plan_ladder",
    "replay",
]
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

if TYPE_CHECKING:
    from tfcompress.compression.api import compress
    from tfcompress.compression.attempts import Attempt
    from tfcompress.compression.candidates import Rung, plan_ladder
    from tfcompress.compression.config import CompressConfig
    from tfcompress.compression.replay import replay
    from tfcompress.compression.result import CompressionResult
