"""Compress to a target: the smallest or fastest artifact that passes the accuracy gate.

:func:`compress` tries a ladder of candidates (:mod:`.candidates`) cheapest first, judges
each with :func:`tfcompress.check_gate`, stops when nothing left can beat
the best passing one (:mod:`.search`) and returns a :class:`CompressionResult` with every
:class:`Attempt` (recipe as data, replayable with :func:`replay`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfcompress._lazy import lazy_exports

__all__ = [
    "Attempt",
    "CompressConfig",
    "CompressionResult",
    "Rung",
    "compress",
    "plan_ladder",
    "replay",
]
__getattr__, __dir__ = lazy_exports(__name__)

if TYPE_CHECKING:
    from tfcompress.compression.api import compress
    from tfcompress.compression.attempts import Attempt
    from tfcompress.compression.candidates import Rung, plan_ladder
    from tfcompress.compression.config import CompressConfig
    from tfcompress.compression.replay import replay
    from tfcompress.compression.result import CompressionResult
