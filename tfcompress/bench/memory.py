"""Resident memory of the measuring process: now (for per-row growth) and its high-water mark."""

from __future__ import annotations

import importlib
import logging
import os
import sys
from pathlib import Path

logger = logging.getLogger(__name__)

_MIB = float(1 << 20)


def peak_rss_mb() -> float | None:
    """The process's peak resident set size so far, in MiB (None where unsupported).

    This is a high-water mark of the whole process (Python, TensorFlow, every model loaded
    so far), so it only grows: it bounds the memory of a whole run, not of one model. The
    benchmark reports it per row as ``process_peak_rss_mb``, named for what it is; for what
    one row added see :func:`current_rss_mb` and ``rss_growth_mb``.

    Example:
        >>> (peak_rss_mb() or 1.0) > 0
        True
    """
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return peak / _MIB if sys.platform == "darwin" else peak / 1024


def current_rss_mb() -> float | None:
    """The process's resident set size right now, in MiB; None where it cannot be read.

    Read from ``/proc/self/statm`` on Linux (no dependency, microseconds), else from psutil
    when it happens to be installed (macOS, Windows). The standard library has no portable
    way: ``resource`` only keeps the peak.
    """
    statm = Path("/proc/self/statm")
    if statm.exists():
        try:
            resident_pages = int(statm.read_text().split()[1])
        except (OSError, ValueError, IndexError) as error:
            logger.debug("could not read %s: %s", statm, error)
        else:
            return resident_pages * os.sysconf("SC_PAGE_SIZE") / _MIB
    try:
        psutil = importlib.import_module("psutil")
    except ImportError:
        return None
    return float(psutil.Process().memory_info().rss) / _MIB


def growth_mb(before: float | None, after: float | None) -> float | None:
    """``after - before`` in MiB, or None when either reading is missing."""
    return None if before is None or after is None else after - before
